package actions

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// oldWayReminder is a reminder as schema version 3 stored it: the
// proposal and snapshot built from the event by version 3's code (copied
// here, so that a change to what reading rebuilds shows), written as JSON.
func oldWayReminder(it Item, key string) Item {
	e := it.reminder.formatted()
	trigger, _ := json.Marshal(struct {
		RefID    string `json:"refId"`
		UID      string `json:"uid"`
		Title    string `json:"title"`
		Location string `json:"location,omitempty"`
		Calendar string `json:"calendar"`
		Account  string `json:"account"`
		Source   string `json:"source"`
		Start    string `json:"start"`
		End      string `json:"end"`
		AllDay   bool   `json:"allDay"`
	}{RefID: e.RefID, UID: e.UID, Title: e.Title, Location: e.Location, Calendar: e.Calendar,
		Account: e.Account, Source: e.Source, Start: it.DueAt.Format(time.RFC3339), End: e.End, AllDay: e.AllDay})
	readArgs, _ := json.Marshal(struct {
		UID string `json:"uid"`
	}{e.RefID})
	it.Snapshot = Snapshot{Trigger: trigger, Rationale: "deterministic calendar reminder"}
	it.Proposal = []Alternative{{Summary: "Review the event before it starts", Confidence: 1,
		Steps: []Step{{Label: "Open the event", Type: "tool", Tool: "mcp__calendar__read_event", Args: readArgs}}}}
	it.reminder, it.SourceKey = nil, key
	return it
}

// sameReminder fails unless got equals want in everything but id and key.
func sameReminder(t *testing.T, what string, got, want *Item) {
	t.Helper()
	g, w := *got, *want
	g.ID, g.SourceKey, w.ID, w.SourceKey = 0, "", 0, ""
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: compact reminder reads back as\n%+v\nthe old way\n%+v", what, g, w)
	}
}

func reminderColumns(t *testing.T, s *Store, id int64) (snapshot string, event []byte) {
	t.Helper()
	if err := s.DB().QueryRow(`SELECT snapshot, reminder_event FROM items WHERE id = ?`, id).Scan(&snapshot, &event); err != nil {
		t.Fatal(err)
	}
	return snapshot, event
}

