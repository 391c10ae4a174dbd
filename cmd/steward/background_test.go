package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/scheduler"
	"github.com/agentstack/agentstack/steward/searchprep"
)

// writeMaildirMessage writes one message into the Maildir at root.
func writeMaildirMessage(t testing.TB, root, sub string, i int, subject string) {
	t.Helper()
	msg := fmt.Sprintf("From: Anna <anna@example.com>\r\nTo: me@example.com\r\nSubject: %s\r\nDate: Mon, 2 Nov 2026 10:%02d:00 +0100\r\n"+
		"Message-ID: <m%d-%d@example.com>\r\n\r\nBody of message %d about %s.\r\n", subject, i%60, i, time.Now().UnixNano(), i, subject)
	path := filepath.Join(root, sub, fmt.Sprintf("%d.%d.host:2,", time.Now().UnixNano(), i))
	if sub == "new" {
		path = strings.TrimSuffix(path, ":2,")
	}
	// Written beside, then renamed in, as a delivery agent does.
	tmp := filepath.Join(root, "tmp", filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(msg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newMaildir(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "Maildir")
	for _, d := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func writeMailConfig(t testing.TB, home, root string) {
	t.Helper()
	cfg := "accounts:\n  - name: personal\n    kind: maildir\n    root: " + root + "\n    addresses: [me@example.com]\n"
	if err := os.WriteFile(filepath.Join(home, "mail.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// remoteEmbeddings serves embeddings on a non-loopback address of this
// machine and counts requests; it returns "" when the machine has none.
func remoteEmbeddings(t *testing.T, hits *atomic.Int64) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		ln, err := net.Listen("tcp", ipn.IP.String()+":0")
		if err != nil {
			continue
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusTeapot)
		}))
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	return ""
}

func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 90 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runScheduler runs `steward scheduler` until the test ends, when it must
// stop cleanly.
func runScheduler(t *testing.T, env *cliEnv, logs fmt.Stringer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"scheduler"}, env) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("steward scheduler exit %d\n%s", code, logs)
		}
	})
}

// mirroredMessages is the mail mirror's message count, as `steward mail
// status --json` reports it.
func mirroredMessages(t *testing.T, home string) int {
	t.Helper()
	env, out, _ := testEnv(t, map[string]string{"STEWARD_HOME": home, "MAIL_EMBED_ENDPOINT": "off"})
	if code := run(context.Background(), []string{"mail", "status", "--json"}, env); code != 0 {
		t.Fatalf("mail status exit %d: %s", code, out)
	}
	var ms struct {
		Stats struct {
			Messages int `json:"messages"`
		} `json:"stats"`
	}
	json.Unmarshal(out.Bytes(), &ms)
	return ms.Stats.Messages
}

