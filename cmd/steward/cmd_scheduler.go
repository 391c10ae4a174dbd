package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/scheduler"
)

// notConfiguredError is a job's "nothing to do: the source is not
// configured"; the command exits with scheduler.ExitNotConfigured so that the
// scheduler reports the run skipped rather than failed.
type notConfiguredError struct{ err error }

func (e notConfiguredError) Error() string { return e.err.Error() }
func (e notConfiguredError) Unwrap() error { return e.err }

// schedulerLogPath is where the scheduler writes its JSONL log.
func schedulerLogPath(home string) string {
	return filepath.Join(home, "logs", "scheduler.jsonl")
}

// loadSchedulerJobs loads the configuration and the job table.
func loadSchedulerJobs(env *cliEnv) (*config.Config, []scheduler.Job, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, nil, err
	}
	jobs, err := schedulerJobs(cfg)
	return cfg, jobs, err
}

// schedulerJobs returns the job table with the SCHED_* settings applied; an
// invalid or unknown setting is an error naming it.
func schedulerJobs(cfg *config.Config) ([]scheduler.Job, error) {
	jobs, err := scheduler.Configure(scheduler.DefaultJobs(), cfg, cfg.Names("SCHED_"))
	if err != nil {
		return nil, err
	}
	if err := cfg.Err(); err != nil {
		return nil, fmt.Errorf("invalid settings:\n%w", err)
	}
	return jobs, nil
}

// startScheduler runs the scheduler until ctx ends; stop cancels it and
// waits for its children. env is the children's environment.
func startScheduler(ctx context.Context, env *cliEnv, cfg *config.Config, jobs []scheduler.Job, childEnv []string) (s *scheduler.Scheduler, stop func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find the steward binary for the scheduler's jobs: %w", err)
	}
	lg, err := scheduler.OpenLog(schedulerLogPath(cfg.Home), 0)
	if err != nil {
		return nil, nil, err
	}
	s = scheduler.New(scheduler.Options{Self: self, Jobs: withUpToDateChecks(cfg, jobs), Env: childEnv, Log: lg, Logger: env.Log.With("component", "scheduler")})
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(runCtx) })
	env.Log.Info("scheduler started", "jobs", len(jobs), "log", lg.Path())
	return s, func() error { cancel(); wg.Wait(); return nil }, nil
}

// withUpToDateChecks gives mail-reconcile the mirror's own unchanged-tree
// test, made in the scheduler's process: an unchanged Maildir then costs a
// few stat calls and a read-only query instead of starting the binary.
func withUpToDateChecks(cfg *config.Config, jobs []scheduler.Job) []scheduler.Job {
	out := slices.Clone(jobs)
	for i := range out {
		if out[i].Name == "mail-reconcile" {
			out[i].UpToDate = func(ctx context.Context) (string, bool) { return mailUpToDate(ctx, cfg) }
		}
	}
	return out
}

// mailUpToDate reads mail.yaml afresh, as the child would, and asks the
// mirror whether a reconcile has anything to do; when it has, the answer is
// why.
func mailUpToDate(ctx context.Context, cfg *config.Config) (string, bool) {
	s, err := mail.LoadSettings(cfg, mail.UserHome())
	if err != nil {
		return "", false // the child reports it (e.g. not configured)
	}
	f := mirror.CheckUnchanged(ctx, mirror.CheckOptions{DBPath: s.DBPath, Accounts: s.Config.Accounts})
	if !f.Unchanged {
		return f.Reason, false
	}
	return fmt.Sprintf("%d Maildir folders as the last reconcile recorded them; no child started", f.Folders), true
}

func init() {
	register(&command{
		Name:    "scheduler",
		Summary: "run the background jobs (mail, embeddings, calendar, contacts, …) or show their status",
		Run:     runSchedulerCommand,
	})
}

func runSchedulerCommand(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "status" {
		return schedulerStatus(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	var b strings.Builder
	for _, j := range scheduler.DefaultJobs() {
		fmt.Fprintf(&b, "  %-19s every %-6s steward %s\n", j.Name, j.Interval, strings.Join(j.Args, " "))
	}
	fs := newFlagSet(env, "scheduler", "[run] | status [--json]", `
Runs Steward's background jobs until interrupted: each job is the steward command shown, run as a
child process once at start and then at its interval, killed at its timeout, never overlapping
itself (a tick that finds the previous run still going is skipped and logged). A job whose
source is not configured is reported "skipped: not configured"; one whose command this build
does not have is reported unavailable. 'steward serve' runs the same scheduler unless
STEWARD_SCHEDULER=off. Every start and end goes to STEWARD_HOME/logs/scheduler.jsonl.

Jobs:
`+b.String()+`
Settings: SCHED_<JOB>_MIN (interval, 1–1440 minutes), SCHED_<JOB>_TIMEOUT_MIN, and the finer
SCHED_<JOB>_SEC / SCHED_<JOB>_TIMEOUT_SEC (seconds, for tests), e.g. SCHED_MAIL_RECONCILE_MIN=5.

'steward scheduler status [--json]' shows each job's last start, end, result, next run and skips.`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, jobs, err := loadSchedulerJobs(env)
	if err != nil {
		return err
	}
	childEnv := append(os.Environ(), "STEWARD_HOME="+cfg.Home)
	_, stop, err := startScheduler(ctx, env, cfg, jobs, childEnv)
	if err != nil {
		return err
	}
	<-ctx.Done()
	env.Log.Info("scheduler stopping: waiting for running jobs")
	return stop()
}

func schedulerStatus(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "scheduler status", "[--json]", `
Shows each background job as the scheduler log (STEWARD_HOME/logs/scheduler.jsonl) tells it for
the latest scheduler process: state, last start and end, result, next run and skipped ticks.
"not observed" means that process has not finished a run of the job yet; it is not a failure
(the earlier result, if any, is shown as history).`)
	asJSON := fs.Bool("json", false, "print as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, jobs, err := loadSchedulerJobs(env)
	if err != nil {
		return err
	}
	st, err := scheduler.StatusFromLog(schedulerLogPath(cfg.Home), jobs)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, st)
	}
	printSchedulerStatus(env.Stdout, st)
	return nil
}

func printSchedulerStatus(w io.Writer, st *scheduler.LogStatus) {
	switch {
	case st.Started == nil:
		fmt.Fprintf(w, "no scheduler has run yet (log %s)\n", st.Log)
	case st.Stopped != nil:
		fmt.Fprintf(w, "scheduler (pid %d) ran from %s to %s\n", st.SchedulerPID, localTime(st.Started), localTime(st.Stopped))
	default:
		fmt.Fprintf(w, "scheduler pid %d, started %s\n", st.SchedulerPID, localTime(st.Started))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tLAST START\tLAST END\tRESULT\tNEXT RUN\tSKIPS")
	for _, j := range st.Jobs {
		result := j.LastResult
		if j.LastError != "" {
			result += ": " + firstLine(j.LastError)
		}
		if j.LastDetail != "" {
			result += ": " + j.LastDetail
		}
		if j.State == scheduler.StateUnavailable {
			result = j.Unavailable
		}
		if !j.Observed && j.Earlier != nil {
			result = fmt.Sprintf("(earlier: %s at %s)", j.Earlier.LastResult, localTime(j.Earlier.LastEnd))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", j.Name, j.State, localTime(j.LastStart), localTime(j.LastEnd), result, localTime(j.NextRun), j.Skips)
	}
	tw.Flush()
}

func localTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// asNotConfigured marks err as "not configured" when it is one.
func asNotConfigured(err error, sentinels ...error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return notConfiguredError{err}
		}
	}
	return err
}
