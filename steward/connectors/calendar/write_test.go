package calendar

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

// writeEnv is a vdir with two calendars, an index over it, a write journal
// and a Writer, all real files in a temporary folder.
type writeEnv struct {
	t       testing.TB
	root    string
	cfg     *Config
	idx     *Index
	journal *writeops.Store
	w       *Writer
	conf    *Confirmer
	now     time.Time
}

var rome = func() *time.Location { l, _ := time.LoadLocation("Europe/Rome"); return l }()

func newWriteEnv(t testing.TB) *writeEnv {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "calendars")
	for _, c := range []struct{ id, title string }{{"personal", "Personal"}, {"work", "Work"}} {
		if err := os.MkdirAll(filepath.Join(root, c.id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, c.id, "displayname"), []byte(c.title+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	e := &writeEnv{t: t, root: root, now: time.Now()}
	e.cfg = &Config{Timezone: "Europe/Rome", Sources: []SourceConfig{{Name: "local", Kind: KindICS, Path: root, Account: "me@example.com"}}}
	var err error
	if e.idx, err = OpenIndex(ctx, filepath.Join(dir, "calendar-index.sqlitedb")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.idx.Close() })
	if e.journal, err = writeops.Open(ctx, filepath.Join(dir, "write-ops", "ops.db"), writeops.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.journal.Close() })
	e.w = NewWriter(WriterOptions{
		Config:  func(context.Context) (*Config, error) { return e.cfg, nil },
		Index:   func(context.Context) (*Index, error) { return e.idx, nil },
		Journal: e.journal,
	})
	e.conf = NewConfirmer(ConfirmerOptions{Index: func(context.Context) (*Index, error) { return e.idx, nil }})
	return e
}

