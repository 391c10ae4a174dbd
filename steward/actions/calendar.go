package actions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
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
	Events    int `json:"events"` // eligible indexed events in the window
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	// Migrated counts legacy UID/start reminders moved onto their stable
	// calendar:<refId> key; Unresolved lists legacy keys left as they are
	// because they match no single event or share one with another key.
	Migrated       int      `json:"migrated,omitempty"`
	Unresolved     []string `json:"unresolved,omitempty"`
	MigrationError string   `json:"migrationError,omitempty"`
	Skipped        string   `json:"skipped,omitempty"` // why the pass produced nothing (no index, …)
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
	// Mapped: a pass reads thousands of index pages, which would otherwise
	// each be copied into a freshly allocated page-cache slot.
	db, err := sqlitedb.Open(ctx, o.IndexPath, sqlitedb.Options{ReadOnly: true, MmapSize: 256 << 20})
	if err != nil {
		rep.Skipped = "calendar index unreadable: " + err.Error()
		return rep, nil
	}
	defer db.Close()
	items, err := readReminders(ctx, db, o)
	if err != nil {
		rep.Skipped = err.Error()
		return rep, nil
	}
	// A failed migration leaves the legacy rows as they are for the next
	// pass; it never stops the reminders (nor the mail scan after them).
	if rep.Migrated, rep.Unresolved, err = s.migrateLegacyReminders(ctx, db); err != nil {
		rep.MigrationError = err.Error()
	}
	rep.Events = len(items)
	if rep.Created, rep.Updated, rep.Unchanged, err = s.UpsertBatch(ctx, items, true); err != nil {
		return rep, err
	}
	return rep, nil
}

