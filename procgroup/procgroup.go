// Package procgroup runs a command in its own process group and owns that
// whole group: cancellation and deadlines kill every member, and members that
// outlive the leader are reported as contained rather than letting an
// exited-zero leader pass for success.
package procgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec is one argv to run.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Dir is the working directory.
	Dir string
	// Env is the whole environment of the child (nil: an empty one).
	Env []string
	// Stdin, when HasStdin, is written exactly to the child's standard input,
	// which is then closed; a child that stops reading before the last byte is
	// an error (IncompleteStdinError). Without HasStdin stdin is /dev/null.
	Stdin    []byte
	HasStdin bool
	// Stdout and Stderr receive the child's output (nil: discarded).
	Stdout, Stderr io.Writer
	// WaitDelay bounds how long output pipes held open by surviving group
	// members are waited for after the leader exits (default 2s).
	WaitDelay time.Duration
}

// Result is how a group ended.
type Result struct {
	// ExitCode is the leader's exit code (-1 when it was killed by a signal).
	ExitCode int
	// Signal names the signal that ended the leader, if any.
	Signal string
	// Contained is true when members of the group outlived the leader and
	// were killed: the command did not finish by itself, whatever the
	// leader's exit code.
	Contained bool
	// Cancelled is true when ctx ended (deadline or cancellation) before
	// the leader exited and the group was killed.
	Cancelled bool
}

// Succeeded reports whether the leader exited zero by itself and no member
// of its group had to be contained.
func (r Result) Succeeded() bool { return r.ExitCode == 0 && !r.Contained && !r.Cancelled }

// IncompleteStdinError reports that the child did not consume all of the
// standard input it was given.
type IncompleteStdinError struct {
	Written, Want int
	Err           error
}

func (e *IncompleteStdinError) Error() string {
	return fmt.Sprintf("stdin incomplete: %d of %d bytes written: %v", e.Written, e.Want, e.Err)
}

func (e *IncompleteStdinError) Unwrap() error { return e.Err }

// Run starts spec in a new process group and waits for it. The error is
// non-nil only when the command could not run as asked (it did not start,
// its stdin was not fully consumed, or its output could not be collected);
// exit codes, cancellation and containment are in the Result.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Argv) == 0 {
		return Result{ExitCode: -1}, errors.New("run: empty argv")
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = spec.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	var stdin io.WriteCloser
	if spec.HasStdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("run %s: stdin pipe: %w", spec.Argv[0], err)
		}
		stdin = w
	}
	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	stdinDone := make(chan error, 1)
	if stdin != nil {
		go func() {
			n, err := stdin.Write(spec.Stdin)
			if cerr := stdin.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
				err = cerr
			}
			if err != nil || n != len(spec.Stdin) {
				stdinDone <- &IncompleteStdinError{Written: n, Want: len(spec.Stdin), Err: err}
				return
			}
			stdinDone <- nil
		}()
	} else {
		stdinDone <- nil
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var res Result
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		res.Cancelled = true
		Kill(pgid)
		waitErr = <-waited
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	if Alive(pgid) {
		res.Contained = true
		Kill(pgid)
	}
	stdinErr := <-stdinDone
	var ee *exec.ExitError
	switch {
	case waitErr != nil && errors.Is(waitErr, exec.ErrWaitDelay):
		// Output held open by a group member: the group is contained.
		res.Contained = true
	case waitErr != nil && !errors.As(waitErr, &ee) && !res.Cancelled:
		return res, fmt.Errorf("wait %s: %w", spec.Argv[0], waitErr)
	}
	if stdinErr != nil && !res.Cancelled {
		return res, fmt.Errorf("run %s: %w", spec.Argv[0], stdinErr)
	}
	return res, nil
}

// Kill sends SIGKILL to every member of process group pgid and waits (up to
// a second) until none is left running.
func Kill(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for range 100 {
		if !Alive(pgid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Alive reports whether members of process group pgid still run (zombies
// waiting to be reaped do not count).
func Alive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" && fields[0] != "X" {
			return true
		}
	}
	return false
}