// A reminder stored compactly (its event only) reads back — through Get
// and through a payload list — equal to the same reminder stored the old
// way, with its proposal and snapshot as JSON; a revision or a summary
// change afterwards is stored in full and read back as written.
func TestCompactReminderReadsAsFull(t *testing.T) {
	ctx := context.Background()
	s, _ := openTestStore(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	o := ReminderOptions{Now: now, Days: DefaultCalendarDays}
	mod := sql.NullInt64{Int64: now.Add(-time.Hour).Unix(), Valid: true}
	events := []reminderEvent{
		{RefID: "0f3a9c", UID: "dentist@example.com", Title: "Dentist", Location: "Via Roma 1, Milano", Calendar: "home", Account: "dav",
			Source: "dav", Start: now.Add(5 * time.Hour).Unix(), End: now.Add(6 * time.Hour).Unix(), LastModified: mod},
		{RefID: "77aa01/20261203T090000Z", UID: "standup", Title: "Stand-up \"daily\" <b>&</b> ☕", Calendar: "work", Account: "corp",
			Source: "caldav", Start: now.Add(48 * time.Hour).Unix(), End: now.Add(48*time.Hour + 15*time.Minute).Unix()},
		{UID: "no-ref-uid", Title: "", Calendar: "home", Account: "dav", Source: "dav", AllDay: true,
			Start: now.Add(30 * time.Hour).Unix(), End: now.Add(54 * time.Hour).Unix(), LastModified: mod},
		{RefID: "bad-utf8", UID: "x", Title: "caf\xe9 \x00 tab\tnewline\n", Location: strings.Repeat("long ", 400), Calendar: "c", Account: "a",
			Source: "s", Start: now.Add(time.Hour).Unix(), End: now.Add(2 * time.Hour).Unix()},
	}
	var items []Item
	for i, e := range events {
		it := reminderItem(e, o)
		if i == 1 {
			o.Language = "it"
		}
		items = append(items, it, oldWayReminder(it, "old:"+it.SourceKey))
	}
	if created, _, _, err := s.UpsertBatch(ctx, items, true); err != nil || created != len(items) {
		t.Fatalf("stored %d of %d: %v", created, len(items), err)
	}
	// Each reminder once more as the first compact encoding stored it
	// (version 1: refId and formatted times in the blob), under "v1:".
	for i := 0; i < len(items); i += 2 {
		it := items[i]
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO items(source_key, kind, title, summary, priority, due_at, status, created_at,
			updated_at, source_at, source_hash, reminder_event) SELECT 'v1:' || source_key, kind, title, summary, priority, due_at, status,
			created_at, updated_at, source_at, source_hash, ? FROM items WHERE source_key = ?`, appendReminderEventV1(nil, it.reminder), it.SourceKey); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.List(ctx, ListOptions{Limit: 100, IncludePayload: true})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*Item{}
	for i := range res.Items {
		listed[res.Items[i].SourceKey] = &res.Items[i]
	}
	for i := 0; i < len(items); i += 2 {
		it := items[i]
		compact, err := s.BySource(ctx, it.SourceKey)
		if err != nil {
			t.Fatal(err)
		}
		full, err := s.BySource(ctx, "old:"+it.SourceKey)
		if err != nil {
			t.Fatal(err)
		}
		if snap, ev := reminderColumns(t, s, compact.ID); snap != "{}" || len(ev) == 0 {
			t.Fatalf("%s stored snapshot %q and event %q: not compact", it.SourceKey, snap, ev)
		}
		if snap, ev := reminderColumns(t, s, full.ID); !strings.Contains(snap, `"trigger"`) || ev != nil {
			t.Fatalf("old-way row %s stored snapshot %q and event %q", full.SourceKey, snap, ev)
		}
		if len(compact.Proposal) != 1 || !bytes.Contains(compact.Snapshot.Trigger, []byte(`"uid":`)) {
			t.Fatalf("%s rebuilt without a proposal or trigger: %+v", it.SourceKey, compact)
		}
		sameReminder(t, "Get "+it.SourceKey, compact, full)
		v1, err := s.BySource(ctx, "v1:"+it.SourceKey)
		if err != nil {
			t.Fatal(err)
		}
		sameReminder(t, "version-1 row "+it.SourceKey, v1, full)
		sameReminder(t, "List version-1 row "+it.SourceKey, listed["v1:"+it.SourceKey], full)
		sameReminder(t, "List "+it.SourceKey, listed[it.SourceKey], listed["old:"+it.SourceKey])
		sameReminder(t, "List vs Get "+it.SourceKey, listed[it.SourceKey], compact)
	}

	// Revising a compact reminder stores the new proposal and the
	// instruction; a summary change afterwards keeps both.
	dentist, _ := s.BySource(ctx, items[0].SourceKey)
	alt := []Alternative{{Summary: "Move it", Confidence: 0.6, Steps: []Step{{Label: "Ask to move", Type: "manual", Notes: "call them"}}}}
	if _, err := s.Revise(ctx, dentist.ID, "Dentist, earlier", "suggest moving it", alt); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSummary(ctx, dentist.ID, "Dentist, answered", "mail:thread:9"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, dentist.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *dentist
	want.Summary, want.Proposal, want.UpdatedAt = "Dentist, answered", alt, got.UpdatedAt
	want.Snapshot.Revisions, want.Snapshot.CrossThreads = []string{"suggest moving it"}, []string{"mail:thread:9"}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("revised reminder\n%+v\nwant\n%+v", *got, want)
	}
	if _, ev := reminderColumns(t, s, dentist.ID); ev != nil {
		t.Fatal("a revised reminder still stores its event in place of the payload")
	}
}

// A store of schema version 3 (reminders stored with JSON payloads) is
// opened by the current code: it migrates to version 4, its reminders read
// back as they were, a pass over the same events leaves them unchanged,
// and a moved event rewrites its reminder compactly, read back as the old
// way would have built it.
func TestReminderPayloadMigration(t *testing.T) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Minute)
	cal := newCalendarIndex(t)
	mod := now.Add(-time.Hour)
	cal.put("dentist", "Dentist", now.Add(5*time.Hour), mod, "")
	cal.put("board", "Board meeting", now.Add(30*time.Hour), mod, "")
	cal.sync()
	o := ReminderOptions{IndexPath: cal.path, Now: now}
	idx, err := sqlitedb.Open(ctx, cal.path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readReminders(ctx, idx, ReminderOptions{Now: now, Days: DefaultCalendarDays})
	idx.Close()
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %v %v", evs, err)
	}

	// The version-3 file, written with version 3's statement and payloads.
	path := filepath.Join(t.TempDir(), "actions.db")
	v3, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations[:3]})
	if err != nil {
		t.Fatal(err)
	}
	var want []Item
	for _, e := range evs {
		it := oldWayReminder(e, e.SourceKey)
		p, err := encodeParts(it)
		if err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Minute).UnixMilli()
		if _, err := v3.ExecContext(ctx, `INSERT INTO items(source_key, kind, title, summary, priority, due_at, status, created_at, updated_at,
			source_at, source_hash, proposal, diagnostics, snapshot) VALUES (?,?,?,?,?,?,'new',?,?,?,?,?,?,?)`, it.SourceKey, it.Kind, it.Title,
			it.Summary, it.Priority, it.DueAt.UnixMilli(), at, at, it.SourceAt.UnixMilli(), sourceHash(&it), p.proposal, p.diagnostics, p.snapshot); err != nil {
			t.Fatal(err)
		}
		want = append(want, it)
	}
	if _, err := v3.ExecContext(ctx, `UPDATE item_counts SET n = 2 WHERE status = 'new'`); err != nil {
		t.Fatal(err)
	}
	v3.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := sqlitedb.Version(ctx, s.DB()); err != nil || v != len(migrations) || v != 4 {
		t.Fatalf("schema version %d (%v), want 4", v, err)
	}
	var dropped int
	s.DB().QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'items_source_state'`).Scan(&dropped)
	if dropped != 0 {
		t.Fatal("version 4 keeps items_source_state")
	}
	check := func(when string) {
		t.Helper()
		for _, w := range want {
			got, err := s.BySource(ctx, w.SourceKey)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if !reflect.DeepEqual(got.Proposal, w.Proposal) || !reflect.DeepEqual(got.Snapshot, w.Snapshot) ||
				got.Title != w.Title || got.Summary != w.Summary || !got.DueAt.Equal(*w.DueAt) || !reflect.DeepEqual(got.Diagnostics, []string{}) {
				t.Fatalf("%s: %s reads back as\n%+v\nwant\n%+v", when, w.SourceKey, got, w)
			}
		}
	}
	check("after the migration")
	if rep, err := s.CalendarReminders(ctx, o); err != nil || rep.Unchanged != 2 || rep.Created+rep.Updated != 0 {
		t.Fatalf("pass over migrated reminders %+v %v", rep, err)
	}
	check("after an unchanged pass")

	// The board meeting moves: its reminder is rewritten compactly.
	cal.put("board", "Board meeting", now.Add(10*time.Hour), now, "")
	cal.sync()
	if rep, err := s.CalendarReminders(ctx, o); err != nil || rep.Updated != 1 || rep.Unchanged != 1 {
		t.Fatalf("pass after the move %+v %v", rep, err)
	}
	idx, _ = sqlitedb.Open(ctx, cal.path, sqlitedb.Options{ReadOnly: true})
	evs, _ = readReminders(ctx, idx, ReminderOptions{Now: now, Days: DefaultCalendarDays})
	idx.Close()
	want = want[:0]
	for _, it := range evs {
		want = append(want, oldWayReminder(it, it.SourceKey))
	}
	check("after the move")
	board, err := findTitle(s, "Board meeting")
	if err != nil {
		t.Fatal(err)
	}
	if _, ev := reminderColumns(t, s, board.ID); ev == nil || board.Title != "Upcoming event: Board meeting" {
		t.Fatalf("moved reminder %+v not stored compactly", board)
	}
}

// appendReminderEventV1 is version 1 of the encoding (the first compact
// rows), kept here to write such rows: every string of the trigger with
// Start and End formatted, length-prefixed, then the all-day flag.
func appendReminderEventV1(b []byte, t *reminderTrigger) []byte {
	t = t.formatted()
	b = append(b, reminderEventV1)
	for _, f := range append(t.strings(), &t.Start, &t.End) {
		b = binary.AppendUvarint(b, uint64(len(*f)))
		b = append(b, *f...)
	}
	if t.AllDay {
		return append(b, 1)
	}
	return append(b, 0)
}

// The trigger a version-2 event reads back as is the one it was encoded
// from, in time zones whose offset differs between start and end (a
// daylight-saving change), with the refId taken from the key or stored.
func TestReminderEventRoundTrip(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Skip("no zone data:", err)
	}
	start := time.Date(2026, 10, 24, 22, 30, 0, 0, rome) // ends after the change to winter time
	for _, c := range []struct {
		key string
		ev  reminderTrigger
	}{
		{"calendar:0f3a9c", reminderTrigger{RefID: "0f3a9c", UID: "u@x", Title: "Night train", Location: "Roma Termini", Calendar: "home",
			Account: "dav", Source: "dav", startAt: start, endAt: start.Add(10 * time.Hour)}},
		{"calendar:uid-only", reminderTrigger{UID: "uid-only", Title: "caf\xe9 \x00", AllDay: true,
			startAt: start.In(time.UTC), endAt: start.Add(24 * time.Hour).In(time.FixedZone("", -(9*3600 + 30*60)))}},
		{"old:calendar:77aa", reminderTrigger{RefID: "77aa", UID: "x", startAt: start.In(time.Local), endAt: start.In(time.Local)}},
	} {
		b := appendReminderEvent(nil, c.key, &c.ev)
		got, err := decodeReminderEvent(b, c.key, sql.NullInt64{Int64: c.ev.startAt.UnixMilli(), Valid: true})
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		if g, w := *got.formatted(), *c.ev.formatted(); g.Start != w.Start || g.End != w.End || !reflect.DeepEqual(g.strings(), w.strings()) ||
			g.AllDay != w.AllDay {
			t.Fatalf("%s reads back as %+v, want %+v", c.key, g, w)
		}
		if strings.Contains(string(b), "0f3a9c") {
			t.Fatalf("%s: the refId is stored beside the key that holds it: %q", c.key, b)
		}
		if _, err := decodeReminderEvent(b, c.key, sql.NullInt64{}); err == nil {
			t.Fatalf("%s: a version-2 event decoded without its row's due time", c.key)
		}
	}
	if w := "2026-10-25T07:30:00+01:00"; (&reminderTrigger{startAt: start, endAt: start.Add(10 * time.Hour)}).formatted().End != w {
		t.Fatalf("the test's end does not cross the change (want %s)", w)
	}
}

