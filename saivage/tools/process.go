package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/procgroup"
)

// Output and wait limits of managed processes.
const (
	// HeadBytes and HeadLines bound the output head (and tail) a process
	// result shows.
	HeadBytes = 2048
	HeadLines = 30
	// MaxResultBytes bounds a whole run/wait/kill result envelope.
	MaxResultBytes = 32768
	// DefaultWait is how long run_command and wait_process wait by default.
	DefaultWait = 2 * time.Minute
	// MaxWait bounds a requested wait.
	MaxWait = 30 * time.Minute
	// KillGrace is the time between SIGTERM and SIGKILL of a group.
	KillGrace = 2 * time.Second
	// EnvCardWorkRoot is exported to card callers' commands.
	EnvCardWorkRoot = "SAIVAGE_CARD_WORK_ROOT"
)

// inheritedEnv is the allowlist of variables commands inherit. Credentials
// are never inherited; Git identity is, when set.
var inheritedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
	"GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
}

// SanitizedEnv filters environ to the inherited allowlist (plus LC_*).
func SanitizedEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(inheritedEnv, k) || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}

// ProcessState is a managed process's state.
type ProcessState string

// Process states.
const (
	ProcRunning ProcessState = "running"
	ProcExited  ProcessState = "exited"
	ProcKilled  ProcessState = "killed"
	ProcFailed  ProcessState = "failed" // could not start
)

// Process is one managed process group started by run_command.
type Process struct {
	ID        string       `json:"id"`
	Scope     string       `json:"scope"` // card id, or "global:<agent>"
	Agent     string       `json:"agent"`
	Command   string       `json:"command"`
	Cwd       string       `json:"cwd"`
	StartedAt time.Time    `json:"started_at"`
	EndedAt   *time.Time   `json:"ended_at,omitempty"`
	State     ProcessState `json:"state"`
	ExitCode  *int         `json:"exit_code,omitempty"`
	Signal    string       `json:"signal,omitempty"`
	// Capture is the project-owned output file.
	Capture string `json:"capture"`

	pgid int
	done chan struct{}
	kill bool
}

// Processes is the registry of managed process groups.
type Processes struct {
	mu      sync.Mutex
	dir     string
	seq     int
	procs   map[string]*Process
	order   []string
	environ func() []string
	now     func() time.Time
}

// ProcessesOptions configures a registry.
type ProcessesOptions struct {
	// CaptureDir receives one output file per process.
	CaptureDir string
	// Environ is the base environment (os.Environ when nil), filtered by
	// SanitizedEnv.
	Environ func() []string
}

// NewProcesses returns an empty registry.
func NewProcesses(opts ProcessesOptions) *Processes {
	p := &Processes{dir: opts.CaptureDir, procs: map[string]*Process{}, environ: opts.Environ, now: time.Now}
	if p.environ == nil {
		p.environ = os.Environ
	}
	return p
}

// StartSpec describes a command to start.
type StartSpec struct {
	Scope, Agent, Command, Cwd string
	// Env is added after the sanitized inherited environment.
	Env []string
}

// Start runs `bash -c Command` in its own process group with output
// captured to a file.
func (r *Processes) Start(spec StartSpec) (*Process, error) {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create process capture directory: %w", err)
	}
	r.mu.Lock()
	r.seq++
	id := "p" + strconv.Itoa(r.seq) + "-" + strconv.FormatInt(r.now().UnixNano()%1e6, 36)
	r.mu.Unlock()
	capture := filepath.Join(r.dir, id+".out")
	f, err := os.OpenFile(capture, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create output capture: %w", err)
	}
	cmd := exec.Command("bash", "-c", spec.Command)
	cmd.Dir = spec.Cwd
	cmd.Env = append(SanitizedEnv(r.environ()), spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{ID: id, Scope: spec.Scope, Agent: spec.Agent, Command: spec.Command, Cwd: spec.Cwd,
		StartedAt: r.now().UTC(), State: ProcRunning, Capture: capture, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start command: %w", err)
	}
	f.Close() // the child holds its own descriptors
	p.pgid = cmd.Process.Pid
	r.mu.Lock()
	r.procs[id] = p
	r.order = append(r.order, id)
	r.mu.Unlock()
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		end := r.now().UTC()
		p.EndedAt = &end
		code := cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.Signal = ws.Signal().String()
			code = -1
		}
		if code >= 0 {
			p.ExitCode = &code
		}
		p.State = ProcExited
		if p.kill {
			p.State = ProcKilled
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.State = ProcFailed
		}
		close(p.done)
	}()
	return p, nil
}