// readReminders reads the eligible events and returns their reminders.
func readReminders(ctx context.Context, db *sql.DB, o ReminderOptions) ([]Item, error) {
	from, to := o.Now.Unix(), o.Now.Add(time.Duration(o.Days)*24*time.Hour).Unix()
	// The events in the window, counted on the time index alone, bound the
	// reminders: their slices are allocated once (growing a slice of
	// 10,000 Items copied and cleared megabytes).
	var bound int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE start_at >= ? AND start_at < ?`, from, to).Scan(&bound); err != nil {
		return nil, fmt.Errorf("read calendar index: %w", err)
	}
	// The seven strings come as one column, each after its length in bytes
	// (octet_length: embedded NULs and invalid UTF-8 included), then the
	// strings themselves: every column fetched costs the driver several
	// locked calls and a string of its own.
	q := `SELECT start_at, end_at, all_day, last_modified,
		octet_length(ref_id) || ',' || octet_length(uid) || ',' || octet_length(title) || ',' || octet_length(location) || ',' ||
		octet_length(calendar) || ',' || octet_length(account) || ',' || octet_length(source) || ':' ||
		ref_id || uid || title || location || calendar || account || source
		FROM events WHERE status <> 'cancelled' AND start_at >= ? AND start_at < ?`
	args := []any{from, to}
	if !o.Cutoff.IsZero() {
		q += ` AND last_modified >= ?`
		args = append(args, o.Cutoff.Unix())
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY start_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("read calendar index: %w", err)
	}
	defer rows.Close()
	out := make([]Item, 0, bound)
	triggers := make([]reminderTrigger, bound)
	starts := make([]time.Time, bound)
	var e reminderEvent
	var packed string
	for rows.Next() {
		if err := rows.Scan(&e.Start, &e.End, &e.AllDay, &e.LastModified, &packed); err != nil {
			return nil, fmt.Errorf("read calendar index: %w", err)
		}
		if err := unpackStrings(packed, &e.RefID, &e.UID, &e.Title, &e.Location, &e.Calendar, &e.Account, &e.Source); err != nil {
			return nil, fmt.Errorf("read calendar index: %w", err)
		}
		if n := len(out); n < bound { // more rows than counted: a sync committed in between
			out = append(out, buildReminder(e, o, &triggers[n], &starts[n]))
		} else {
			out = append(out, reminderItem(e, o))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read calendar index: %w", err)
	}
	return out, nil
}

// unpackStrings splits "<len>,<len>,…:<bytes>" into dst.
func unpackStrings(packed string, dst ...*string) error {
	lengths, rest, found := strings.Cut(packed, ":")
	if !found {
		return malformedRow(packed)
	}
	for i, d := range dst {
		field := lengths
		if i < len(dst)-1 {
			if field, lengths, found = strings.Cut(lengths, ","); !found {
				return malformedRow(packed)
			}
		}
		// Digits only (no sign), and never more than the bytes left.
		if field == "" || len(field) > 9 {
			return malformedRow(packed)
		}
		n := 0
		for _, c := range []byte(field) {
			if c < '0' || c > '9' {
				return malformedRow(packed)
			}
			n = n*10 + int(c-'0')
		}
		if n > len(rest) {
			return malformedRow(packed)
		}
		*d, rest = rest[:n], rest[n:]
	}
	if rest != "" {
		return malformedRow(packed)
	}
	return nil
}

func malformedRow(packed string) error { return fmt.Errorf("malformed event row %q", packed) }

var italianDays = []string{"domenica", "lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato"}
var italianMonths = []string{"", "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre"}

// italianDate formats t the spec's way for the deterministic renderer
// ("lunedì 7 dicembre 2026, 09:30").
func italianDate(t time.Time, allDay bool) string { return string(appendItalianDate(nil, t, allDay)) }

// appendItalianDate appends italianDate(t, allDay) to b.
func appendItalianDate(b []byte, t time.Time, allDay bool) []byte {
	b = append(append(b, italianDays[t.Weekday()]...), ' ')
	b = append(strconv.AppendInt(b, int64(t.Day()), 10), ' ')
	b = append(append(b, italianMonths[t.Month()]...), ' ')
	b = strconv.AppendInt(b, int64(t.Year()), 10)
	if !allDay {
		b = t.AppendFormat(b, ", 15:04")
	}
	return b
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

	// startAt and endAt, when set, are Start and End before formatting,
	// which waits until the reminder is written (most passes write none).
	startAt, endAt time.Time
}

// reminderItem returns the reminder of e.
func reminderItem(e reminderEvent, o ReminderOptions) Item {
	return buildReminder(e, o, new(reminderTrigger), new(time.Time))
}

// buildReminder returns the reminder of e, its trigger in *ev and its due
// time in *start.
func buildReminder(e reminderEvent, o ReminderOptions, ev *reminderTrigger, start *time.Time) Item {
	*start = time.Unix(e.Start, 0).Local()
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
	b := make([]byte, 0, len(at)+len(" — ")+len(e.Location)+40)
	b = appendItalianDate(append(append(b, at...), ' '), *start, e.AllDay)
	if e.Location != "" {
		b = append(append(b, " — "...), e.Location...)
	}
	src := time.Unix(e.Start, 0)
	if e.LastModified.Valid {
		src = time.Unix(e.LastModified.Int64, 0)
	}
	// The row keeps the event's fields only; reading rebuilds the snapshot
	// and the proposal from them (reminderTrigger.expand).
	*ev = reminderTrigger{RefID: e.RefID, UID: e.UID, Title: e.Title, Location: e.Location, Calendar: e.Calendar,
		Account: e.Account, Source: e.Source, AllDay: e.AllDay, startAt: *start, endAt: time.Unix(e.End, 0).Local()}
	return Item{SourceKey: key, Kind: KindEventReminder, Title: label + ": " + title, Summary: string(b), Priority: priority,
		DueAt: start, SourceAt: src, reminder: ev}
}

// legacyReminder is a reminder keyed calendar:<UID>/<start> by earlier
// versions, from before the index gave events a stable refId: start is the
// event's start in Unix seconds or RFC 3339.
type legacyReminder struct {
	id    int64
	key   string
	uid   string
	start int64
}

// parseLegacyKey splits a legacy key; ok is false for a stable one.
func parseLegacyKey(key string) (uid string, start int64, ok bool) {
	rest, found := strings.CutPrefix(key, "calendar:")
	i := strings.LastIndexByte(rest, '/')
	if !found || i <= 0 {
		return "", 0, false
	}
	uid, at := rest[:i], rest[i+1:]
	if n, err := strconv.ParseInt(at, 10, 64); err == nil {
		return uid, n, true
	}
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		return uid, t.Unix(), true
	}
	return "", 0, false
}

// migrateLegacyReminders moves each uniquely identifiable legacy UID/start
// reminder onto calendar:<refId>, keeping its review status, so the pass
// that follows updates it instead of creating a duplicate. The legacy UID
// resolves through the index's current UIDs and its UID aliases (an event
// whose UID changed since); among several events with that identity the one
// starting at the legacy start is taken. A key matching no event, several
// events, or the same event as another legacy key (or an existing stable
// reminder) is left alone: duplicates are never merged by guess.
func (s *Store) migrateLegacyReminders(ctx context.Context, index *sql.DB) (int, []string, error) {
	// Stable keys are hex refIds (<parent>/<recurrence-id> for an edited
	// occurrence, which the index knows), so only keys with a '/' can be legacy.
	rows, err := s.db.QueryContext(ctx, `SELECT id, source_key FROM items
		WHERE source_key >= 'calendar:' AND source_key < 'calendar;' AND instr(source_key, '/') > 0`)
	if err != nil {
		return 0, nil, fmt.Errorf("read legacy reminders: %w", err)
	}
	var legacy []legacyReminder
	for rows.Next() {
		var l legacyReminder
		if err := rows.Scan(&l.id, &l.key); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("read legacy reminders: %w", err)
		}
		var ok bool
		if l.uid, l.start, ok = parseLegacyKey(l.key); ok {
			legacy = append(legacy, l)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(legacy) == 0 {
		return 0, nil, err
	}
	target := map[int64]string{} // legacy id → stable key
	claims := map[string]int{}   // stable key → legacy keys resolving to it
	var unresolved []string
	for _, l := range legacy {
		var known int
		index.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE ref_id = ?`, strings.TrimPrefix(l.key, "calendar:")).Scan(&known)
		if known > 0 {
			continue // an occurrence's stable key
		}
		ref, err := resolveLegacy(ctx, index, l)
		if err != nil {
			return 0, nil, err
		}
		if ref == "" {
			unresolved = append(unresolved, l.key)
			continue
		}
		target[l.id] = "calendar:" + ref
		claims["calendar:"+ref]++
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("migrate legacy reminders: %w", err)
	}
	defer tx.Rollback()
	migrated := 0
	for _, l := range legacy {
		key, ok := target[l.id]
		if !ok {
			continue
		}
		var taken int
		tx.QueryRowContext(ctx, `SELECT count(*) FROM items WHERE source_key = ?`, key).Scan(&taken)
		if claims[key] > 1 || taken > 0 {
			unresolved = append(unresolved, l.key)
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE items SET source_key = ? WHERE id = ?`, key, l.id); err != nil {
			return 0, nil, fmt.Errorf("migrate legacy reminder %s: %w", l.key, err)
		}
		migrated++
	}
	if err := tx.Commit(); err != nil {
		return 0, nil, fmt.Errorf("migrate legacy reminders: %w", err)
	}
	if migrated > 0 {
		s.audit(ctx, "action.migrated", fmt.Sprintf("%d legacy calendar reminders moved to stable event keys", migrated), audit.RiskLow,
			map[string]any{"migrated": migrated, "unresolved": unresolved})
	}
	sort.Strings(unresolved)
	return migrated, unresolved, nil
}

// resolveLegacy returns the refId of the one event l identifies, or "".
func resolveLegacy(ctx context.Context, index *sql.DB, l legacyReminder) (string, error) {
	rows, err := index.QueryContext(ctx, `SELECT ref_id, start_at FROM events
		WHERE uid = ?1 OR ref_id IN (SELECT ref_id FROM uid_aliases WHERE uid = ?1)`, l.uid)
	if err != nil {
		return "", fmt.Errorf("resolve legacy reminder %s: %w", l.key, err)
	}
	defer rows.Close()
	var all, atStart []string
	for rows.Next() {
		var ref string
		var start int64
		if err := rows.Scan(&ref, &start); err != nil {
			return "", fmt.Errorf("resolve legacy reminder %s: %w", l.key, err)
		}
		all = append(all, ref)
		if start == l.start {
			atStart = append(atStart, ref)
		}
	}
	switch {
	case len(atStart) == 1:
		return atStart[0], rows.Err()
	case len(atStart) == 0 && len(all) == 1: // the event moved since
		return all[0], rows.Err()
	}
	return "", rows.Err()
}
