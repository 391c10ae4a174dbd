package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/scheduler"
	"github.com/agentstack/agentstack/steward/searchprep"
)

// bgFixture is the background plane the harness host reports: a real
// scheduler log, the harness's real store files and disk, and a preparation
// state the test moves along.
type bgFixture struct {
	mu   sync.Mutex
	prep searchprep.State
	log  string
}

func newBGFixture(home string) *bgFixture {
	f := &bgFixture{log: filepath.Join(home, "logs", "scheduler.jsonl")}
	lg, _ := scheduler.OpenLog(f.log, 0)
	exit0, exit1, exit3 := 0, 1, 3
	next := time.Now().Add(10 * time.Minute)
	for _, r := range []scheduler.Record{
		{Event: scheduler.EventSchedulerStart, PID: os.Getpid()},
		{Event: scheduler.EventUnavailable, Job: "write-ops-mail", Reason: "command not available in this build (steward writeops confirm-mail: steward: unknown command \"writeops\")"},
		{Event: scheduler.EventStart, Job: "mail-reconcile", Run: 1, PID: 4242},
		{Event: scheduler.EventEnd, Job: "mail-reconcile", Run: 1, PID: 4242, Exit: &exit0, Result: scheduler.ResultOK, DurationMS: 1840,
			Summary: map[string]float64{"scanned": 78000, "new": 3}, Next: &next},
		{Event: scheduler.EventStart, Job: "mail-reconcile", Run: 2},
		{Event: scheduler.EventEnd, Job: "mail-reconcile", Run: 2, Result: scheduler.ResultUpToDate,
			Reason: "20 Maildir folders as the last reconcile recorded them; no child started", Next: &next},
		{Event: scheduler.EventStart, Job: "mail-embed", Run: 1, PID: 4243},
		{Event: scheduler.EventEnd, Job: "mail-embed", Run: 1, PID: 4243, Exit: &exit3, Result: scheduler.ResultSkipped, DurationMS: 120,
			Error: "not configured: embeddings are off (MAIL_EMBED_ENDPOINT=off); search stays lexical", Next: &next},
		{Event: scheduler.EventStart, Job: "contacts-index", Run: 1, PID: 4244},
		{Event: scheduler.EventEnd, Job: "contacts-index", Run: 1, PID: 4244, Exit: &exit1, Result: scheduler.ResultFailed, DurationMS: 310,
			Error: "1 contacts source(s) could not be read (their indexed data is kept)", Next: &next},
		{Event: scheduler.EventSkip, Job: "contacts-index", Reason: "previous run still running", Next: &next},
	} {
		lg.Append(r)
	}
	f.prep = searchprep.State{State: searchprep.Running, Tasks: []searchprep.Task{
		{Name: "mail", State: searchprep.Done, Detail: "1024 vectors warmed", DurationMS: 420},
		{Name: searchprep.ModelTask, State: searchprep.Running},
		{Name: "calendar", State: searchprep.Queued},
		{Name: "contacts", State: searchprep.Queued},
	}}
	return f
}

func (f *bgFixture) setPrep(s searchprep.State) {
	f.mu.Lock()
	f.prep = s
	f.mu.Unlock()
}

func (f *bgFixture) preparation() searchprep.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prep
}

// systemInfo is the harness host's System provider.
func (h *harness) systemInfo(ctx context.Context) host.SystemInfo {
	info := host.SystemInfo{Services: []host.ServiceStatus{host.ProbeHTTP(ctx, nil, "gateway", h.gwSrv.URL+"/health"),
		{Name: "mcp:contacts", State: host.StateError, Detail: "failed: the server exited (exit status 1)"}}}
	// A connector that is down keeps its tools, from the manifest.
	info.Tools = []host.ToolInfo{{Name: "mcp__contacts__resolve_recipient", Source: "contacts"}, {Name: "mcp__contacts__read_contact", Source: "contacts"}}
	st, _ := scheduler.StatusFromLog(h.bg.log, scheduler.DefaultJobs())
	info.Scheduler = &host.SchedulerInfo{InProcess: true, Log: h.bg.log, Jobs: st.Jobs}
	for _, name := range []string{"chats", "usage", "audit"} {
		path := filepath.Join(h.home, name+".db")
		s := host.StoreStatus{Name: name, Path: path, State: host.StateOK, Detail: "readable and writable"}
		if fi, err := os.Stat(path); err == nil {
			s.SizeBytes = fi.Size()
		}
		info.Stores = append(info.Stores, s)
	}
	info.Stores = append(info.Stores,
		host.StoreStatus{Name: "mail mirror", Path: filepath.Join(h.home, "mail", "mail.db"), State: host.StateUnknown, Detail: "not built yet"},
		host.StoreStatus{Name: "contacts index", Path: filepath.Join(h.home, "contacts-index.sqlitedb"), State: host.StateError,
			Detail: "read-only: " + filepath.Join(h.home, "contacts-index.sqlitedb") + " (mode 0444); Steward cannot record changes"})
	var fs syscall.Statfs_t
	syscall.Statfs(h.home, &fs)
	free := fs.Bavail * uint64(fs.Bsize)
	info.Disk = &host.DiskStatus{Path: h.home, State: host.StateOK, FreeBytes: free, TotalBytes: fs.Blocks * uint64(fs.Bsize), Detail: "free space on the data volume"}
	p := h.bg.preparation()
	info.Preparation = &p
	return info
}

