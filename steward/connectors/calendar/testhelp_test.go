package calendar

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
)

// appleDB builds a Calendar.sqlitedb from the real schema dump and lets the
// test fill it.
type appleDB struct {
	t    testing.TB
	db   *sql.DB
	Path string
}

func newAppleDB(t testing.TB) *appleDB {
	t.Helper()
	schema, err := os.ReadFile(localsourcetest.Fixture(t, "calendar-contacts/apple-calendar-sqlitedb/Calendar.sqlitedb.schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Calendar.sqlitedb")
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// sqlite_sequence is created by SQLite itself for AUTOINCREMENT tables.
	ddl := strings.Replace(string(schema), "CREATE TABLE sqlite_sequence(name,seq);", "", 1)
	if _, err := db.Exec(ddl); err != nil {
		t.Fatalf("apply Calendar.sqlitedb schema: %v", err)
	}
	a := &appleDB{t: t, db: db, Path: path}
	a.exec(`INSERT INTO Store (ROWID, name, type) VALUES (1, 'iCloud', 1), (2, 'Work Exchange', 2)`)
	a.exec(`INSERT INTO Calendar (ROWID, store_id, title, UUID) VALUES (1, 1, 'Home', 'CAL-HOME'), (2, 2, 'Work', 'CAL-WORK')`)
	return a
}

func (a *appleDB) exec(q string, args ...any) sql.Result {
	a.t.Helper()
	res, err := a.db.Exec(q, args...)
	if err != nil {
		a.t.Fatalf("%s: %v", q, err)
	}
	return res
}

// appleSec converts an instant to Core Data seconds.
func appleSec(t time.Time) float64 { return t.Sub(appleEpoch).Seconds() }

// appleEvent inserts a CalendarItem and returns its ROWID.
type appleEvent struct {
	Summary, Notes, TZ, UID, ExternalID, Location string
	Start, End                                    time.Time
	AllDay                                        bool
	Calendar                                      int
	OrigItem                                      int64
	OrigDate                                      time.Time
	EntityType, Hidden, Status, Availability      int
}

func (a *appleDB) event(e appleEvent) int64 {
	a.t.Helper()
	if e.Calendar == 0 {
		e.Calendar = 1
	}
	if e.EntityType == 0 {
		e.EntityType = 2
	}
	var loc any
	if e.Location != "" {
		res := a.exec(`INSERT INTO Location (title) VALUES (?)`, e.Location)
		id, _ := res.LastInsertId()
		loc = id
	}
	var orig any
	if !e.OrigDate.IsZero() {
		orig = appleSec(e.OrigDate)
	}
	allDay := 0
	if e.AllDay {
		allDay = 1
	}
	res := a.exec(`INSERT INTO CalendarItem (summary, description, start_date, start_tz, end_date, all_day, calendar_id,
		orig_item_id, orig_date, status, availability, unique_identifier, external_id, UUID, entity_type, hidden, location_id, last_modified)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Summary, e.Notes, appleSec(e.Start), e.TZ, appleSec(e.End), allDay, e.Calendar, e.OrigItem, orig, e.Status, e.Availability,
		e.UID, e.ExternalID, "UUID-"+e.UID, e.EntityType, e.Hidden, loc, appleSec(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	id, _ := res.LastInsertId()
	if loc != nil {
		a.exec(`UPDATE Location SET item_owner_id = ? WHERE ROWID = ?`, id, loc)
	}
	return id
}

func (a *appleDB) recurrence(owner int64, freq, interval, count int, until time.Time, spec string) {
	a.t.Helper()
	var end any
	if !until.IsZero() {
		end = appleSec(until)
	}
	a.exec(`INSERT INTO Recurrence (owner_id, frequency, interval, count, end_date, specifier) VALUES (?, ?, ?, ?, ?, ?)`,
		owner, freq, interval, count, end, spec)
	a.exec(`UPDATE CalendarItem SET has_recurrences = 1 WHERE ROWID = ?`, owner)
}