// TestServeBackgroundPlane runs `steward serve` with its scheduler, mail
// watcher and preparation queue over a real Maildir and real child jobs.
func TestServeBackgroundPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs serve with child jobs")
	}
	up := llmtest.NewServer(t)
	var remoteHits atomic.Int64
	remote := remoteEmbeddings(t, &remoteHits)
	vars := map[string]string{"SCHED_MAIL_RECONCILE_MIN": "60", "SCHED_CONTACTS_INDEX_SEC": "3"}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	os.MkdirAll(home, 0o700)
	gw := "providers:\n  up: { base_url: " + up.URL + " }\nmodels:\n  tier-5: [ { provider: up, model: scripted } ]\n  local-embed: [ { provider: up, model: embed } ]\n"
	os.WriteFile(filepath.Join(home, "gateway.yaml"), []byte(gw), 0o600)
	maildir := newMaildir(t)
	writeMaildirMessage(t, maildir, "cur", 1, "Quarterly budget review")
	writeMailConfig(t, home, maildir)
	vcf := filepath.Join(t.TempDir(), "people.vcf")
	os.WriteFile(vcf, []byte("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:a1\r\nFN:Anna Rossi\r\nEMAIL:anna@example.com\r\nEND:VCARD\r\n"), 0o600)
	os.WriteFile(filepath.Join(home, "contacts.yaml"), []byte("sources:\n  - name: cards\n    kind: vcard\n    path: "+vcf+"\n"), 0o600)
	confEnv := "MAIL_EMBED_ENDPOINT=gateway\n"
	if remote != "" {
		confEnv += "DOCUMENT_EMBED_ENDPOINT=" + remote + "\n"
	}
	os.WriteFile(filepath.Join(home, "config.env"), []byte(confEnv), 0o600)

	// Before any scheduler ran, status says "not observed", not failed.
	statusEnv, out, _ := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"scheduler", "status", "--json"}, statusEnv); code != 0 {
		t.Fatalf("scheduler status exit %d", code)
	}
	var before scheduler.LogStatus
	json.Unmarshal(out.Bytes(), &before)
	if len(before.Jobs) != 10 {
		t.Fatalf("status before start: %s", out)
	}
	for _, j := range before.Jobs {
		if j.State != scheduler.StateNotObserved || j.Observed || j.LastResult != "" {
			t.Errorf("before the first run %s = %+v", j.Name, j)
		}
	}

	base, token := runServe(t, env, home)
	logPath := filepath.Join(home, "logs", "scheduler.jsonl")
	ended := func(job, result string, n int) bool {
		recs, _ := scheduler.ReadRecords(logPath)
		c := 0
		for _, r := range recs {
			if r.Event == scheduler.EventEnd && r.Job == job && r.Result == result {
				c++
			}
		}
		return c >= n
	}
	waitLong(t, "first mail reconcile", func() bool { return ended("mail-reconcile", scheduler.ResultOK, 1) })
	waitLong(t, "contacts indexed twice", func() bool { return ended("contacts-index", scheduler.ResultOK, 2) })
	waitLong(t, "calendar skipped", func() bool { return ended("calendar-sync", scheduler.ResultSkipped, 1) })

	// A message dropped into the Maildir becomes searchable through
	// search_mail without any CLI call: the host's watcher ingests it.
	bridge := mcpbridge.New(mcpbridge.Options{Servers: []mcpbridge.ServerConfig{{Name: "mail", Command: os.Args[0], Args: []string{"mcp", "mail"},
		Env: map[string]string{"STEWARD_HOME": home, "MAIL_EMBED_ENDPOINT": "off"}}}})
	bridge.Start(context.Background())
	t.Cleanup(func() { bridge.Close() })
	search := func(q string) string {
		for _, tool := range bridge.Tools() {
			if tool.Spec().Name == "mcp__mail__search_mail" {
				res, err := tool.Call(context.Background(), json.RawMessage(`{"query":"`+q+`"}`))
				if err != nil {
					return err.Error()
				}
				return res.Content
			}
		}
		return ""
	}
	waitLong(t, "mail connector ready", func() bool { return strings.Contains(search("budget"), "Quarterly budget review") })
	dropped := time.Now()
	writeMaildirMessage(t, maildir, "new", 2, "Zanzibar ferry tickets")
	waitLong(t, "new message searchable", func() bool { return strings.Contains(search("Zanzibar"), "Zanzibar ferry tickets") })
	t.Logf("new file searchable after %s", time.Since(dropped).Round(time.Millisecond))
	if ended("mail-reconcile", scheduler.ResultOK, 2) {
		t.Error("a second reconcile ran; the watcher was not what made the message searchable")
	}

	// Preparation ran in order, one task at a time, skipping the missing
	// calendar index and never calling the remote embedding endpoint.
	var prep searchprep.State
	waitLong(t, "preparation finished", func() bool {
		getJSON(t, base+"/system/preparation", token, &prep)
		return prep.State == searchprep.Done
	})
	want := []struct{ name, state string }{{"mail", searchprep.Done}, {searchprep.ModelTask, searchprep.Done}, {"calendar", searchprep.Skipped}, {"contacts", ""}}
	if len(prep.Tasks) != len(want) {
		t.Fatalf("tasks %+v", prep.Tasks)
	}
	for i, w := range want {
		tk := prep.Tasks[i]
		if tk.Name != w.name || (w.state != "" && tk.State != w.state) {
			t.Errorf("task %d = %+v, want %s %s\nlogs:\n%s", i, tk, w.name, w.state, logs)
		}
		if i > 0 && tk.Started.Before(*prep.Tasks[i-1].Ended) {
			t.Errorf("%s started before %s ended", tk.Name, prep.Tasks[i-1].Name)
		}
	}
	// No calendar.yaml here, so the index is missing because no source is
	// configured, and the reason says so (a configured source whose index
	// is not built yet says "not built": TestMCPConnectorsBeforeFirstIndex).
	if tk := prep.Tasks[2]; !strings.HasPrefix(tk.Detail, "not configured: no calendar sources") {
		t.Errorf("calendar skipped for %q", tk.Detail)
	}
	var startup int
	for _, r := range up.Requests() {
		if strings.HasSuffix(r.Path, "/embeddings") && strings.Contains(fmt.Sprint(r.Body["input"]), searchprep.StartupText) {
			startup++
		}
	}
	if startup != 1 {
		t.Errorf("%d start-up embedding requests reached the local model, want 1 (deduplicated)", startup)
	}
	var rep struct {
		ByAction []struct {
			Key      string `json:"key"`
			Requests int    `json:"requests"`
		} `json:"byAction"`
	}
	getJSON(t, base+"/usage?period=24h", token, &rep)
	attributed := false
	for _, g := range rep.ByAction {
		attributed = attributed || g.Key == "host/startup-embedding" && g.Requests == 1
	}
	if !attributed {
		t.Errorf("start-up embedding not attributed to host/startup-embedding: %+v", rep.ByAction)
	}
	if remote != "" {
		if remoteHits.Load() != 0 {
			t.Errorf("%d requests reached the non-loopback embedding endpoint", remoteHits.Load())
		}
		if !strings.Contains(prep.Tasks[1].Detail, "not contacted (remote): DOCUMENT_EMBED_ENDPOINT") {
			t.Errorf("model task detail %q", prep.Tasks[1].Detail)
		}
	} else {
		t.Log("no non-loopback address on this machine; the remote endpoint case is not exercised")
	}
}

