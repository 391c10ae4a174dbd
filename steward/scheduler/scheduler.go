// Package scheduler is Steward's background plane: a thin orchestrator that
// runs each periodic job (mail reconcile, embeddings, calendar and contacts
// indexing, write confirmation, …) as a child process of the steward binary,
// once at start and then at its interval, with a per-run timeout, no overlap
// between runs of one job, isolated failures and a JSONL log.
package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/redact"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// ExitNotConfigured is the exit status by which a job says that its source
// is not configured: the run is reported "skipped: not configured", not
// failed.
const ExitNotConfigured = 3

// Run results.
const (
	ResultOK          = "ok"
	ResultUpToDate    = "up to date" // the job's UpToDate check found nothing to do; no child ran
	ResultFailed      = "failed"
	ResultTimeout     = "timeout"
	ResultSkipped     = "skipped"     // the job's source is not configured
	ResultInterrupted = "interrupted" // the scheduler stopped during the run
)

// Job states in Status.
const (
	StateNotObserved = "not observed" // no run seen by this scheduler process yet
	StateRunning     = "running"
	StateIdle        = "idle"
	StateUnavailable = "unavailable" // the binary has no such command
)

// killGrace is how long a job gets after SIGTERM before SIGKILL.
const killGrace = 5 * time.Second

// Options configures a Scheduler.
type Options struct {
	// Self is the steward binary each job runs.
	Self string
	// Jobs to run (DefaultJobs after Configure).
	Jobs []Job
	// Env is the children's environment; nil inherits this process's.
	Env []string
	// Log is the JSONL log (STEWARD_HOME/logs/scheduler.jsonl).
	Log *Log
	// Logger receives human-readable lines; nil discards.
	Logger *slog.Logger
	// KillGrace overrides the SIGTERM-to-SIGKILL delay (default 5 s).
	KillGrace time.Duration
}

// Scheduler runs jobs. Its methods are safe for concurrent use.
type Scheduler struct {
	opts Options
	log  *slog.Logger
	mu   sync.Mutex
	jobs []*jobState
	wg   sync.WaitGroup
}

type jobState struct {
	Job
	status JobStatus
}

// New returns a scheduler; nothing runs until Run.
func New(opts Options) *Scheduler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = killGrace
	}
	s := &Scheduler{opts: opts, log: opts.Logger}
	for _, j := range opts.Jobs {
		s.jobs = append(s.jobs, &jobState{Job: j, status: JobStatus{Name: j.Name, Summary: j.Summary, Command: strings.Join(j.Args, " "),
			IntervalSeconds: int64(j.Interval / time.Second), TimeoutSeconds: int64(j.Timeout / time.Second), State: StateNotObserved}})
	}
	return s
}

// Run probes which jobs the binary provides, then runs each available job
// at start and at its interval until ctx ends, and waits for running
// children to stop (they get SIGTERM, then SIGKILL after the grace).
func (s *Scheduler) Run(ctx context.Context) error {
	names := make([]string, len(s.jobs))
	for i, j := range s.jobs {
		names[i] = j.Name
	}
	s.record(Record{Event: EventSchedulerStart, PID: os.Getpid(), Jobs: names})
	var loops sync.WaitGroup
	for _, js := range s.jobs {
		if reason := s.probe(ctx, js.Job); reason != "" {
			s.mu.Lock()
			js.status.State, js.status.Unavailable = StateUnavailable, reason
			s.mu.Unlock()
			s.record(Record{Event: EventUnavailable, Job: js.Name, Reason: reason})
			continue
		}
		loops.Go(func() { s.loop(ctx, js) })
	}
	loops.Wait()
	s.wg.Wait()
	s.record(Record{Event: EventSchedulerStop, PID: os.Getpid()})
	return ctx.Err()
}

