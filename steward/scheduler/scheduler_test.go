package scheduler

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/config"
)

// TestMain lets the test binary stand in for the steward binary: with
// SCHED_TEST_CHILD=1 it runs the job named by its first argument, so that
// the scheduler under test launches real child processes.
func TestMain(m *testing.M) {
	if os.Getenv("SCHED_TEST_CHILD") == "1" {
		os.Exit(child(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func child(args []string) int {
	known := map[string]bool{"ok": true, "fail": true, "hang": true, "slow": true, "unconf": true}
	if len(args) == 0 || !known[args[0]] {
		fmt.Fprintf(os.Stderr, "steward: unknown command %q\n", strings.Join(args, " "))
		return 2
	}
	if args[len(args)-1] == "--help" {
		return 0
	}
	switch args[0] {
	case "ok":
		fmt.Println(`{"new": 2, "scanned": 5, "mode": "reconcile"}`)
	case "fail":
		fmt.Fprintln(os.Stderr, "level=INFO msg=working")
		fmt.Fprintln(os.Stderr, "steward fail: the source is broken")
		return 1
	case "hang":
		signal.Ignore(syscall.SIGTERM) // only SIGKILL stops it
		os.WriteFile(os.Getenv("SCHED_TEST_PIDFILE"), []byte(fmt.Sprint(os.Getpid())), 0o600)
		time.Sleep(time.Hour)
	case "slow":
		time.Sleep(2500 * time.Millisecond)
		fmt.Println(`{"done": 1}`)
	case "unconf":
		// As the binary reports a --json command's failure.
		fmt.Fprintln(os.Stderr, "level=WARN msg=\"config.env: unknown key\"")
		fmt.Fprintln(os.Stderr, `{"error":"no mail accounts configured: create mail.yaml, for example:\n\naccounts:\n  - name: personal"}`)
		return ExitNotConfigured
	}
	return 0
}

func TestSchedulerRunsRealChildren(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "hang.pid")
	lg, err := OpenLog(filepath.Join(dir, "logs", "scheduler.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Second
	jobs := []Job{
		{Name: "ok", Args: []string{"ok", "--json"}, Interval: sec, Timeout: 20 * sec},
		{Name: "fail", Args: []string{"fail"}, Interval: sec, Timeout: 20 * sec},
		{Name: "hang", Args: []string{"hang"}, Interval: time.Hour, Timeout: sec},
		{Name: "slow", Args: []string{"slow", "--json"}, Interval: sec, Timeout: 20 * sec},
		{Name: "unconf", Args: []string{"unconf", "--json"}, Interval: time.Hour, Timeout: 20 * sec},
		{Name: "missing", Args: []string{"writeops", "send-due", "--json"}, Interval: sec, Timeout: 20 * sec},
	}
	s := New(Options{Self: self, Jobs: jobs, Log: lg, KillGrace: 300 * time.Millisecond,
		Env: append(os.Environ(), "SCHED_TEST_CHILD=1", "SCHED_TEST_PIDFILE="+pidFile)})
	for _, js := range s.Status() {
		if js.State != StateNotObserved || js.Observed {
			t.Fatalf("before the first run %s is %+v, want not observed", js.Name, js)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	status := func(name string) JobStatus {
		for _, js := range s.Status() {
			if js.Name == name {
				return js
			}
		}
		t.Fatalf("no job %s", name)
		return JobStatus{}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, slow, hang := status("ok"), status("slow"), status("hang")
		if ok.Runs >= 4 && slow.Skips >= 1 && slow.Observed && hang.Observed && status("fail").Runs >= 3 && status("unconf").Observed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs did not progress: %+v", s.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done

	if st := status("hang"); st.LastResult != ResultTimeout || !strings.Contains(st.LastError, "timeout") {
		t.Errorf("hanging job = %+v, want a timeout", st)
	}
	pid, _ := os.ReadFile(pidFile)
	var hpid int
	fmt.Sscan(string(pid), &hpid)
	if hpid == 0 || syscall.Kill(hpid, 0) == nil {
		t.Errorf("the hanging child %d (ignoring SIGTERM) is still alive", hpid)
	}
	// The reason is the advice's first sentence, not the example after it.
	if st := status("unconf"); st.LastResult != ResultSkipped || st.LastError != "not configured: no mail accounts configured: create mail.yaml" {
		t.Errorf("unconfigured job = %+v", st)
	}
	if st := status("missing"); st.State != StateUnavailable || !strings.Contains(st.Unavailable, "command not available in this build") {
		t.Errorf("missing command = %+v", st)
	}

	// The log has one start and one end line per run, and the skips.
	recs, err := ReadRecords(lg.Path())
	if err != nil {
		t.Fatal(err)
	}
	starts, ends, skips := map[string]int{}, map[string]int{}, map[string]int{}
	okRuns, failRuns := 0, 0
	for _, r := range recs {
		key := fmt.Sprintf("%s#%d", r.Job, r.Run)
		switch r.Event {
		case EventStart:
			starts[key]++
		case EventEnd:
			ends[key]++
			if r.Job == "ok" && r.Result == ResultOK && (r.Summary["new"] != 2 || r.Summary["scanned"] != 5 || *r.Exit != 0) {
				t.Errorf("ok run logged as %+v, want its --json counts", r)
			}
			if r.Job == "ok" && r.Result == ResultOK {
				okRuns++
			}
			if r.Job == "fail" && r.Result != ResultInterrupted {
				failRuns++
				if r.Result != ResultFailed || r.Error != "the source is broken" || *r.Exit != 1 {
					t.Errorf("failing run logged as %+v", r)
				}
			}
			if r.Exit == nil || r.Result == "" {
				t.Errorf("end line without exit or result: %+v", r)
			}
		case EventSkip:
			skips[r.Job]++
		}
	}
	for k, n := range starts {
		if n != 1 || ends[k] != 1 {
			t.Errorf("run %s: %d start and %d end lines", k, n, ends[k])
		}
	}
	if len(starts) != len(ends) {
		t.Errorf("%d runs started, %d ended", len(starts), len(ends))
	}
	if okRuns < 3 || failRuns < 2 {
		t.Errorf("%d successful runs of the ok job beside %d failed runs and the hanging and slow ones", okRuns, failRuns)
	}
	if skips["slow"] == 0 {
		t.Errorf("skips = %v", skips)
	}
	// A tick is skipped only while a run of the same job is going.
	running := map[string]bool{}
	for _, r := range recs {
		switch r.Event {
		case EventStart:
			running[r.Job] = true
		case EventEnd:
			running[r.Job] = false
		case EventSkip:
			if !running[r.Job] {
				t.Errorf("%s skipped a tick with no run going", r.Job)
			}
		}
	}
	if recs[0].Event != EventSchedulerStart || recs[len(recs)-1].Event != EventSchedulerStop {
		t.Errorf("log does not begin and end with the scheduler: %+v … %+v", recs[0], recs[len(recs)-1])
	}

	// The log tells the same story to another process.
	ls, err := StatusFromLog(lg.Path(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, js := range ls.Jobs {
		live := status(js.Name)
		if js.LastResult != live.LastResult || js.State != live.State && live.State != StateIdle {
			t.Errorf("%s from the log = %+v, live %+v", js.Name, js, live)
		}
	}
	// A new scheduler process that has not run a job yet reports it not
	// observed, keeping the earlier result as history.
	lg.Append(Record{Event: EventSchedulerStart, PID: 1})
	ls, _ = StatusFromLog(lg.Path(), jobs)
	if js := ls.Jobs[0]; js.State != StateNotObserved || js.Observed || js.Earlier == nil || !js.Earlier.Observed || js.Earlier.LastEnd == nil {
		t.Errorf("after a restart = %+v", js)
	}
}

func TestLogRotatesBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.jsonl")
	lg, err := OpenLog(path, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := lg.Append(Record{Event: EventEnd, Job: "mail-reconcile", Run: int64(i), Result: ResultOK}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + ".1", path + ".2", path + ".3"} {
		st, err := os.Stat(p)
		if err != nil || st.Size() > 2000 {
			t.Errorf("%s: %v, size %d", p, err, st.Size())
		}
	}
	if _, err := os.Stat(path + ".4"); err == nil {
		t.Error("more rotated files than kept")
	}
	recs, _ := ReadRecords(path)
	if len(recs) == 0 || recs[len(recs)-1].Run != 199 {
		t.Fatalf("records after rotation end with %+v", recs[len(recs)-1])
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Run != recs[i-1].Run+1 {
			t.Fatalf("records out of order at %d", i)
		}
	}
}

func TestConfigureValidatesSettings(t *testing.T) {
	tests := []struct {
		vars    map[string]string
		wantErr string
		check   func(t *testing.T, jobs []Job)
	}{
		{vars: map[string]string{}, check: func(t *testing.T, jobs []Job) {
			want := map[string]time.Duration{"mail-reconcile": 10 * time.Minute, "mail-embed": 15 * time.Minute, "calendar-sync": 10 * time.Minute,
				"contacts-index": time.Hour, "write-ops-mail": 10 * time.Minute, "write-ops-calendar": 10 * time.Minute,
				"write-ops-send-due": 2 * time.Minute, "mail-distill": 15 * time.Minute, "action-center": 10 * time.Minute,
				"backup": 24 * time.Hour}
			for _, j := range jobs {
				if want[j.Name] != j.Interval {
					t.Errorf("%s every %s, want %s", j.Name, j.Interval, want[j.Name])
				}
			}
		}},
		{vars: map[string]string{"SCHED_MAIL_EMBED_MIN": "3", "SCHED_CALENDAR_SYNC_SEC": "5", "SCHED_CALENDAR_SYNC_TIMEOUT_SEC": "2"},
			check: func(t *testing.T, jobs []Job) {
				for _, j := range jobs {
					switch j.Name {
					case "mail-embed":
						if j.Interval != 3*time.Minute {
							t.Errorf("mail-embed every %s", j.Interval)
						}
					case "calendar-sync":
						if j.Interval != 5*time.Second || j.Timeout != 2*time.Second {
							t.Errorf("calendar-sync %s / %s", j.Interval, j.Timeout)
						}
					}
				}
			}},
		{vars: map[string]string{"SCHED_MAIL_RECONCILE_MIN": "0"}, wantErr: "SCHED_MAIL_RECONCILE_MIN=0: must be between 1 and 1440"},
		{vars: map[string]string{"SCHED_MAIL_RECONCILE_MIN": "-5"}, wantErr: "SCHED_MAIL_RECONCILE_MIN=-5: must be between 1 and 1440"},
		{vars: map[string]string{"SCHED_CONTACTS_INDEX_MIN": "hourly"}, wantErr: `SCHED_CONTACTS_INDEX_MIN="hourly": not a whole number`},
		{vars: map[string]string{"SCHED_MAIL_RECONSILE_MIN": "5"}, wantErr: "SCHED_MAIL_RECONSILE_MIN: no such scheduler setting"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.vars), func(t *testing.T) {
			tc.vars["STEWARD_HOME"] = t.TempDir()
			cfg, err := config.Load(config.LoadOptions{Getenv: func(k string) (string, bool) { v, ok := tc.vars[k]; return v, ok }})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for k := range tc.vars {
				names = append(names, k)
			}
			jobs, err := Configure(DefaultJobs(), cfg, names)
			if err == nil {
				err = cfg.Err()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, jobs)
		})
	}
}

// TestSettingsTableListsEveryJob keeps steward/config's settings table in
// step with the job table.
func TestSettingsTableListsEveryJob(t *testing.T) {
	for _, j := range DefaultJobs() {
		name := j.SettingName("MIN")
		if want := "SCHED_" + strings.ToUpper(strings.ReplaceAll(j.Name, "-", "_")) + "_MIN"; name != want {
			t.Errorf("job %s: setting %s, want %s", j.Name, name, want)
		}
		v, ok := config.Lookup(name)
		if !ok || v.Default != fmt.Sprint(int(j.Interval/time.Minute)) {
			t.Errorf("%s: settings table has %+v, want default %d", name, v, int(j.Interval/time.Minute))
		}
	}
	// And the other way: every SCHED_*_MIN the table lists is a job's.
	read := map[string]bool{}
	for _, j := range DefaultJobs() {
		read[j.SettingName("MIN")] = true
	}
	for _, v := range config.Vars {
		if strings.HasPrefix(v.Name, "SCHED_") && strings.HasSuffix(v.Name, "_MIN") && !strings.Contains(v.Name, "<JOB>") && !read[v.Name] {
			t.Errorf("%s is listed but no job reads it", v.Name)
		}
	}
}

// TestTickAfterStopStartsNothing: a tick that arrives together with the
// stop (the loop's select may pick either) neither marks the job running
// nor counts a run, so the live status agrees with the log after Run
// returns (this once left a job "running" with no run behind it).
func TestTickAfterStopStartsNothing(t *testing.T) {
	lg, err := OpenLog(filepath.Join(t.TempDir(), "scheduler.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Self: "/nonexistent/steward", Log: lg,
		Jobs: []Job{{Name: "fail", Args: []string{"fail"}, Interval: time.Second, Timeout: time.Second}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.tick(ctx, s.jobs[0], time.Now())
	s.wg.Wait()
	if st := s.Status()[0]; st.State != StateNotObserved || st.Runs != 0 {
		t.Errorf("after a tick past the stop: %+v", st)
	}
	if recs, err := ReadRecords(lg.Path()); err != nil || len(recs) != 0 {
		t.Errorf("log after a tick past the stop = %+v, %v", recs, err)
	}
}

// oneJobScheduler returns a scheduler of job whose children are this test
// binary (TestMain), logging into a new file; runs start through tick.
func oneJobScheduler(t *testing.T, job Job) (*Scheduler, *Log) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lg, err := OpenLog(filepath.Join(t.TempDir(), "scheduler.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Self: self, Jobs: []Job{job}, Log: lg, Env: append(os.Environ(), "SCHED_TEST_CHILD=1")}), lg
}

// TestUpToDateRunStartsNoChild: a run whose check finds nothing to do ends
// "up to date" with the check's detail, logged as a start and an end line
// without a child; when the check is unsure, the child runs as before.
func TestUpToDateRunStartsNoChild(t *testing.T) {
	answers := []bool{true, false, true}
	calls, bounded := 0, 0
	job := Job{Name: "ok", Args: []string{"ok", "--json"}, Interval: time.Hour, Timeout: 20 * time.Second,
		UpToDate: func(ctx context.Context) (string, bool) {
			if d, ok := ctx.Deadline(); ok && time.Until(d) <= checkTimeout {
				bounded++
			}
			calls++
			return fmt.Sprintf("check %d: nothing changed", calls), answers[calls-1]
		}}
	s, lg := oneJobScheduler(t, job)
	for i, upToDate := range answers {
		s.tick(context.Background(), s.jobs[0], time.Now())
		s.wg.Wait()
		st := s.Status()[0]
		switch {
		case st.Runs != int64(i+1) || st.State != StateIdle || !st.Observed:
			t.Errorf("run %d: %+v", i+1, st)
		case upToDate && (st.LastResult != ResultUpToDate || st.LastDetail != fmt.Sprintf("check %d: nothing changed", i+1) || st.LastSummary != nil):
			t.Errorf("run %d, checked up to date: %+v", i+1, st)
		case !upToDate && (st.LastResult != ResultOK || st.LastDetail != "" || st.LastSummary["new"] != 2):
			t.Errorf("run %d, check unsure: %+v, want the child's run", i+1, st)
		}
	}
	if bounded != len(answers) {
		t.Errorf("%d of %d checks had the run's deadline", bounded, len(answers))
	}
	recs, err := ReadRecords(lg.Path())
	if err != nil {
		t.Fatal(err)
	}
	var starts, ends, children int
	for _, r := range recs {
		switch r.Event {
		case EventStart:
			starts++
			if !answers[r.Run-1] && r.Reason != fmt.Sprintf("check %d: nothing changed", r.Run) {
				t.Errorf("child run's start line %+v does not say why the check did not suffice", r)
			}
		case EventEnd:
			ends++
			upToDate := answers[r.Run-1]
			if upToDate && (r.Result != ResultUpToDate || r.PID != 0 || r.Exit != nil || r.Reason != fmt.Sprintf("check %d: nothing changed", r.Run)) {
				t.Errorf("up-to-date run logged as %+v", r)
			}
			if !upToDate {
				children++
				if r.Result != ResultOK || r.PID == 0 || r.Exit == nil || *r.Exit != 0 {
					t.Errorf("child run logged as %+v", r)
				}
			}
		}
	}
	if starts != 3 || ends != 3 || children != 1 {
		t.Errorf("%d start and %d end lines, %d child runs; want 3, 3 and 1", starts, ends, children)
	}
	ls, err := StatusFromLog(lg.Path(), []Job{job})
	if err != nil {
		t.Fatal(err)
	}
	if js := ls.Jobs[0]; js.LastResult != ResultUpToDate || js.LastDetail != "check 3: nothing changed" {
		t.Errorf("from the log: %+v", js)
	}
}

// TestPanickingCheckRunsTheChild: a check that panics is "not sure"; the
// child runs, its start line says why, and the scheduler goes on.
func TestPanickingCheckRunsTheChild(t *testing.T) {
	job := Job{Name: "ok", Args: []string{"ok", "--json"}, Interval: time.Hour, Timeout: 20 * time.Second,
		UpToDate: func(context.Context) (string, bool) { panic("index out of range") }}
	s, lg := oneJobScheduler(t, job)
	for range 2 {
		s.tick(context.Background(), s.jobs[0], time.Now())
		s.wg.Wait()
	}
	if st := s.Status()[0]; st.Runs != 2 || st.LastResult != ResultOK || st.LastSummary["new"] != 2 {
		t.Errorf("after two runs with a panicking check: %+v", st)
	}
	recs, err := ReadRecords(lg.Path())
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, r := range recs {
		if r.Event == EventStart {
			starts++
			if r.PID == 0 || !strings.Contains(r.Reason, "the up-to-date check failed (index out of range)") {
				t.Errorf("start line %+v", r)
			}
		}
	}
	if starts != 2 {
		t.Errorf("%d child runs started, want 2", starts)
	}
}