// Get returns a snapshot of a process.
func (r *Processes) Get(id string) (Process, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[id]
	if !ok {
		return Process{}, false
	}
	return *p, true
}

// List returns snapshots of every process, oldest first.
func (r *Processes) List() []Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Process, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, *r.procs[id])
	}
	return out
}

// Wait waits up to d (or ctx) for the process to end; it reports whether it
// ended.
func (r *Processes) Wait(ctx context.Context, id string, d time.Duration) (bool, error) {
	r.mu.Lock()
	p, ok := r.procs[id]
	r.mu.Unlock()
	if !ok {
		return false, fmt.Errorf("no process %q", id)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Kill terminates a process group: SIGTERM, then SIGKILL after KillGrace.
// It waits for the leader to be reaped.
func (r *Processes) Kill(id string) error {
	r.mu.Lock()
	p, ok := r.procs[id]
	if ok {
		p.kill = true
	}
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("no process %q", id)
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(KillGrace):
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		<-p.done
	}
	// Group members that outlived the leader are killed too; wait briefly
	// until none is left.
	procgroup.Kill(p.pgid)
	return nil
}

// KillWhere kills every running process whose scope matches.
func (r *Processes) KillWhere(match func(scope string) bool) {
	var ids []string
	r.mu.Lock()
	for _, id := range r.order {
		if p := r.procs[id]; p.State == ProcRunning && match(p.Scope) {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { _ = r.Kill(id) })
	}
	wg.Wait()
}

// GlobalScope is the process scope of a global agent's commands.
func GlobalScope(agent string) string { return "global:" + agent }

// IsCardScope reports whether a process scope belongs to a card.
func IsCardScope(scope string) bool { return !strings.HasPrefix(scope, "global:") }

// Output is the shown part of a process's captured output.
type Output struct {
	Head      string `json:"head"`
	Tail      string `json:"tail,omitempty"`
	Bytes     int64  `json:"bytes"`
	Lines     int64  `json:"lines"`
	Truncated bool   `json:"truncated"`
	Complete  bool   `json:"complete"`
	Capture   string `json:"capture"`
}

// readOutput reads the capture once, normalises and redacts it, then
// selects head and tail.
func (r *Processes) readOutput(p Process, display string, redact func(string) string) Output {
	out := Output{Capture: display}
	f, err := os.Open(p.Capture)
	if err != nil {
		out.Head = "(output capture unavailable: " + err.Error() + ")"
		return out
	}
	defer f.Close()
	st, _ := f.Stat()
	out.Bytes = st.Size()
	head := make([]byte, min(out.Bytes, 64<<10))
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	// Count lines over the whole capture.
	buf := make([]byte, 64<<10)
	if _, err := f.Seek(0, io.SeekStart); err == nil {
		for {
			m, err := f.Read(buf)
			for _, c := range buf[:m] {
				if c == '\n' {
					out.Lines++
				}
			}
			if err != nil {
				break
			}
		}
	}
	if out.Bytes > 0 && lastByte(f, out.Bytes) != '\n' {
		out.Lines++ // an unterminated last line
	}
	out.Head = clip(redact(normalizeOutput(head)), HeadBytes, HeadLines, false)
	if int64(len(out.Head)) < out.Bytes {
		out.Truncated = true
		tailStart := max(out.Bytes-64<<10, 0)
		tail := make([]byte, out.Bytes-tailStart)
		if m, err := f.ReadAt(tail, tailStart); err == nil || errors.Is(err, io.EOF) {
			out.Tail = clip(redact(normalizeOutput(tail[:m])), HeadBytes, HeadLines, true)
		}
	}
	out.Complete = p.State != ProcRunning && !procgroup.Alive(p.pgid)
	return out
}

func lastByte(f *os.File, size int64) byte {
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, size-1); err != nil {
		return '\n'
	}
	return b[0]
}