// probe asks the binary for the job's help: a command it does not have
// makes the job unavailable (with the reason) instead of failing every run.
func (s *Scheduler) probe(ctx context.Context, j Job) string {
	args := helpArgs(j.Args)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(pctx, s.opts.Self, args...)
	cmd.Env = s.opts.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "scheduler stopped"
		}
		first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		return fmt.Sprintf("command not available in this build (steward %s: %s)", strings.Join(args[:len(args)-1], " "), first)
	}
	return ""
}

// helpArgs turns a job's command line into its --help request: the words
// before the first flag.
func helpArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		out = append(out, a)
	}
	return append(out, "--help")
}

func (s *Scheduler) loop(ctx context.Context, js *jobState) {
	t := time.NewTicker(js.Interval)
	defer t.Stop()
	s.tick(ctx, js, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.tick(ctx, js, now)
		}
	}
}

// tick starts a run unless the previous one is still going, in which case
// the tick is skipped and logged.
func (s *Scheduler) tick(ctx context.Context, js *jobState, now time.Time) {
	next := now.Add(js.Interval)
	s.mu.Lock()
	// A tick and the stop can arrive together (select picks either): once
	// stopped, nothing may be marked running, or the job would stay
	// "running" with no run behind it.
	if ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	js.status.NextRun = &next
	if js.status.State == StateRunning {
		js.status.Skips++
		js.status.LastSkip = &now
		s.mu.Unlock()
		s.log.Warn("scheduler: previous run still going; skipping this tick", "job", js.Name, "next", next.Format(time.RFC3339))
		s.record(Record{Event: EventSkip, Job: js.Name, Reason: "previous run still running", Next: &next})
		return
	}
	js.status.State = StateRunning
	js.status.Runs++
	run := js.status.Runs
	s.mu.Unlock()
	s.wg.Go(func() { s.execute(ctx, js, run, next) })
}

// execute runs one child to its end, its timeout or the scheduler's stop.
func (s *Scheduler) execute(ctx context.Context, js *jobState, run int64, next time.Time) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, js.Timeout)
	defer cancel()
	var why string // the check's reason for starting the child
	if js.UpToDate != nil {
		detail, upToDate := s.upToDate(rctx, js)
		if upToDate {
			s.record(Record{TS: start.UTC(), Event: EventStart, Job: js.Name, Run: run})
			s.finish(js, start, Record{Event: EventEnd, Job: js.Name, Run: run, Next: &next, Result: ResultUpToDate, Reason: detail})
			return
		}
		why = detail
	}
	cmd := exec.CommandContext(rctx, s.opts.Self, js.Args...)
	cmd.Env = s.opts.Env
	stdout := &limitedBuffer{limit: 1 << 20}
	stderr := &tailBuffer{limit: 16 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return terminateGroup(cmd) }
	cmd.WaitDelay = s.opts.KillGrace
	rec := Record{Event: EventEnd, Job: js.Name, Run: run, Next: &next}
	if err := cmd.Start(); err != nil {
		s.record(Record{Event: EventStart, Job: js.Name, Run: run})
		rec.Result, rec.Error = ResultFailed, "start: "+err.Error()
		if ctx.Err() != nil { // stopped between the tick and the start
			rec.Result, rec.Error = ResultInterrupted, "the scheduler stopped before the run started"
		}
		s.finish(js, start, rec)
		return
	}
	s.mu.Lock()
	js.status.LastStart, js.status.PID = &start, cmd.Process.Pid
	s.mu.Unlock()
	s.record(Record{Event: EventStart, Job: js.Name, Run: run, PID: cmd.Process.Pid, Reason: why})
	err := cmd.Wait()
	killGroup(cmd) // anything the job left behind
	code := cmd.ProcessState.ExitCode()
	rec.Exit = &code
	rec.PID = cmd.Process.Pid
	rec.Summary = summaryCounts(stdout.Bytes())
	switch {
	case err == nil:
		rec.Result = ResultOK
	case errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		rec.Result, rec.Error = ResultTimeout, fmt.Sprintf("killed after the %s timeout", js.Timeout)
	case ctx.Err() != nil:
		rec.Result, rec.Error = ResultInterrupted, "the scheduler stopped during the run"
	case code == ExitNotConfigured:
		rec.Result, rec.Error = ResultSkipped, localsource.NotConfiguredLine(errorText(stderr.String(), js.Args))
	default:
		rec.Result, rec.Error = ResultFailed, errorText(stderr.String(), js.Args)
		if rec.Error == "" {
			rec.Error = err.Error()
		}
	}
	s.finish(js, start, rec)
}