// mountPreparation serves GET /system/preparation as steward serve does.
func (h *harness) mountPreparation() {
	h.host.Handle("GET /system/preparation", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h.bg.preparation())
	}))
}

// testSystemBackground checks the System page's background sections and the
// preparation banner.
func testSystemBackground(t *testing.T, b *browser, h *harness) {
	t.Helper()
	row := func(section, text string) string {
		return eval[string](b, fmt.Sprintf(`[...document.querySelectorAll('.system-page section.%s tr')].find((tr) => tr.textContent.includes(%s))?.textContent || ''`, section, js(text)))
	}
	if r := row("scheduler", "mail-reconcile"); !strings.Contains(r, "up to date") || !strings.Contains(r, "20 Maildir folders as the last reconcile recorded them") || !strings.Contains(r, "every 10 min") {
		t.Errorf("mail-reconcile row = %q", r)
	}
	if c := eval[string](b, `document.querySelector('.system-page section.scheduler .badge[data-state="up to date"]')?.className || ''`); !strings.Contains(c, "ok") {
		t.Errorf("an up-to-date run's badge has class %q, want ok", c)
	}
	if r := row("scheduler", "calendar-sync"); !strings.Contains(r, "not observed in this process") {
		t.Errorf("calendar-sync row = %q", r)
	}
	if r := row("scheduler", "contacts-index"); !strings.Contains(r, "failed") || !strings.Contains(r, "could not be read") || !strings.HasSuffix(r, "1") {
		t.Errorf("contacts-index row = %q", r)
	}
	if r := row("scheduler", "write-ops-mail"); !strings.Contains(r, "command not available in this build") {
		t.Errorf("write-ops-mail row = %q", r)
	}
	if r := row("stores", "contacts index"); !strings.Contains(r, "error") || !strings.Contains(r, filepath.Join(h.home, "contacts-index.sqlitedb")) {
		t.Errorf("read-only store row = %q", r)
	}
	if n := eval[int](b, `document.querySelectorAll('.system-page .prep-tasks li').length`); n != 4 {
		t.Errorf("%d preparation tasks shown", n)
	}
	if st := eval[string](b, `document.querySelector('.prep-tasks li[data-task="calendar"]')?.dataset.state`); st != "queued" {
		t.Errorf("calendar preparation state = %q", st)
	}
	if d := eval[string](b, `document.querySelector('.system-page section.disk')?.textContent || ''`); !strings.Contains(d, "free") {
		t.Errorf("disk section = %q", d)
	}
	if r := eval[string](b, `[...document.querySelectorAll('.system-page tr')].find((tr) => tr.textContent.includes("mcp__contacts__resolve_recipient"))?.textContent || ''`); !strings.Contains(r, "unavailable") {
		t.Errorf("a down connector's tool row = %q", r)
	}
	b.wait(`!document.getElementById('prep-banner')?.hidden && document.getElementById('prep-banner').textContent.includes('Preparing search')`)
}

// testSystemSectionsFit checks that the scheduler, preparation, stores and
// disk sections are shown within the viewport's width, and photographs the
// lower half of the page.
func testSystemSectionsFit(t *testing.T, b *browser, form string) {
	t.Helper()
	for _, sec := range []string{"scheduler", "preparation", "stores", "disk"} {
		right := eval[float64](b, fmt.Sprintf(`(() => { const s = document.querySelector('.system-page section.%s'); return s ? s.getBoundingClientRect().right : -1 })()`, sec))
		width := eval[float64](b, `document.documentElement.clientWidth`)
		if right < 0 || right > width+0.5 {
			t.Errorf("%s: section %s ends at %.0f px of %.0f", form, sec, right, width)
		}
	}
	b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.system-page section.preparation').scrollIntoView()`))
	b.shot("system-background-" + form)
	b.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0); document.querySelector('#main').scrollTo?.(0, 0)`))
}