// normalizeOutput keeps the valid UTF-8 text, replacing invalid bytes.
func normalizeOutput(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// clip keeps at most maxBytes and maxLines from the start (or the end).
func clip(s string, maxBytes, maxLines int, fromEnd bool) string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > maxLines {
		if fromEnd {
			lines = lines[len(lines)-maxLines:]
		} else {
			lines = lines[:maxLines]
		}
	}
	s = strings.Join(lines, "")
	if len(s) > maxBytes {
		if fromEnd {
			cut := len(s) - maxBytes
			for cut < len(s) && !utf8.RuneStart(s[cut]) {
				cut++
			}
			s = s[cut:]
		} else {
			s = truncUTF8(s, maxBytes)
		}
	}
	return s
}

// result is the run/wait/kill envelope.
type processResult struct {
	ProcessID  string       `json:"process_id"`
	Command    string       `json:"command"`
	Cwd        string       `json:"cwd"`
	State      ProcessState `json:"state"`
	ExitCode   *int         `json:"exit_code,omitempty"`
	Signal     string       `json:"signal,omitempty"`
	DurationMS int64        `json:"duration_ms"`
	GroupAlive bool         `json:"group_alive,omitempty"`
	Output     Output       `json:"output"`
	Note       string       `json:"note,omitempty"`
}

func (env *Env) processResult(p Process, note string) agent.ToolResult {
	end := env.Processes.now()
	if p.EndedAt != nil {
		end = *p.EndedAt
	}
	res := processResult{ProcessID: p.ID, Command: p.Command, Cwd: env.display(p.Cwd), State: p.State, ExitCode: p.ExitCode,
		Signal: p.Signal, DurationMS: end.Sub(p.StartedAt).Milliseconds(), Note: note,
		Output: env.Processes.readOutput(p, env.display(p.Capture), env.redact)}
	res.GroupAlive = p.State != ProcRunning && procgroup.Alive(p.pgid)
	res.Command = env.redact(res.Command)
	b, _ := json.Marshal(res)
	for len(b) > MaxResultBytes && len(res.Command) > 0 {
		res.Command = truncUTF8(res.Command, len(res.Command)/2) + "…"
		b, _ = json.Marshal(res)
	}
	if len(b) > MaxResultBytes {
		res.Output.Tail = ""
		b, _ = json.Marshal(res)
	}
	r := agent.ToolResult{Content: string(b), Data: b}
	r.IsError = p.State == ProcFailed
	return r
}

func init() {
	register("run_command", runCommandTool)
	register("wait_process", waitProcessTool)
	register("kill_process", killProcessTool)
	register("list_processes_tool", listProcessesTool)
}

func (env *Env) processScope() string {
	if env.Caller.Global() {
		return GlobalScope(env.Caller.Agent)
	}
	return env.Caller.Card
}

// ownProcess finds a process the caller may wait for or kill: card callers
// their own card's processes, global callers any.
func (env *Env) ownProcess(id string) (Process, error) {
	p, ok := env.Processes.Get(id)
	if !ok {
		return Process{}, fmt.Errorf("no process %q (see list_processes_tool)", id)
	}
	if !env.Caller.Global() && p.Scope != env.Caller.Card {
		return Process{}, fmt.Errorf("process %s belongs to %s, not to card %s", id, p.Scope, env.Caller.Card)
	}
	return p, nil
}

func waitFor(ms int) time.Duration {
	if ms <= 0 {
		return DefaultWait
	}
	return min(time.Duration(ms)*time.Millisecond, MaxWait)
}

