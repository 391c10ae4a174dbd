package actions

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/calendar"
)

// calendarIndex is a real calendar index synced from a vdir folder.
type calendarIndex struct {
	t    *testing.T
	path string
	dir  string
	cfg  *calendar.Config
}

func newCalendarIndex(t *testing.T) *calendarIndex {
	root := t.TempDir()
	dir := filepath.Join(root, "vdir", "home")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &calendarIndex{t: t, path: filepath.Join(root, "calendar-index.sqlitedb"), dir: dir,
		cfg: &calendar.Config{Timezone: "UTC", Sources: []calendar.SourceConfig{{Name: "dav", Kind: calendar.KindICS, Path: filepath.Join(root, "vdir"), Account: "dav"}}}}
}

// put writes one event file (UTC times) with an optional STATUS.
func (c *calendarIndex) put(uid, summary string, start time.Time, modified time.Time, status string) {
	c.putFile(uid+".ics", uid, summary, start, modified, status)
}

// putFile writes the event to a named file (the ICS source's external id).
func (c *calendarIndex) putFile(file, uid, summary string, start time.Time, modified time.Time, status string) {
	var b strings.Builder
	b.WriteString("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\nBEGIN:VEVENT\nUID:" + uid + "\nSUMMARY:" + summary + "\n")
	b.WriteString("DTSTART:" + start.UTC().Format("20060102T150405Z") + "\nDTEND:" + start.Add(time.Hour).UTC().Format("20060102T150405Z") + "\n")
	b.WriteString("LAST-MODIFIED:" + modified.UTC().Format("20060102T150405Z") + "\n")
	if status != "" {
		b.WriteString("STATUS:" + status + "\n")
	}
	b.WriteString("END:VEVENT\nEND:VCALENDAR\n")
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *calendarIndex) sync() {
	idx, err := calendar.OpenIndex(context.Background(), c.path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer idx.Close()
	if _, err := idx.Sync(context.Background(), c.cfg, calendar.SyncOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func TestCalendarReminders(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	now := time.Now().Truncate(time.Second)
	c.t = now
	cal := newCalendarIndex(t)
	mod := now.Add(-time.Hour)
	cal.put("soon", "Dentist", now.Add(5*time.Hour), mod, "")
	cal.put("later", "Board meeting", now.Add(50*time.Hour), mod, "CONFIRMED")
	cal.put("cancelled", "Cancelled lunch", now.Add(6*time.Hour), mod, "CANCELLED")
	cal.put("far", "Holiday", now.Add(5*24*time.Hour), mod, "")
	cal.put("past", "Yesterday", now.Add(-20*time.Hour), mod, "")
	cal.sync()

	rep, err := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now})
	if err != nil || rep.Created != 2 || rep.Skipped != "" {
		t.Fatalf("first pass %+v %v", rep, err)
	}
	res, _ := s.List(ctx, ListOptions{Limit: 100, IncludePayload: true})
	prio := map[string]string{}
	for _, it := range res.Items {
		if it.Kind != KindEventReminder || !strings.HasPrefix(it.SourceKey, "calendar:") {
			t.Fatalf("item %+v", it)
		}
		prio[strings.TrimPrefix(it.Title, "Upcoming event: ")] = it.Priority
	}
	if prio["Dentist"] != PriorityHigh || prio["Board meeting"] != PriorityNormal || len(prio) != 2 {
		t.Fatalf("priorities %v", prio)
	}
	for _, it := range res.Items {
		if len(it.Proposal) != 1 || it.Proposal[0].Steps[0].Tool != "mcp__calendar__read_event" || !strings.Contains(string(it.Snapshot.Trigger), `"refId"`) {
			t.Fatalf("reminder payload %+v", it)
		}
	}

	// A second pass over the same index writes nothing.
	before, _ := s.List(ctx, ListOptions{Limit: 100})
	c.t = c.t.Add(time.Minute) // a rewrite would show in updatedAt
	if rep, _ := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now}); rep.Unchanged != 2 || rep.Updated != 0 {
		t.Fatalf("idle pass %+v", rep)
	}
	if after, _ := s.List(ctx, ListOptions{Limit: 100}); !after.Items[0].UpdatedAt.Equal(before.Items[0].UpdatedAt) {
		t.Fatal("an unchanged reminder was rewritten")
	}

	// Seven-day lookahead admits the holiday.
	if rep, _ := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now, Days: 7}); rep.Created != 1 {
		t.Fatalf("7-day pass %+v", rep)
	}

	// Moving the board meeting within 24 h updates its reminder (same item,
	// now high priority) and keeps its review status.
	board, _ := findTitle(s, "Board meeting")
	s.SetStatus(ctx, board.ID, StatusRead)
	cal.put("later", "Board meeting", now.Add(10*time.Hour), now, "")
	cal.sync()
	if rep, _ := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now}); rep.Created != 0 || rep.Updated != 1 || rep.Unchanged != 1 {
		t.Fatalf("after move %+v", rep)
	}
	moved, _ := s.Get(ctx, board.ID)
	if moved.Priority != PriorityHigh || !moved.DueAt.Equal(now.Add(10*time.Hour)) || moved.Status != StatusRead {
		t.Fatalf("moved reminder %+v", moved)
	}

	// The calendar cutoff admits only events modified after it.
	if rep, _ := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now, Cutoff: now.Add(-time.Minute)}); rep.Events != 1 {
		t.Fatalf("cutoff pass %+v", rep)
	}
}