// FuzzReminderEvent feeds arbitrary bytes, source keys and due times to the
// reminder event decoder: it never panics, and what it accepts encodes
// back to an event that decodes the same.
func FuzzReminderEvent(f *testing.F) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	full := &reminderTrigger{RefID: "r", UID: "u", Title: "t", Location: "l", AllDay: true, startAt: start, endAt: start.Add(time.Hour)}
	f.Add(appendReminderEvent(nil, "calendar:r", full), "calendar:r", start.UnixMilli())
	f.Add(appendReminderEvent(nil, "mail:x", full), "mail:x", start.UnixMilli())
	f.Add(appendReminderEventV1(nil, full), "calendar:r", int64(0))
	f.Add([]byte{1, 200, 1}, "", int64(0))
	f.Add([]byte{2, 2, 0}, "calendar:", int64(-1))
	f.Add([]byte{}, "", int64(0))
	f.Fuzz(func(t *testing.T, b []byte, key string, due int64) {
		d := sql.NullInt64{Int64: due, Valid: true}
		ev, err := decodeReminderEvent(b, key, d)
		if err != nil {
			return
		}
		var again []byte
		if b[0] == reminderEventV1 {
			again = appendReminderEventV1(nil, ev)
		} else {
			again = appendReminderEvent(nil, key, ev)
		}
		ev2, err := decodeReminderEvent(again, key, d)
		if err != nil {
			t.Fatalf("%q decodes to %+v, which encodes to %q, which does not decode: %v", b, ev, again, err)
		}
		if g, w := *ev2.formatted(), *ev.formatted(); !reflect.DeepEqual(g.strings(), w.strings()) || g.Start != w.Start || g.End != w.End || g.AllDay != w.AllDay {
			t.Fatalf("%q decodes to %+v, which encodes to %q, which decodes to %+v", b, w, again, g)
		}
	})
}

// The reminder summary's date renders the spec's way.
func TestItalianDate(t *testing.T) {
	for _, c := range []struct {
		at     time.Time
		allDay bool
		want   string
	}{
		{time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC), false, "lunedì 7 dicembre 2026, 09:30"},
		{time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), true, "lunedì 7 dicembre 2026"},
		{time.Date(2027, 1, 31, 23, 5, 0, 0, time.UTC), false, "domenica 31 gennaio 2027, 23:05"},
	} {
		if got := italianDate(c.at, c.allDay); got != c.want {
			t.Errorf("italianDate(%v, %v) = %q, want %q", c.at, c.allDay, got, c.want)
		}
	}
}
