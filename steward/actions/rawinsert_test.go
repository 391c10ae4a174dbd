package actions

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawTestReminders returns n reminders of varied shape (both priorities,
// both languages, all-day, no location, a key without a refId, odd bytes).
func rawTestReminders(now time.Time, n int) []Item {
	var out []Item
	for i := range n {
		e := reminderEvent{RefID: fmt.Sprintf("%08x", uint32(i)*2654435761), UID: fmt.Sprintf("uid-%d@example.com", i),
			Title: fmt.Sprintf("Meeting %d", i), Location: fmt.Sprintf("Room %d", i%7), Calendar: "home", Account: "dav", Source: "dav",
			Start: now.Add(time.Duration(i*37) * time.Minute).Unix(), End: now.Add(time.Duration(i*37+30) * time.Minute).Unix(),
			LastModified: sql.NullInt64{Int64: now.Add(-time.Hour).Unix(), Valid: i%3 != 0}}
		o := ReminderOptions{Now: now, Days: DefaultCalendarDays}
		switch i % 5 {
		case 1:
			o.Language = "it"
		case 2:
			e.AllDay, e.Location = true, ""
		case 3:
			e.RefID = "" // keyed by UID
		case 4:
			e.Title = "caf\xe9 \x00 ☕ \"q\""
		}
		out = append(out, reminderItem(e, o))
	}
	return out
}

// storedRows returns every column of every item row, in id order, and
// item_counts. The three payload columns are read as text: a reminder row
// takes their defaults ('[]', '{}'), which Upsert binds as blobs of the
// same bytes, and reading treats both alike.
func storedRows(t *testing.T, s *Store) ([][]any, [][]any) {
	t.Helper()
	var out [2][][]any
	for i, q := range []string{`SELECT id, source_key, kind, title, summary, priority, due_at, status, created_at, updated_at, source_at,
		notified_at, source_hash, CAST(proposal AS TEXT), CAST(diagnostics AS TEXT), CAST(snapshot AS TEXT), reminder_event
		FROM items ORDER BY id`, `SELECT * FROM item_counts ORDER BY status`} {
		rows, err := s.DB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for j := range vals {
				ptrs[j] = &vals[j]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out[0], out[1]
}

// TestRawReminderInsertMatchesUpsert: the reminders a batch writes through
// the driver connection (insertReminders) are, column for column, the rows
// Upsert's database/sql statement writes for the same items one by one.
func TestRawReminderInsertMatchesUpsert(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, insertChunk - 1, insertChunk, 2*insertChunk + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			batch, c := openTestStore(t)
			single, _ := openTestStore(t)
			items := rawTestReminders(c.t, n)
			for i := range items {
				if !rawReminder(&items[i]) {
					t.Fatalf("reminder %d would not take the raw path", i)
				}
			}
			if created, _, _, err := batch.UpsertBatch(ctx, items, true); err != nil || created != n {
				t.Fatalf("batch created %d of %d: %v", created, n, err)
			}
			// A batch inserts in key order: so does the reference, for equal ids.
			sorted := slices.Clone(items)
			slices.SortFunc(sorted, func(a, b Item) int { return strings.Compare(a.SourceKey, b.SourceKey) })
			for _, it := range sorted {
				if _, out, err := single.Upsert(ctx, it, true); err != nil || out != Created {
					t.Fatalf("upsert %s: %v %v", it.SourceKey, out, err)
				}
			}
			gotRows, gotCounts := storedRows(t, batch)
			wantRows, wantCounts := storedRows(t, single)
			if len(gotRows) != n || len(wantRows) != n {
				t.Fatalf("%d raw rows, %d through Upsert, want %d", len(gotRows), len(wantRows), n)
			}
			for i := range gotRows {
				for j := range gotRows[i] {
					if !reflect.DeepEqual(gotRows[i][j], wantRows[i][j]) {
						t.Fatalf("row %d column %d: raw %#v, Upsert %#v", i, j, gotRows[i][j], wantRows[i][j])
					}
				}
			}
			if !reflect.DeepEqual(gotCounts, wantCounts) {
				t.Fatalf("counts %v, want %v", gotCounts, wantCounts)
			}
			// A second pass finds them all unchanged (hashes equal).
			if _, updated, unchanged, err := batch.UpsertBatch(ctx, items, true); err != nil || unchanged != n || updated != 0 {
				t.Fatalf("second pass: %d updated, %d unchanged, %v", updated, unchanged, err)
			}
		})
	}
}