func findTitle(s *Store, suffix string) (*Item, error) {
	res, err := s.List(context.Background(), ListOptions{Limit: 100, IncludeHandled: true})
	if err != nil {
		return nil, err
	}
	for _, it := range res.Items {
		if strings.HasSuffix(it.Title, suffix) {
			return &it, nil
		}
	}
	return nil, ErrNotFound
}

func TestCalendarRemindersMissingIndex(t *testing.T) {
	s, _ := openTestStore(t)
	rep, err := s.CalendarReminders(context.Background(), ReminderOptions{IndexPath: filepath.Join(t.TempDir(), "none.sqlitedb")})
	if err != nil || rep.Created != 0 || !strings.Contains(rep.Skipped, "no calendar index") {
		t.Fatalf("%+v %v", rep, err)
	}
	if res, _ := s.List(context.Background(), ListOptions{}); len(res.Items) != 0 {
		t.Fatal("items without an index")
	}
}

// unpackStrings reads what readReminders' query packs, and nothing else.
func TestUnpackStrings(t *testing.T) {
	for _, c := range []struct {
		packed string
		want   []string // nil: rejected
	}{
		{"1,0,3:a\x00b:", []string{"a", "", "\x00b:"}},
		{"0,0,0:", []string{"", "", ""}},
		{"2,2,2:abcdef", []string{"ab", "cd", "ef"}},
		{"2,2,2:abcdefg", nil},  // bytes left over
		{"2,2,3:abcdef", nil},   // too few bytes
		{"2,2:abcd", nil},       // too few lengths
		{"2,2,2,0:abcdef", nil}, // too many
		{"2,,2:abcd", nil},      // an empty length
		{"2,2,2abcdef", nil},    // no separator
		{"-1,2,2:abcd", nil},    // a sign
		{"99999999999999999999,0,0:", nil},
	} {
		var a, b, d string
		err := unpackStrings(c.packed, &a, &b, &d)
		if c.want == nil {
			if err == nil {
				t.Errorf("%q accepted as %q %q %q", c.packed, a, b, d)
			}
			continue
		}
		if err != nil || a != c.want[0] || b != c.want[1] || d != c.want[2] {
			t.Errorf("%q: %q %q %q %v, want %q", c.packed, a, b, d, err, c.want)
		}
	}
}

// readReminders' packed read returns the index's strings byte for byte:
// NULs, invalid UTF-8, separators and multi-byte text included.
func TestReadRemindersExactStrings(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, filepath.Join(t.TempDir(), "index.sqlitedb"), sqlitedb.Options{Migrations: []string{`CREATE TABLE events (
		ref_id TEXT, uid TEXT, title TEXT, location TEXT, calendar TEXT, account TEXT, source TEXT,
		start_at INTEGER, end_at INTEGER, all_day INTEGER, last_modified INTEGER, status TEXT);`}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	want := []string{"r:1,2", "u\x00id", "caf\xe9 ☕ 3,4:5", "", ",", ":", "日本"}
	if _, err := db.ExecContext(ctx, `INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,0,NULL,'')`, want[0], want[1], want[2], want[3], want[4],
		want[5], want[6], now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	// An all-day event with a modification time, starting later.
	modified := now.Add(-time.Hour).Unix()
	if _, err := db.ExecContext(ctx, `INSERT INTO events VALUES ('r2','u2','t2','','c','a','s',?,?,1,?,'')`, now.Add(3*time.Hour).Unix(),
		now.Add(27*time.Hour).Unix(), modified); err != nil {
		t.Fatal(err)
	}
	items, err := readReminders(ctx, db, ReminderOptions{Now: now, Days: 1})
	if err != nil || len(items) != 2 {
		t.Fatalf("%d reminders, %v", len(items), err)
	}
	e := items[0].reminder
	if got := []string{e.RefID, e.UID, e.Title, e.Location, e.Calendar, e.Account, e.Source}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if e.AllDay || !items[0].DueAt.Equal(now.Add(time.Hour)) || !e.endAt.Equal(now.Add(2*time.Hour)) || !items[0].SourceAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("first event: all day %v, due %v, end %v, source at %v", e.AllDay, items[0].DueAt, e.endAt, items[0].SourceAt)
	}
	e = items[1].reminder
	if e.RefID != "r2" || !e.AllDay || !items[1].DueAt.Equal(now.Add(3*time.Hour)) || !e.endAt.Equal(now.Add(27*time.Hour)) ||
		items[1].SourceAt.Unix() != modified {
		t.Fatalf("second event: %+v, due %v, source at %v", e, items[1].DueAt, items[1].SourceAt)
	}
	// A value of the wrong type is an error, not a zero.
	if _, err := db.ExecContext(ctx, `UPDATE events SET end_at = 'soon' WHERE ref_id = 'r2'`); err != nil {
		t.Fatal(err)
	}
	if _, err := readReminders(ctx, db, ReminderOptions{Now: now, Days: 1}); err == nil || !strings.Contains(err.Error(), "read calendar index") {
		t.Fatalf("an end time stored as text: %v", err)
	}
}
