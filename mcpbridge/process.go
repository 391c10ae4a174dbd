package mcpbridge

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// process is one running stdio server. It is the only owner of its
// exec.Cmd: one goroutine waits for the exit, so the exit is noticed even
// when something the server spawned keeps its stdout open.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our write end
	stdout *os.File // our read end
	stderr *stderrSink
	errOut *os.File      // our read end of its stderr
	copied chan struct{} // closed when stderr reaches EOF
	exited chan struct{} // closed once the process has been reaped
}

// startProcess runs cfg's command with environ plus the server's own env.
func startProcess(cfg ServerConfig, environ []string, stderr *stderrSink) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = childEnv(environ, cfg.Env) // never nil: nil would mean the host's whole environment
	cmd.Dir = cfg.Dir
	setProcessGroup(cmd)
	// Our own pipes, not exec's copying goroutines: Wait then returns as soon
	// as the server exits, even if something it spawned still holds them.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	inR.Close() // the child has its own copies now
	outW.Close()
	errW.Close()
	p := &process{
		cmd: cmd, stdin: inW, stdout: outR, stderr: stderr, errOut: errR,
		copied: make(chan struct{}), exited: make(chan struct{}),
	}
	go func() {
		_, _ = io.Copy(stderr, errR)
		close(p.copied)
	}()
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState after exited
		close(p.exited)
	}()
	return p, nil
}

// transport speaks MCP over the process's pipes; maxLine > 0 bounds one
// message (a line), onHit recording that it was exceeded.
func (p *process) transport(maxLine int, onHit func()) mcp.Transport {
	var r io.ReadCloser = p.stdout
	if maxLine > 0 {
		r = &lineLimiter{r: r, max: maxLine, onHit: onHit}
	}
	return &mcp.IOTransport{Reader: r, Writer: p.stdin}
}

// stop ends the server the way MCP asks (close its stdin), then with
// SIGTERM, then SIGKILL to its whole process group, and reports how it
// ended. It is safe to call more than once.
func (p *process) stop() string {
	_ = p.stdin.Close()
	if !p.waitExit(terminateGrace) {
		terminate(p.cmd)
		if !p.waitExit(terminateGrace) {
			killProcessGroup(p.cmd)
			<-p.exited
		}
	}
	killProcessGroup(p.cmd) // whatever it left behind
	// Read what it wrote last (usually why it died), unless a stray process
	// outside the group still holds the pipe.
	select {
	case <-p.copied:
	case <-time.After(terminateGrace):
	}
	_ = p.errOut.Close()
	_ = p.stdout.Close() // unblocks the session's reader for the same reason
	_ = p.stderr.Close()
	return p.exitStatus()
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// exitStatus describes how the process ended ("exit status 3", "signal:
// killed"), or "" while it runs.
func (p *process) exitStatus() string {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.String()
	default:
		return ""
	}
}

var errProcessExited = errors.New("the server process exited")
