package actions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// DefaultCalendarDays is ACTION_CENTER_CALENDAR_DAYS' default.
const DefaultCalendarDays = 3

// KindEventReminder is the kind of calendar reminders.
const KindEventReminder = "event-reminder"

// ReminderOptions configures one calendar reminder pass.
type ReminderOptions struct {
	// IndexPath is the calendar index (CALENDAR_INDEX_DB).
	IndexPath string
	// Days is the lookahead (ACTION_CENTER_CALENDAR_DAYS; DefaultCalendarDays when zero).
	Days int
	// Cutoff drops events last modified before it (Settings.CalendarCutoff); zero: none.
	Cutoff time.Time
	// Language is the settings' textLanguage: "it" renders Italian labels.
	Language string
	// Now is the pass's clock (time.Now when zero).
	Now time.Time
}

// ReminderReport says what a pass did.
type ReminderReport struct {
	Events    int    `json:"events"` // eligible indexed events in the window
	Created   int    `json:"created"`
	Updated   int    `json:"updated"`
	Unchanged int    `json:"unchanged"`
	Skipped   string `json:"skipped,omitempty"` // why the pass produced nothing (no index, …)
}

// reminderEvent is one indexed row the reminders read.
type reminderEvent struct {
	RefID, UID, Title, Location, Calendar, Account, Source string
	Start, End                                             int64
	AllDay                                                 bool
	LastModified                                           sql.NullInt64
}

// CalendarReminders turns indexed, non-cancelled events starting between
// now and the lookahead into event-reminder items — deterministically, with
// no model call: high priority within 24 hours, normal afterwards; source
// key calendar:<refId> (UID when the row has none). A moved event updates
// its reminder and keeps its review status. A missing index produces no
// reminders and no error, so it never stops the mail scanner.
func (s *Store) CalendarReminders(ctx context.Context, o ReminderOptions) (ReminderReport, error) {
	var rep ReminderReport
	if o.Days <= 0 {
		o.Days = DefaultCalendarDays
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if _, err := os.Stat(o.IndexPath); errors.Is(err, fs.ErrNotExist) {
		rep.Skipped = "no calendar index at " + o.IndexPath
		return rep, nil
	}
	db, err := sqlitedb.Open(ctx, o.IndexPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		rep.Skipped = "calendar index unreadable: " + err.Error()
		return rep, nil
	}
	defer db.Close()
	events, err := readReminderEvents(ctx, db, o)
	if err != nil {
		rep.Skipped = err.Error()
		return rep, nil
	}
	rep.Events = len(events)
	items := make([]Item, len(events))
	for i, e := range events {
		items[i] = reminderItem(e, o)
	}
	if rep.Created, rep.Updated, rep.Unchanged, err = s.UpsertBatch(ctx, items, true); err != nil {
		return rep, err
	}
	return rep, nil
}

func readReminderEvents(ctx context.Context, db *sql.DB, o ReminderOptions) ([]reminderEvent, error) {
	q := `SELECT ref_id, uid, title, location, calendar, account, source, start_at, end_at, all_day, last_modified
		FROM events WHERE status <> 'cancelled' AND start_at >= ? AND start_at < ?`
	args := []any{o.Now.Unix(), o.Now.Add(time.Duration(o.Days) * 24 * time.Hour).Unix()}
	if !o.Cutoff.IsZero() {
		q += ` AND last_modified >= ?`
		args = append(args, o.Cutoff.Unix())
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY start_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("read calendar index: %w", err)
	}
	defer rows.Close()
	var out []reminderEvent
	for rows.Next() {
		var e reminderEvent
		if err := rows.Scan(&e.RefID, &e.UID, &e.Title, &e.Location, &e.Calendar, &e.Account, &e.Source, &e.Start, &e.End, &e.AllDay, &e.LastModified); err != nil {
			return nil, fmt.Errorf("read calendar index: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

var italianDays = []string{"domenica", "lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato"}
var italianMonths = []string{"", "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre"}

// italianDate formats t the spec's way for the deterministic renderer
// ("lunedì 7 dicembre 2026, 09:30").
func italianDate(t time.Time, allDay bool) string {
	s := fmt.Sprintf("%s %d %s %d", italianDays[t.Weekday()], t.Day(), italianMonths[t.Month()], t.Year())
	if !allDay {
		s += t.Format(", 15:04")
	}
	return s
}

// reminderTrigger is a reminder's snapshot of its event (the sidecar reference and source fields).
type reminderTrigger struct {
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
}

func reminderItem(e reminderEvent, o ReminderOptions) Item {
	start := time.Unix(e.Start, 0).Local()
	key := "calendar:" + e.RefID
	if e.RefID == "" {
		key = "calendar:" + e.UID
	}
	priority := PriorityNormal
	if start.Sub(o.Now) < 24*time.Hour {
		priority = PriorityHigh
	}
	title := e.Title
	if title == "" {
		title = "(untitled event)"
	}
	label, at := "Upcoming event", "Starts"
	if o.Language == "it" {
		label, at = "Evento in arrivo", "Inizia"
	}
	summary := fmt.Sprintf("%s %s", at, italianDate(start, e.AllDay))
	if e.Location != "" {
		summary += " — " + e.Location
	}
	src := time.Unix(e.Start, 0)
	if e.LastModified.Valid {
		src = time.Unix(e.LastModified.Int64, 0)
	}
	// The snapshot and the proposal are built only when the row is written:
	// most passes find most reminders unchanged.
	fill := func(it *Item) {
		trigger, _ := json.Marshal(reminderTrigger{RefID: e.RefID, UID: e.UID, Title: e.Title, Location: e.Location, Calendar: e.Calendar,
			Account: e.Account, Source: e.Source, Start: start.Format(time.RFC3339), End: time.Unix(e.End, 0).Local().Format(time.RFC3339), AllDay: e.AllDay})
		readArgs, _ := json.Marshal(struct {
			UID string `json:"uid"`
		}{e.RefID})
		it.Snapshot = Snapshot{Trigger: trigger, Rationale: "deterministic calendar reminder"}
		it.Proposal = []Alternative{{Summary: "Review the event before it starts", Confidence: 1,
			Steps: []Step{{Label: "Open the event", Type: "tool", Tool: "mcp__calendar__read_event", Args: readArgs}}}}
	}
	return Item{SourceKey: key, Kind: KindEventReminder, Title: label + ": " + title, Summary: summary, Priority: priority,
		DueAt: &start, SourceAt: src, fill: fill}
}
