package scheduler

import (
	"fmt"
	"strings"
	"time"
)

// Job is one periodic background job: a command line of the steward binary
// run as a child process.
type Job struct {
	// Name is the job's name in logs, settings (SCHED_<NAME>_MIN) and status.
	Name string
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
}

// DefaultJobs is the spec's job table with its default intervals. Jobs whose
// command another part of Steward provides (write confirmation, promotion,
// the Action Center) are listed too: the scheduler reports them
// "command not available in this build" until the binary has the command,
// and runs them as soon as it does.
func DefaultJobs() []Job {
	return []Job{
		{Name: "mail-reconcile", Args: []string{"mail", "reconcile", "--json"}, Interval: 10 * time.Minute, Timeout: 30 * time.Minute,
			Summary: "ingest new, changed and removed mail files into the mirror"},
		{Name: "mail-embed", Args: []string{"mail", "embed", "--json"}, Interval: 15 * time.Minute, Timeout: 60 * time.Minute,
			Summary: "embed mirrored mail that has no vector yet"},
		{Name: "calendar-sync", Args: []string{"calendar", "sync", "--json"}, Interval: 10 * time.Minute, Timeout: 15 * time.Minute,
			Summary: "update the calendar index from its sources"},
		{Name: "contacts-index", Args: []string{"contacts", "index", "--json"}, Interval: 60 * time.Minute, Timeout: 15 * time.Minute,
			Summary: "update the contacts index from its sources"},
		{Name: "write-ops-mail", Args: []string{"writeops", "confirm-mail", "--json"}, Interval: 10 * time.Minute, Timeout: 10 * time.Minute,
			Summary: "confirm mail writes against the mirror"},
		{Name: "write-ops-calendar", Args: []string{"writeops", "confirm-calendar", "--json"}, Interval: 10 * time.Minute, Timeout: 10 * time.Minute,
			Summary: "confirm calendar writes against the index"},
		{Name: "write-ops-send-due", Args: []string{"writeops", "send-due", "--json"}, Interval: 2 * time.Minute, Timeout: 5 * time.Minute,
			Summary: "send scheduled mail whose time has come"},
		{Name: "mail-distill", Args: []string{"mail", "promote", "--json"}, Interval: 15 * time.Minute, Timeout: 60 * time.Minute,
			Summary: "promote durable knowledge from new mail threads into the wiki"},
		{Name: "action-center", Args: []string{"actions", "scan", "--json"}, Interval: 10 * time.Minute, Timeout: 30 * time.Minute,
			Summary: "scan mail into Action Center items"},
		{Name: "backup", Args: []string{"backup", "scheduled", "--json"}, Interval: 24 * time.Hour, Timeout: 2 * time.Hour,
			Summary: "operational backup into STEWARD_BACKUP_DIR, keeping the newest STEWARD_BACKUP_KEEP (not configured without the folder)"},
	}
}

// SettingName returns the setting that overrides a job's value: the
// interval in minutes for suffix "MIN", e.g. SCHED_MAIL_RECONCILE_MIN.
func SettingName(job, suffix string) string {
	return "SCHED_" + strings.ToUpper(strings.ReplaceAll(job, "-", "_")) + "_" + suffix
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
			known[SettingName(j.Name, suffix)] = true
		}
		j.Interval = minutesOrSeconds(s, j.Name, "", j.Interval)
		j.Timeout = minutesOrSeconds(s, j.Name, "TIMEOUT_", j.Timeout)
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

func minutesOrSeconds(s Settings, job, prefix string, def time.Duration) time.Duration {
	if v, ok := s.Lookup(SettingName(job, prefix+"SEC")); ok && strings.TrimSpace(v) != "" {
		return time.Duration(s.Int(SettingName(job, prefix+"SEC"), int64(def/time.Second), 1, 86400)) * time.Second
	}
	return time.Duration(s.Int(SettingName(job, prefix+"MIN"), int64(def/time.Minute), 1, 1440)) * time.Minute
}
