package actions

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// A store written by the first schema, holding reminders keyed the legacy
// way (calendar:<UID>/<start>), is opened by the current code and passed
// through a reminder pass over a real calendar index: each uniquely
// identifiable reminder moves onto calendar:<refId> with its review status,
// through a UID alias when the event's UID changed, and no duplicate is
// created; ambiguous and unknown ones are left as they are.
func TestLegacyReminderMigration(t *testing.T) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Minute)
	cal := newCalendarIndex(t)
	mod := now.Add(-time.Hour)
	dentist, board, lunch := now.Add(5*time.Hour), now.Add(30*time.Hour), now.Add(40*time.Hour)
	cal.put("old-uid", "Dentist", dentist, mod, "")
	cal.put("same-uid", "Board meeting", board, mod, "")
	cal.put("dup-uid", "Lunch", lunch, mod, "")
	cal.sync()
	// The server rewrote the dentist's UID in the same file: the index keeps
	// the event's ref and records old-uid as an alias.
	cal.putFile("old-uid.ics", "new-uid", "Dentist", dentist, mod, "")
	cal.sync()
	refs := map[string]string{}
	idx, err := sqlitedb.Open(ctx, cal.path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"new-uid", "same-uid", "dup-uid"} {
		var ref string
		if err := idx.QueryRowContext(ctx, `SELECT ref_id FROM events WHERE uid = ?`, uid).Scan(&ref); err != nil {
			t.Fatalf("%s: %v", uid, err)
		}
		refs[uid] = ref
	}
	var alias string
	idx.QueryRowContext(ctx, `SELECT ref_id FROM uid_aliases WHERE uid = 'old-uid'`).Scan(&alias)
	idx.Close()
	if alias != refs["new-uid"] {
		t.Fatalf("the index did not keep old-uid as an alias of %s (got %q)", refs["new-uid"], alias)
	}

	// The legacy file: schema version 1, as the first release wrote it.
	path := filepath.Join(t.TempDir(), "actions.db")
	legacy, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations[:1]})
	if err != nil {
		t.Fatal(err)
	}
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	rows := []struct{ key, status string }{
		{"calendar:old-uid/" + unix(dentist), "done"},                                     // UID changed since: alias
		{"calendar:same-uid/" + board.Add(-time.Hour).UTC().Format(time.RFC3339), "read"}, // moved since
		{"calendar:dup-uid/" + unix(lunch.Add(-2*time.Hour)), "dismissed"},                // two legacy keys,
		{"calendar:dup-uid/" + unix(lunch.Add(-time.Hour)), "read"},                       // one event
		{"calendar:gone-uid/" + unix(now), "new"},                                         // no such event
		{"mail:thread:7", "new"},
	}
	for i, r := range rows {
		if _, err := legacy.ExecContext(ctx, `INSERT INTO items(source_key, kind, title, summary, priority, due_at, status, created_at,
			updated_at, source_at, snapshot) VALUES (?, ?, 'Legacy', '', 'normal', NULL, ?, ?, ?, ?, '{"legacy":true}')`,
			r.key, KindEventReminder, r.status, i, i, i); err != nil {
			t.Fatal(err)
		}
	}
	legacy.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	wantUnresolved := []string{rows[2].key, rows[3].key, rows[4].key}
	slices.Sort(wantUnresolved)
	if rep.Migrated != 2 || rep.Created != 1 || rep.Updated != 2 || !slices.Equal(rep.Unresolved, wantUnresolved) {
		t.Fatalf("pass %+v", rep)
	}
	for _, c := range []struct {
		uid    string
		status Status
		title  string
	}{{"new-uid", StatusDone, "Upcoming event: Dentist"}, {"same-uid", StatusRead, "Upcoming event: Board meeting"}} {
		it, err := s.BySource(ctx, "calendar:"+refs[c.uid])
		if err != nil {
			t.Fatalf("%s: %v", c.uid, err)
		}
		if it.Status != c.status || it.Title != c.title {
			t.Errorf("%s migrated as %+v", c.uid, it)
		}
	}
	res, err := s.List(ctx, ListOptions{IncludeHandled: true, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range res.Items {
		keys = append(keys, it.SourceKey)
	}
	slices.Sort(keys)
	want := append([]string{"calendar:" + refs["new-uid"], "calendar:" + refs["same-uid"], "calendar:" + refs["dup-uid"], "mail:thread:7"}, wantUnresolved...)
	slices.Sort(want)
	if !slices.Equal(keys, want) || res.CountsTotal[StatusDone] != 1 || res.CountsTotal[StatusDismissed] != 1 {
		t.Fatalf("items after the pass:\n%q\nwant\n%q (counts %v)", keys, want, res.CountsTotal)
	}
	// The ambiguous pair was not merged: a fresh reminder stands for the lunch.
	if lunchItem, _ := s.BySource(ctx, "calendar:"+refs["dup-uid"]); lunchItem == nil || lunchItem.Status != StatusNew {
		t.Fatalf("lunch reminder %+v", lunchItem)
	}

	// A second pass has nothing left to migrate and changes nothing.
	again, err := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now})
	if err != nil || again.Migrated != 0 || again.Created != 0 || again.Unchanged != 3 {
		t.Fatalf("second pass %+v %v", again, err)
	}
}

func TestParseLegacyKey(t *testing.T) {
	for _, c := range []struct {
		key   string
		uid   string
		start int64
		ok    bool
	}{
		{"calendar:abc@host/1780000000", "abc@host", 1780000000, true},
		{"calendar:a/b/2026-12-02T10:00:00Z", "a/b", 1796205600, true},
		{"calendar:0123456789abcdef01234567", "", 0, false},
		{"calendar:uid/not-a-time", "", 0, false},
		{"calendar:/1780000000", "", 0, false},
		{"mail:thread:1/2", "", 0, false},
	} {
		uid, start, ok := parseLegacyKey(c.key)
		if uid != c.uid || start != c.start || ok != c.ok {
			t.Errorf("parseLegacyKey(%q) = %q, %d, %v", c.key, uid, start, ok)
		}
	}
}

// An index the legacy keys cannot be resolved against (here: no alias
// table) leaves them as they are and still produces the reminders.
func TestLegacyMigrationFailureKeepsReminders(t *testing.T) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Minute)
	cal := newCalendarIndex(t)
	cal.put("uid-1", "Dentist", now.Add(5*time.Hour), now.Add(-time.Hour), "")
	cal.sync()
	// One placeholder migration: the index is at schema version 1 already.
	idx, err := sqlitedb.Open(ctx, cal.path, sqlitedb.Options{Migrations: []string{"SELECT 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.ExecContext(ctx, `DROP TABLE uid_aliases`); err != nil {
		t.Fatal(err)
	}
	idx.Close()
	s, _ := openTestStore(t)
	legacyKey := "calendar:uid-1/" + strconv.FormatInt(now.Add(5*time.Hour).Unix(), 10)
	if _, _, err := s.Upsert(ctx, Item{SourceKey: legacyKey, Kind: KindEventReminder, Title: "Legacy", SourceAt: now}, true); err != nil {
		t.Fatal(err)
	}
	rep, err := s.CalendarReminders(ctx, ReminderOptions{IndexPath: cal.path, Now: now})
	if err != nil || rep.Created != 1 || rep.Migrated != 0 || rep.MigrationError == "" {
		t.Fatalf("pass %+v %v", rep, err)
	}
	if it, err := s.BySource(ctx, legacyKey); err != nil || it.Title != "Legacy" {
		t.Fatalf("legacy reminder after a failed migration: %+v %v", it, err)
	}
}