// TestSchedulerJobsFailInIsolation runs `steward scheduler` with real child
// jobs: a mail reconcile killed with SIGKILL mid-run, a calendar sync that
// hangs on a FIFO until its timeout, a contacts index that fails every run.
func TestSchedulerJobsFailInIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child jobs")
	}
	const messages = 6000
	vars := map[string]string{"SCHED_MAIL_RECONCILE_SEC": "2", "SCHED_CALENDAR_SYNC_TIMEOUT_SEC": "2", "SCHED_CONTACTS_INDEX_SEC": "1"}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	os.MkdirAll(home, 0o700)
	maildir := newMaildir(t)
	for i := range messages {
		writeMaildirMessage(t, maildir, "cur", i, fmt.Sprintf("Report %d", i))
	}
	writeMailConfig(t, home, maildir)
	fifo := filepath.Join(t.TempDir(), "calendar.ics")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(home, "calendar.yaml"), []byte("sources:\n  - name: pipe\n    kind: ics\n    path: "+fifo+"\n"), 0o600)
	os.WriteFile(filepath.Join(home, "contacts.yaml"), []byte("sources:\n  - name: x\n    kind: carrier-pigeon\n"), 0o600)
	os.WriteFile(filepath.Join(home, "config.env"), []byte("MAIL_EMBED_ENDPOINT=off\n"), 0o600)

	runScheduler(t, env, logs)
	logPath := filepath.Join(home, "logs", "scheduler.jsonl")
	find := func(match func(scheduler.Record) bool) *scheduler.Record {
		recs, _ := scheduler.ReadRecords(logPath)
		for _, r := range recs {
			if match(r) {
				return &r
			}
		}
		return nil
	}
	var first *scheduler.Record
	waitLong(t, "first reconcile starts", func() bool {
		first = find(func(r scheduler.Record) bool { return r.Event == scheduler.EventStart && r.Job == "mail-reconcile" })
		return first != nil
	})
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the reconcile child: %v", err)
	}
	var killed *scheduler.Record
	waitLong(t, "killed run logged", func() bool {
		killed = find(func(r scheduler.Record) bool {
			return r.Event == scheduler.EventEnd && r.Job == "mail-reconcile" && r.Run == first.Run
		})
		return killed != nil
	})
	if killed.Result != scheduler.ResultFailed || !strings.Contains(killed.Error, "killed") {
		t.Fatalf("the reconcile finished before SIGKILL reached it (%+v); make the Maildir larger", killed)
	}
	var next *scheduler.Record
	waitLong(t, "a later reconcile succeeds", func() bool {
		next = find(func(r scheduler.Record) bool {
			return r.Event == scheduler.EventEnd && r.Job == "mail-reconcile" && r.Result == scheduler.ResultOK
		})
		return next != nil
	})
	// The store is consistent and complete.
	if ms := mirroredMessages(t, home); ms != messages {
		t.Errorf("mirror holds %d messages after the killed run and the next, want %d", ms, messages)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "mail", "mail.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}

	// The hanging calendar sync was killed at its 2 s timeout, the broken
	// contacts index failed on every run, and neither stopped the others.
	waitLong(t, "calendar timeout", func() bool {
		return find(func(r scheduler.Record) bool { return r.Job == "calendar-sync" && r.Result == scheduler.ResultTimeout }) != nil
	})
	cal := find(func(r scheduler.Record) bool { return r.Job == "calendar-sync" && r.Event == scheduler.EventEnd })
	if cal.Result != scheduler.ResultTimeout || cal.DurationMS < 2000 || cal.DurationMS > 20000 {
		t.Errorf("calendar run = %+v", cal)
	}
	if syscall.Kill(cal.PID, 0) == nil {
		t.Errorf("the hanging calendar child %d is still alive", cal.PID)
	}
	contacts := find(func(r scheduler.Record) bool { return r.Job == "contacts-index" && r.Event == scheduler.EventEnd })
	if contacts.Result != scheduler.ResultFailed || !strings.Contains(contacts.Error, "carrier-pigeon") {
		t.Errorf("contacts run = %+v", contacts)
	}
	if embed := find(func(r scheduler.Record) bool { return r.Job == "mail-embed" && r.Event == scheduler.EventEnd }); embed == nil ||
		embed.Result != scheduler.ResultSkipped || !strings.Contains(embed.Error, "embeddings are off") {
		t.Errorf("mail-embed run = %+v", embed)
	}
}