// TestRawReminderInsertRestoresChecks: the raw insert switches the
// connection's CHECK constraints off for its own statements only; after a
// batch, committed or failed, the store's connection enforces them again.
func TestRawReminderInsertRestoresChecks(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	badStatus := func(key string) error {
		_, err := s.DB().ExecContext(ctx, `INSERT INTO items(source_key, kind, title, status, created_at, updated_at, source_at)
			VALUES (?, 'k', 't', 'bogus', 0, 0, 0)`, key)
		return err
	}
	items := rawTestReminders(c.t, insertChunk+3)
	if _, _, _, err := s.UpsertBatch(ctx, items[:insertChunk], true); err != nil {
		t.Fatal(err)
	}
	if err := badStatus("after-commit"); err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
		t.Fatalf("bad status after a committed batch: %v", err)
	}
	// A failing raw insert (a test trigger refuses one title) rolls the
	// batch back and leaves the checks on as well.
	if _, err := s.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON items WHEN NEW.title LIKE '%Meeting 65' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.UpsertBatch(ctx, items[insertChunk:], true); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("batch with a refused row: %v", err)
	}
	if err := badStatus("after-failure"); err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
		t.Fatalf("bad status after a failed batch: %v", err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM items`).Scan(&n); err != nil || n != insertChunk {
		t.Fatalf("%d rows after the failed batch, want %d: %v", n, insertChunk, err)
	}
}

// TestRawReminderBatchMixed: reminders (raw path, more than one chunk),
// mail items (database/sql path) and a reminder whose key comes twice (its
// event moved) in one batch: the first occurrence creates, the second
// updates, every row and count lands.
func TestRawReminderBatchMixed(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	items := rawTestReminders(c.t, insertChunk+6)
	moved := reminderEvent{RefID: "moved-ref", UID: "moved@example.com", Title: "Moved", Calendar: "home", Account: "dav", Source: "dav",
		Start: c.t.Add(2 * time.Hour).Unix(), End: c.t.Add(3 * time.Hour).Unix()}
	o := ReminderOptions{Now: c.t, Days: DefaultCalendarDays}
	items = append(items, reminderItem(moved, o))
	for i := range 3 {
		items = append(items, testMailItem(i, c.t))
	}
	moved.Start, moved.End = moved.Start+30*3600, moved.End+30*3600
	items = append(items, reminderItem(moved, o))
	created, updated, _, err := s.UpsertBatch(ctx, items, true)
	if err != nil || created != insertChunk+10 || updated != 1 {
		t.Fatalf("created %d, updated %d: %v", created, updated, err)
	}
	it, err := s.BySource(ctx, "calendar:moved-ref")
	if err != nil || it.DueAt == nil || it.DueAt.Unix() != moved.Start || it.Priority != PriorityNormal || it.Status != StatusNew {
		t.Fatalf("moved reminder %+v: %v", it, err)
	}
	mail, err := s.BySource(ctx, "mail:thread:2")
	if err != nil || len(mail.Proposal) != 1 || mail.Kind != "reply-needed" {
		t.Fatalf("mail item %+v: %v", mail, err)
	}
	res, err := s.List(ctx, ListOptions{})
	if err != nil || res.CountsTotal[StatusNew] != insertChunk+10 {
		t.Fatalf("counts %v: %v", res.CountsTotal, err)
	}
	var rows int
	if err := s.DB().QueryRow(`SELECT count(*) FROM items`).Scan(&rows); err != nil || rows != insertChunk+10 {
		t.Fatalf("%d rows: %v", rows, err)
	}
}

// TestRawReminderInsertRestoreFails: when the CHECK constraints cannot be
// turned back on, the batch fails (it does not hang on its own
// transaction) and the connection is not returned to the pool: the next
// statement enforces the checks.
func TestRawReminderInsertRestoreFails(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	restoreChecksSQL = `PRAGMA no such pragma (`
	t.Cleanup(func() { restoreChecksSQL = `PRAGMA ignore_check_constraints = OFF` })
	done := make(chan error, 1)
	go func() {
		_, _, _, err := s.UpsertBatch(ctx, rawTestReminders(c.t, 3), true)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "restore CHECK constraints") {
			t.Fatalf("batch whose checks stay off: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("UpsertBatch hangs when the CHECK constraints cannot be restored")
	}
	restoreChecksSQL = `PRAGMA ignore_check_constraints = OFF`
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM items`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after the failed batch: %v", n, err)
	}
	for i := range 4 { // more than the pool's idle connections
		_, err := s.DB().ExecContext(ctx, `INSERT INTO items(source_key, kind, title, status, created_at, updated_at, source_at)
			VALUES (?, 'k', 't', 'bogus', 0, 0, 0)`, fmt.Sprint("bad-", i))
		if err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
			t.Fatalf("bad status after a batch that could not restore the checks: %v", err)
		}
	}
}

// TestRawReminderInsertSkipsOneCheck: the raw insert skips the items
// table's CHECK constraints because its one CHECK (the status) holds by
// construction; a migration that adds another must revisit it.
func TestRawReminderInsertSkipsOneCheck(t *testing.T) {
	s, _ := openTestStore(t)
	var schema string
	if err := s.DB().QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'items'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.ToUpper(schema), "CHECK"); n != 1 || !strings.Contains(schema, "CHECK (status IN ('new','read','done','dismissed'))") {
		t.Fatalf("items has %d CHECK constraints, insertReminders skips them all: %s", n, schema)
	}
}