// checkTimeout bounds a job's in-process UpToDate check.
const checkTimeout = time.Minute

// upToDate asks the job's check, bounded by checkTimeout; a check that
// panics is "not sure", so that it cannot take the scheduler's process down
// any more than a crashing child could.
func (s *Scheduler) upToDate(ctx context.Context, js *jobState) (detail string, upToDate bool) {
	defer func() {
		if r := recover(); r != nil {
			detail, upToDate = fmt.Sprintf("the up-to-date check failed (%v); running the job", r), false
			s.log.Error("scheduler: a job's up-to-date check panicked; the job runs as a child", "job", js.Name, "panic", r)
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return js.UpToDate(cctx)
}

func (s *Scheduler) finish(js *jobState, start time.Time, rec Record) {
	end := time.Now()
	rec.DurationMS = end.Sub(start).Milliseconds()
	s.mu.Lock()
	js.status.State = StateIdle
	js.status.LastStart, js.status.LastEnd = &start, &end
	js.status.LastResult, js.status.LastError, js.status.LastSummary = rec.Result, rec.Error, rec.Summary
	js.status.LastDetail = rec.Reason
	js.status.LastDurationMS, js.status.PID = rec.DurationMS, 0
	js.status.Observed = true
	s.mu.Unlock()
	s.record(rec)
	attrs := []any{"job", js.Name, "result", rec.Result, "duration", time.Duration(rec.DurationMS) * time.Millisecond}
	switch rec.Result {
	case ResultOK, ResultSkipped, ResultUpToDate:
		s.log.Debug("scheduler: job finished", append(attrs, "detail", rec.Error+rec.Reason)...)
	default:
		s.log.Warn("scheduler: job did not succeed; other jobs continue", append(attrs, "err", rec.Error)...)
	}
}

// Status reports every job as this process has observed it.
func (s *Scheduler) Status() []JobStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JobStatus, len(s.jobs))
	for i, js := range s.jobs {
		out[i] = js.status
	}
	return out
}

func (s *Scheduler) record(r Record) {
	if s.opts.Log == nil {
		return
	}
	if err := s.opts.Log.Append(r); err != nil {
		s.log.Warn("scheduler: cannot write its log", "err", err)
	}
}

// summaryCounts takes the numeric top-level fields of a job's --json
// report as its summary counts.
func summaryCounts(out []byte) map[string]float64 {
	var obj map[string]any
	if json.Unmarshal(bytes.TrimSpace(out), &obj) != nil {
		return nil
	}
	counts := map[string]float64{}
	for k, v := range obj {
		if n, ok := v.(float64); ok {
			counts[k] = n
		}
	}
	if len(counts) == 0 {
		return nil
	}
	return counts
}

// errorText picks the child's error from its stderr: the last line when it
// is {"error": "..."} (how a --json command reports its failure), else from
// the last "steward CMD:" line (the plain report) to the end, or the last
// line.
func errorText(stderr string, args []string) string {
	var report struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal([]byte(lastLine(stderr)), &report) == nil && report.Error != nil {
		return redact.String(*report.Error)
	}
	prefix := "steward "
	if len(args) > 0 {
		prefix += args[0]
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			msg := strings.Join(lines[i:], "\n")
			if _, rest, ok := strings.Cut(msg, ": "); ok {
				msg = rest
			}
			return redact.String(msg)
		}
	}
	return redact.String(lastLine(stderr))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// limitedBuffer keeps the first limit bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.limit {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