// TestSchedulerSparesUnchangedMaildir runs `steward scheduler` over a real
// Maildir: once a reconcile has recorded the folders, a run that finds them
// unchanged ends "up to date" without a child; a delivered message makes the
// next run start the reconcile child again, which ingests it.
func TestSchedulerSparesUnchangedMaildir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child jobs")
	}
	vars := map[string]string{"SCHED_MAIL_RECONCILE_SEC": "1", "MAIL_EMBED_ENDPOINT": "off"}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	os.MkdirAll(home, 0o700)
	maildir := newMaildir(t)
	for i := range 3 {
		writeMaildirMessage(t, maildir, "cur", i, fmt.Sprintf("Invoice %d", i))
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{"cur", "new"} {
		os.Chtimes(filepath.Join(maildir, d), old, old) // delivered long ago: trusted once listed
	}
	writeMailConfig(t, home, maildir)

	runScheduler(t, env, logs)
	logPath := filepath.Join(home, "logs", "scheduler.jsonl")
	ends := func(result string) []scheduler.Record {
		recs, _ := scheduler.ReadRecords(logPath)
		var out []scheduler.Record
		for _, r := range recs {
			if r.Event == scheduler.EventEnd && r.Job == "mail-reconcile" && r.Result == result {
				out = append(out, r)
			}
		}
		return out
	}
	waitLong(t, "an up-to-date run", func() bool { return len(ends(scheduler.ResultUpToDate)) > 0 })
	first := ends(scheduler.ResultOK)
	if len(first) != 1 || first[0].PID == 0 || first[0].Summary["new"] != 3 {
		t.Fatalf("before the first up-to-date run: %+v, want one child run that ingested 3 messages", first)
	}
	up := ends(scheduler.ResultUpToDate)[0]
	if up.PID != 0 || up.Exit != nil || !strings.Contains(up.Reason, "2 Maildir folders as the last reconcile recorded them") {
		t.Errorf("up-to-date run logged as %+v", up)
	}
	recs, _ := scheduler.ReadRecords(logPath)
	for _, r := range recs {
		if r.Event == scheduler.EventStart && r.Job == "mail-reconcile" && r.Run == up.Run && r.PID != 0 {
			t.Errorf("an up-to-date run started child %d", r.PID)
		}
	}

	writeMaildirMessage(t, maildir, "new", 9, "Ferry timetable")
	var delivered scheduler.Record
	waitLong(t, "the delivered message reconciled", func() bool {
		for _, r := range ends(scheduler.ResultOK) {
			if r.Run > up.Run && r.Summary["new"] == 1 && r.PID != 0 {
				delivered = r
				return true
			}
		}
		return false
	})
	// The child's start line says why the check did not suffice.
	recs, _ = scheduler.ReadRecords(logPath)
	for _, r := range recs {
		if r.Event == scheduler.EventStart && r.Job == "mail-reconcile" && r.Run == delivered.Run &&
			r.Reason != "account personal: folder "+filepath.Join(maildir, "new")+" changed since the last reconcile" {
			t.Errorf("start of the run that ingested the delivery: %+v", r)
		}
	}
	last := 0
	waitLong(t, "up to date again", func() bool {
		e := ends(scheduler.ResultUpToDate)
		last = int(e[len(e)-1].Run)
		return len(ends(scheduler.ResultOK)) >= 2 && e[len(e)-1].Run > ends(scheduler.ResultOK)[1].Run
	})
	if ms := mirroredMessages(t, home); ms != 4 {
		t.Errorf("mirror holds %d messages, want 4", ms)
	}
	statusEnv, out, _ := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"scheduler", "status"}, statusEnv); code != 0 || !strings.Contains(out.String(), "up to date: 2 Maildir folders") {
		t.Errorf("scheduler status (exit %d) after run %d:\n%s", code, last, out)
	}
}