type runArgs struct {
	Command   string `json:"command"`
	Cwd       string `json:"cwd,omitempty"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
}

func runCommandTool(env *Env) agent.Tool {
	return tool(spec("run_command", "Run a shell command with bash -c in its own process group and wait for it (default 120000 ms). "+
		"If it is still running when the wait ends it keeps running: use wait_process or kill_process with its process_id. "+
		"The result shows the exit code and the head and tail of the output (2048 bytes / 30 lines each); the full output stays in the capture file. "+
		"Card commands get $"+EnvCardWorkRoot+", a scratch directory for disposable work.",
		`{"type":"object","properties":{"command":{"type":"string","minLength":1},"cwd":{"type":"string","description":"working directory (default: the project)"},"timeout_ms":{"type":"integer","minimum":1,"description":"how long to wait before returning (the command keeps running)"}},"required":["command"],"additionalProperties":false}`),
		func(ctx context.Context, a runArgs) (agent.ToolResult, error) {
			cwd := env.Root
			if a.Cwd != "" {
				var err error
				if cwd, err = env.abs(a.Cwd); err != nil {
					return failf("cwd: %v", err), nil
				}
				if env.stateArea(cwd) == "internal" || env.stateArea(resolved(cwd)) == "internal" {
					return failf("cwd %s %v", env.display(cwd), errProtected), nil
				}
				if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
					return failf("cwd %s is not a directory", env.display(cwd)), nil
				}
			}
			var extra []string
			if !env.Caller.Global() && env.Caller.WorkRoot != "" {
				if err := os.MkdirAll(env.Caller.WorkRoot, 0o755); err != nil {
					return failf("create card work root: %v", err), nil
				}
				extra = append(extra, EnvCardWorkRoot+"="+env.Caller.WorkRoot)
			}
			p, err := env.Processes.Start(StartSpec{Scope: env.processScope(), Agent: env.Caller.Agent, Command: a.Command, Cwd: cwd, Env: extra})
			if err != nil {
				return failf("%v", err), nil
			}
			env.hint("processes", "")
			done, err := env.Processes.Wait(ctx, p.ID, waitFor(a.TimeoutMS))
			if err != nil {
				// The caller was cancelled (Stop): contain the group first.
				_ = env.Processes.Kill(p.ID)
				env.hint("processes", "")
				return agent.ToolResult{}, err
			}
			snap, _ := env.Processes.Get(p.ID)
			env.hint("processes", "")
			if !done {
				return env.processResult(snap, "still running; use wait_process or kill_process"), nil
			}
			return env.processResult(snap, ""), nil
		})
}

type processArgs struct {
	ProcessID string `json:"process_id"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
}

func waitProcessTool(env *Env) agent.Tool {
	return tool(spec("wait_process", "Wait for a process started by run_command to end (default 120000 ms) and show its result.",
		`{"type":"object","properties":{"process_id":{"type":"string"},"timeout_ms":{"type":"integer","minimum":1}},"required":["process_id"],"additionalProperties":false}`),
		func(ctx context.Context, a processArgs) (agent.ToolResult, error) {
			if _, err := env.ownProcess(a.ProcessID); err != nil {
				return failf("%v", err), nil
			}
			done, err := env.Processes.Wait(ctx, a.ProcessID, waitFor(a.TimeoutMS))
			if err != nil {
				return agent.ToolResult{}, err
			}
			snap, _ := env.Processes.Get(a.ProcessID)
			if !done {
				return env.processResult(snap, "still running after the wait"), nil
			}
			return env.processResult(snap, ""), nil
		})
}

func killProcessTool(env *Env) agent.Tool {
	return tool(spec("kill_process", "Terminate a process started by run_command and its whole process group (SIGTERM, then SIGKILL after 2 s).",
		`{"type":"object","properties":{"process_id":{"type":"string"}},"required":["process_id"],"additionalProperties":false}`),
		func(ctx context.Context, a processArgs) (agent.ToolResult, error) {
			p, err := env.ownProcess(a.ProcessID)
			if err != nil {
				return failf("%v", err), nil
			}
			note := "killed"
			if p.State != ProcRunning {
				note = "the process had already ended"
			} else if err := env.Processes.Kill(a.ProcessID); err != nil {
				return failf("%v", err), nil
			}
			env.hint("processes", "")
			snap, _ := env.Processes.Get(a.ProcessID)
			return env.processResult(snap, note), nil
		})
}

func listProcessesTool(env *Env) agent.Tool {
	return tool(spec("list_processes_tool", "List the processes started by run_command in this server's lifetime with their state.",
		`{"type":"object","properties":{},"additionalProperties":false}`),
		func(ctx context.Context, _ struct{}) (agent.ToolResult, error) {
			list := env.Processes.List()
			for i := range list {
				list[i].Command = env.redact(list[i].Command)
				list[i].Capture = env.display(list[i].Capture)
				list[i].Cwd = env.display(list[i].Cwd)
			}
			return jsonResult(map[string]any{"processes": list}), nil
		})
}