// sync runs a calendar sync (it starts after every write made so far).
func (e *writeEnv) sync() *SyncReport {
	e.t.Helper()
	time.Sleep(2 * time.Millisecond) // the sync's start must be strictly after the last write's completion
	rep, err := e.idx.Sync(context.Background(), e.cfg, SyncOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// reconcile runs one calendar confirmation pass and returns the state of op.
func (e *writeEnv) reconcile(id string) writeops.Operation {
	e.t.Helper()
	ctx := context.Background()
	cs := map[writeops.Kind]writeops.Confirmer{writeops.KindCalendarCreate: e.conf, writeops.KindCalendarUpdate: e.conf, writeops.KindCalendarDelete: e.conf}
	if _, err := e.journal.Reconcile(ctx, writeops.DomainCalendar, cs, 0); err != nil {
		e.t.Fatal(err)
	}
	op, err := e.journal.Get(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// confirm syncs and reconciles, and fails unless op ends confirmed.
func (e *writeEnv) confirm(res *WriteResult) {
	e.t.Helper()
	e.sync()
	if op := e.reconcile(res.OperationID); op.State != writeops.StateConfirmed {
		e.t.Fatalf("operation %s is %s after a fresh sync: %s; evidence %s", op.ID, op.State, op.Note, op.Evidence)
	}
}

// files lists every file under the vdir.
func (e *writeEnv) files() []string {
	var out []string
	filepath.WalkDir(e.root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out = append(out, p+"\n"+string(b))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// khal runs Debian's khal on the vdir with its own configuration and cache,
// listing the events between from and to (YYYY-MM-DD) as "start|end|title"
// lines in Europe/Rome.
func (e *writeEnv) khal(from, to string) []string {
	e.t.Helper()
	bin, err := exec.LookPath("khal")
	if err != nil {
		e.t.Skip("khal is not installed (apt-get install khal)")
	}
	dir := e.t.TempDir()
	var cals strings.Builder
	for _, c := range []string{"personal", "work"} {
		cals.WriteString("[[" + c + "]]\npath = " + filepath.Join(e.root, c) + "\ntype = calendar\n")
	}
	conf := "[calendars]\n" + cals.String() + `
[locale]
local_timezone = Europe/Rome
default_timezone = Europe/Rome
timeformat = %H:%M
dateformat = %Y-%m-%d
longdateformat = %Y-%m-%d
datetimeformat = %Y-%m-%d %H:%M
longdatetimeformat = %Y-%m-%d %H:%M
[sqlite]
path = ` + filepath.Join(dir, "khal.db") + "\n"
	cfg := filepath.Join(dir, "khal.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cfg, "list", "--day-format", "", "--format", "{start}|{end}|{title}|{calendar}", from, to)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "TZ=Europe/Rome")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("khal: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// occurrenceOf returns the occurrenceStart search_events reports for the
// occurrence of uid starting at start.
func (e *writeEnv) search(from, to string) []EventSummary {
	e.t.Helper()
	svc := NewService(context.Background(), e.idx, ServiceOptions{})
	res, err := svc.SearchEvents(context.Background(), SearchParams{Start: from, End: to, Limit: 50})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Events
}

func TestWritesAreReadByKhal(t *testing.T) {
	e := newWriteEnv(t)
	ctx := context.Background()
	// A weekly series in Europe/Rome, five occurrences from Monday 4 May.
	res, err := e.w.CreateEvent(ctx, CreateEventParams{Calendar: "Personal", Title: "Standup", Start: "2026-05-04T09:00:00+02:00",
		End: "2026-05-04T09:15:00+02:00", TimeZone: "Europe/Rome", Location: "Room 4", Recurrence: "FREQ=WEEKLY;COUNT=5", Alarms: []int{10}})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != string(writeops.StateReturned) || !res.PendingConfirmation || res.Backend != BackendVdir {
		t.Fatalf("create: %+v", res)
	}
	e.confirm(res)
	series := res.UID
	want := []string{
		"2026-05-04 09:00|2026-05-04 09:15|Standup|personal", "2026-05-11 09:00|2026-05-11 09:15|Standup|personal",
		"2026-05-18 09:00|2026-05-18 09:15|Standup|personal", "2026-05-25 09:00|2026-05-25 09:15|Standup|personal",
		"2026-06-01 09:00|2026-06-01 09:15|Standup|personal",
	}
	if got := e.khal("2026-05-01", "2026-06-30"); !slices.Equal(got, want) {
		t.Fatalf("khal after create:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// One occurrence moved and renamed (RECURRENCE-ID).
	res, err = e.w.UpdateEvent(ctx, UpdateEventParams{UID: series, OccurrenceStart: "2026-05-11T09:00:00+02:00", Scope: ScopeThisEvent,
		Title: ptr("Standup (late)"), Start: ptr("2026-05-11T10:00:00+02:00"), End: ptr("2026-05-11T10:30:00+02:00")})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	// One occurrence deleted (EXDATE).
	res, err = e.w.DeleteEvent(ctx, DeleteEventParams{UID: series, OccurrenceStart: "2026-05-18T09:00:00+02:00", Scope: ScopeThisEvent})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	// This and future occurrences renamed and moved: the series ends with
	// UNTIL and a new one (new UID) continues from 25 May.
	res, err = e.w.UpdateEvent(ctx, UpdateEventParams{UID: series, OccurrenceStart: "2026-05-25T09:00:00+02:00", Scope: ScopeFutureEvents,
		Title: ptr("Standup v2"), Start: ptr("2026-05-25T09:30:00+02:00"), End: ptr("2026-05-25T09:45:00+02:00")})
	if err != nil {
		t.Fatal(err)
	}
	if res.NewUID == "" || res.NewUID == series {
		t.Fatalf("a future-scope update must split off a new series: %+v", res)
	}
	e.confirm(res)
	want = []string{
		"2026-05-04 09:00|2026-05-04 09:15|Standup|personal", "2026-05-11 10:00|2026-05-11 10:30|Standup (late)|personal",
		"2026-05-25 09:30|2026-05-25 09:45|Standup v2|personal", "2026-06-01 09:30|2026-06-01 09:45|Standup v2|personal",
	}
	if got := e.khal("2026-05-01", "2026-06-30"); !slices.Equal(got, want) {
		t.Fatalf("khal after the recurring changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	raw, err := os.ReadFile(filepath.Join(e.root, "personal", series+".ics"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"UID:" + series, "RECURRENCE-ID;TZID=Europe/Rome:20260511T090000", "EXDATE;TZID=Europe/Rome:20260518T090000",
		"RRULE:FREQ=WEEKLY;UNTIL=20260525T065959Z", "SEQUENCE:2"} {
		if !strings.Contains(string(unfold(raw)), s) {
			t.Errorf("the series file lacks %q:\n%s", s, raw)
		}
	}

	// A New York meeting: khal shows it at the Rome wall clock of the same instant.
	res, err = e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "work", Title: "Call with NY", Start: "2026-05-06T09:00:00-04:00",
		End: "2026-05-06T10:00:00-04:00", TimeZone: "America/New_York"})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	ny := res.UID
	// A one-sided edit keeps the live start.
	res, err = e.w.UpdateEvent(ctx, UpdateEventParams{UID: ny, End: ptr("2026-05-06T11:00:00-04:00")})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	// An all-day event over two days.
	res, err = e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "local/work", Title: "Conference", AllDay: true, Start: "2026-05-20", End: "2026-05-22"})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	got := e.khal("2026-05-06", "2026-05-22")
	for _, w := range []string{"2026-05-06 15:00|2026-05-06 17:00|Call with NY|work", "2026-05-20|2026-05-21|Conference|work"} {
		if !slices.Contains(got, w) {
			t.Errorf("khal lacks %q:\n%s", w, strings.Join(got, "\n"))
		}
	}

	// Deleting removes the file; khal no longer lists the event.
	res, err = e.w.DeleteEvent(ctx, DeleteEventParams{UID: ny})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	if _, err := os.Stat(filepath.Join(e.root, "work", ny+".ics")); !os.IsNotExist(err) {
		t.Errorf("the deleted event's file remains: %v", err)
	}
	for _, l := range e.khal("2026-05-06", "2026-05-08") {
		if strings.Contains(l, "Call with NY") {
			t.Errorf("khal still lists the deleted event: %s", l)
		}
	}
	// Deleting the series from its first occurrence removes it whole.
	res, err = e.w.DeleteEvent(ctx, DeleteEventParams{UID: series, OccurrenceStart: "2026-05-04T09:00:00+02:00", Scope: ScopeFutureEvents})
	if err != nil {
		t.Fatal(err)
	}
	e.confirm(res)
	got = e.khal("2026-05-01", "2026-06-30")
	// khal lists a two-day event on each of its days.
	want = []string{"2026-05-20|2026-05-21|Conference|work", "2026-05-20|2026-05-21|Conference|work", "2026-05-25 09:30|2026-05-25 09:45|Standup v2|personal",
		"2026-06-01 09:30|2026-06-01 09:45|Standup v2|personal"}
	if !slices.Equal(got, want) {
		t.Fatalf("khal at the end:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