// TestSchedulerBenchSmoke runs `steward bench scheduler` at smoke size: it
// checks that every measurement is taken, not the figures.
func TestSchedulerBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(buildSteward(t), "bench", "scheduler", "--messages", "200", "--idle", "3s", "--watch", "3", "--repeats", "1", "--out", out)
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, b)
	}
	var rep schedulerBenchReport
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.BackfillSeconds <= 0 || len(rep.ReconcileSamples) != 1 || rep.StartupSeconds <= 0 || rep.IdleWindowSeconds < 3 || len(rep.Jobs) != 10 ||
		len(rep.WatchSamples) != 3 || rep.WatchP95MS <= 0 || len(rep.Checks) != 3 ||
		len(rep.ScheduledSamples) != 1 || rep.ScheduledSeconds <= 0 || !strings.Contains(rep.ScheduledDetail, "Maildir folders as the last reconcile recorded them") {
		t.Errorf("report = %s", data)
	}
	for _, j := range rep.Jobs {
		// By then the tree is unchanged since the bench's own reconciles:
		// serve's scheduler finds it so and starts no child.
		if j.Name == "mail-reconcile" && (j.LastResult != scheduler.ResultUpToDate || j.LastDetail != rep.ScheduledDetail) {
			t.Errorf("mail-reconcile in the bench = %+v", j)
		}
	}
}

// TestServeRefusesBadSchedulerSettings: an invalid SCHED_* value stops
// `steward serve` before it opens anything, naming the variable.
func TestServeRefusesBadSchedulerSettings(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"SCHED_MAIL_RECONCILE_MIN", "0", "SCHED_MAIL_RECONCILE_MIN=0: must be between 1 and 1440"},
		{"SCHED_CALENDAR_SYNC_MIN", "-3", "SCHED_CALENDAR_SYNC_MIN=-3: must be between 1 and 1440"},
		{"SCHED_CONTACTS_INDEX_MIN", "hourly", `SCHED_CONTACTS_INDEX_MIN="hourly": not a whole number`},
		{"SCHED_MAIL_EMBED_MINUTES", "5", "SCHED_MAIL_EMBED_MINUTES: no such scheduler setting"},
		{"STEWARD_SCHEDULER", "maybe", `STEWARD_SCHEDULER="maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{}
			env, _, _ := testEnv(t, vars)
			os.MkdirAll(vars["STEWARD_HOME"], 0o700)
			// Through config.env, as a user would set it.
			os.WriteFile(filepath.Join(vars["STEWARD_HOME"], "config.env"), []byte(tc.name+"="+tc.value+"\n"), 0o600)
			cfg, err := env.Config()
			if err != nil {
				t.Fatal(err)
			}
			sc, err := readServeConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			hostLn := loopback(t)
			err = serve(context.Background(), env, sc, hostLn, loopback(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve = %v, want an error with %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(vars["STEWARD_HOME"], "logs", "scheduler.jsonl")); err == nil {
				t.Error("the scheduler started despite the bad setting")
			}
			// Refused before any store was opened or connector started.
			if _, err := os.Stat(filepath.Join(vars["STEWARD_HOME"], "usage.db")); err == nil {
				t.Error("serve opened the usage ledger before refusing the setting")
			}
		})
	}
}
