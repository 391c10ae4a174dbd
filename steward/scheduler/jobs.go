package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Job is one periodic background job: a command line of the steward binary
// run as a child process.
type Job struct {
	// Name is the job's name in logs and status.
	Name string
	// Setting is the setting overriding the interval in minutes
	// (SCHED_<NAME>_MIN); its _SEC, _TIMEOUT_MIN and _TIMEOUT_SEC siblings
	// share its stem.
	Setting string
	// Args are the arguments given to the steward binary, e.g.
	// ["mail", "reconcile", "--json"]. The job's --json summary on stdout
	// becomes the summary counts of its log line.
	Args []string
	// Interval is how often the job runs; its first run is at start.
	Interval time.Duration
	// Timeout bounds one run; the child is killed when it passes.
	Timeout time.Duration
	// Summary says what the job does, for status and help.
	Summary string
	// UpToDate, when set, is asked before each run whether the job has
	// anything to do; when it answers true the run ends "up to date" with
	// detail (what it checked) and no child is started; when false, detail
	// (why the child is needed) goes on the run's start line. A check made
	// in the scheduler's long-lived process costs far less than starting
	// the binary, which is most of an unchanged mail reconcile. It must
	// write nothing, and answer false whenever it is unsure: the child then
	// runs and decides.
	UpToDate func(ctx context.Context) (detail string, upToDate bool)
}

// DefaultJobs is the spec's job table with its default intervals. Jobs whose
// command another part of Steward provides (write confirmation, promotion,
// the Action Center) are listed too: the scheduler reports them
// "command not available in this build" until the binary has the command,
// and runs them as soon as it does.
func DefaultJobs() []Job {
	return []Job{
		{Name: "mail-reconcile", Setting: "SCHED_MAIL_RECONCILE_MIN", Args: []string{"mail", "reconcile", "--json"}, Interval: 10 * time.Minute, Timeout: 30 * time.Minute,
			Summary: "ingest new, changed and removed mail files into the mirror"},
		{Name: "mail-embed", Setting: "SCHED_MAIL_EMBED_MIN", Args: []string{"mail", "embed", "--json"}, Interval: 15 * time.Minute, Timeout: 60 * time.Minute,
			Summary: "embed mirrored mail that has no vector yet"},
		{Name: "calendar-sync", Setting: "SCHED_CALENDAR_SYNC_MIN", Args: []string{"calendar", "sync", "--json"}, Interval: 10 * time.Minute, Timeout: 15 * time.Minute,
			Summary: "update the calendar index from its sources"},
		{Name: "contacts-index", Setting: "SCHED_CONTACTS_INDEX_MIN", Args: []string{"contacts", "index", "--json"}, Interval: 60 * time.Minute, Timeout: 15 * time.Minute,
			Summary: "update the contacts index from its sources"},
		{Name: "write-ops-mail", Setting: "SCHED_WRITE_OPS_MAIL_MIN", Args: []string{"writeops", "confirm-mail", "--json"}, Interval: 10 * time.Minute, Timeout: 10 * time.Minute,
			Summary: "confirm mail writes against the mirror"},
		{Name: "write-ops-calendar", Setting: "SCHED_WRITE_OPS_CALENDAR_MIN", Args: []string{"writeops", "confirm-calendar", "--json"}, Interval: 10 * time.Minute, Timeout: 10 * time.Minute,
			Summary: "confirm calendar writes against the index"},
		{Name: "write-ops-send-due", Setting: "SCHED_WRITE_OPS_SEND_DUE_MIN", Args: []string{"writeops", "send-due", "--json"}, Interval: 2 * time.Minute, Timeout: 5 * time.Minute,
			Summary: "send scheduled mail whose time has come"},
		{Name: "mail-distill", Setting: "SCHED_MAIL_DISTILL_MIN", Args: []string{"mail", "promote", "--json"}, Interval: 15 * time.Minute, Timeout: 60 * time.Minute,
			Summary: "promote durable knowledge from new mail threads into the wiki"},
		{Name: "action-center", Setting: "SCHED_ACTION_CENTER_MIN", Args: []string{"actions", "scan", "--json"}, Interval: 10 * time.Minute, Timeout: 30 * time.Minute,
			Summary: "scan mail into Action Center items"},
		{Name: "backup", Setting: "SCHED_BACKUP_MIN", Args: []string{"backup", "scheduled", "--json"}, Interval: 24 * time.Hour, Timeout: 2 * time.Hour,
			Summary: "operational backup into STEWARD_BACKUP_DIR, keeping the newest STEWARD_BACKUP_KEEP (not configured without the folder)"},
	}
}

// SettingName returns the setting of a job's value for suffix: "MIN" (the
// interval, the job's Setting), "SEC", "TIMEOUT_MIN" or "TIMEOUT_SEC".
func (j Job) SettingName(suffix string) string {
	return strings.TrimSuffix(j.Setting, "MIN") + suffix
}

// Settings reads validated values; steward/config.Config satisfies it.
type Settings interface {
	Int(name string, def, lo, hi int64) int64
	Lookup(name string) (string, bool)
}

// Configure applies the SCHED_* settings to jobs: SCHED_<JOB>_MIN and
// SCHED_<JOB>_TIMEOUT_MIN in whole minutes (1–1440), and the finer
// SCHED_<JOB>_SEC and SCHED_<JOB>_TIMEOUT_SEC in seconds (1–86400), which
// take precedence and exist for tests and experiments. Invalid values are
// recorded by s (config.Config.Err names them). names lists every SCHED_*
// key set; one that names no job is returned as an error, so that a
// misspelt job never silently keeps its default.
func Configure(jobs []Job, s Settings, names []string) ([]Job, error) {
	out := make([]Job, len(jobs))
	known := map[string]bool{"STEWARD_SCHEDULER": true}
	for i, j := range jobs {
		for _, suffix := range []string{"MIN", "SEC", "TIMEOUT_MIN", "TIMEOUT_SEC"} {
			known[j.SettingName(suffix)] = true
		}
		j.Interval = minutesOrSeconds(s, j, "", j.Interval)
		j.Timeout = minutesOrSeconds(s, j, "TIMEOUT_", j.Timeout)
		out[i] = j
	}
	var unknown []string
	for _, n := range names {
		if strings.HasPrefix(n, "SCHED_") && !known[n] {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		var jn []string
		for _, j := range jobs {
			jn = append(jn, j.Name)
		}
		return nil, fmt.Errorf("%s: no such scheduler setting; jobs are %s (SCHED_<JOB>_MIN, _TIMEOUT_MIN, _SEC, _TIMEOUT_SEC)",
			strings.Join(unknown, ", "), strings.Join(jn, ", "))
	}
	return out, nil
}

func minutesOrSeconds(s Settings, job Job, prefix string, def time.Duration) time.Duration {
	if v, ok := s.Lookup(job.SettingName(prefix + "SEC")); ok && strings.TrimSpace(v) != "" {
		return time.Duration(s.Int(job.SettingName(prefix+"SEC"), int64(def/time.Second), 1, 86400)) * time.Second
	}
	return time.Duration(s.Int(job.SettingName(prefix+"MIN"), int64(def/time.Minute), 1, 1440)) * time.Minute
}
