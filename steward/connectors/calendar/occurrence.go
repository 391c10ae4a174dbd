package calendar

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
)

// eventRow is one indexed row.
type eventRow struct {
	ID                                    int64
	Ref, Parent                           string
	Source, Account, Calendar, CalendarID string
	UID, ExternalID                       string
	RecurrenceID                          sql.NullInt64
	Title, Location, Notes, URL           string
	StartAt, EndAt                        int64
	AllDay                                bool
	StartDate, EndDate, TZID              string
	Floating                              bool
	Status                                string
	Transparent                           bool
	RRule, Canonical, Problem             string
	Expandable                            bool
	SeriesEnd                             sql.NullInt64
	ExDates, RDates, Alarms               string
	LastModified                          sql.NullInt64
	SourcePath                            string
	SeenGeneration                        int64
}

const rowColumns = `id, ref_id, COALESCE(parent_ref, ''), source, account, calendar, calendar_id, uid, external_id, recurrence_id,
	title, location, notes, url, start_at, end_at, all_day, start_date, end_date, tzid, floating, status, transparent,
	rrule, rrule_canonical, rrule_problem, rrule_expandable, series_end, exdates, rdates, alarms, last_modified, source_path, seen_generation`

func scanRows(rows *sql.Rows) ([]*eventRow, error) {
	defer rows.Close()
	var out []*eventRow
	for rows.Next() {
		e := &eventRow{}
		if err := rows.Scan(&e.ID, &e.Ref, &e.Parent, &e.Source, &e.Account, &e.Calendar, &e.CalendarID, &e.UID, &e.ExternalID, &e.RecurrenceID,
			&e.Title, &e.Location, &e.Notes, &e.URL, &e.StartAt, &e.EndAt, &e.AllDay, &e.StartDate, &e.EndDate, &e.TZID, &e.Floating,
			&e.Status, &e.Transparent, &e.RRule, &e.Canonical, &e.Problem, &e.Expandable, &e.SeriesEnd, &e.ExDates, &e.RDates,
			&e.Alarms, &e.LastModified, &e.SourcePath, &e.SeenGeneration); err != nil {
			return nil, fmt.Errorf("read indexed event: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (x *Index) queryRows(ctx context.Context, where string, args ...any) ([]*eventRow, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT `+rowColumns+` FROM events WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("query calendar index: %w", err)
	}
	return scanRows(rows)
}

func (e *eventRow) recurring() bool { return e.RRule != "" || e.RDates != "[]" && e.RDates != "" }

// occurrence is one instance of an event.
type occurrence struct {
	row                *eventRow
	Start, End         time.Time
	StartDate, EndDate string // all-day only
	expanded           bool   // an instance of a recurring master
}

// seriesStart is the first occurrence in the form rrule expands: the civil
// date at midnight UTC for all-day events, else the start in its zone.
func seriesStart(allDay bool, startDate string, start time.Time, tzid string, floating bool, zone *time.Location) (time.Time, error) {
	if allDay {
		return time.Parse(time.DateOnly, startDate)
	}
	switch {
	case tzid != "":
		loc, err := resolveTZID(tzid)
		if err != nil {
			return time.Time{}, err
		}
		return start.In(loc), nil
	case floating && zone != nil:
		return start.In(zone), nil
	case floating:
		return start, nil
	}
	return start.UTC(), nil
}

// errUnexpandable reports a recurring event whose occurrences cannot be
// listed, so availability over its span is unknown.
type errUnexpandable struct {
	row    *eventRow
	reason string
}

func (e *errUnexpandable) Error() string {
	return fmt.Sprintf("event %q (uid %s) repeats by a rule that cannot be expanded (%s)", e.row.Title, e.row.UID, e.reason)
}

// occurrencesIn lists the instances of e that overlap [after, before)
// (half-open: end > after && start < before), skipping excluded dates and
// occurrences replaced by a detached row (overridden, as unix seconds).
// More than limit instances give rrule.ErrTooMany.
func (e *eventRow) occurrencesIn(after, before time.Time, limit int, zone *time.Location, overridden map[int64]bool) ([]occurrence, error) {
	if !e.recurring() {
		o := e.single(zone)
		if overlaps(o, after, before) {
			return []occurrence{o}, nil
		}
		return nil, nil
	}
	if !e.Expandable {
		return nil, &errUnexpandable{row: e, reason: e.Problem}
	}
	start, err := seriesStart(e.AllDay, e.StartDate, time.Unix(e.StartAt, 0), e.TZID, e.Floating, zone)
	if err != nil {
		return nil, &errUnexpandable{row: e, reason: err.Error()}
	}
	var starts []time.Time
	if e.RRule != "" {
		r, err := rrule.Parse(e.RRule)
		if err != nil {
			return nil, &errUnexpandable{row: e, reason: err.Error()}
		}
		lo, hi := after.Add(-time.Duration(e.EndAt-e.StartAt)*time.Second), before
		if e.AllDay {
			// Expand civil dates with a day of slack either side; the exact
			// overlap is checked on the zone's instants below.
			lo = civilOf(after, zone).AddDate(0, 0, -int(e.days())-1)
			hi = civilOf(before, zone).AddDate(0, 0, 1)
		}
		// The expansion window has slack, so allow for instances outside
		// the requested one before calling it too many.
		starts, err = r.Between(start, lo.Add(-time.Second), hi, limit+64)
		if errors.Is(err, rrule.ErrTooMany) {
			return nil, err
		}
		if err != nil {
			return nil, &errUnexpandable{row: e, reason: err.Error()}
		}
	}
	exInstants, exDates := parseDateList(e.ExDates)
	rdInstants, rdDates := parseDateList(e.RDates)
	for d := range rdDates {
		if t, err := time.Parse(time.DateOnly, d); err == nil {
			starts = append(starts, t)
		}
	}
	for u := range rdInstants {
		starts = append(starts, time.Unix(u, 0).In(start.Location()))
	}
	seen := map[int64]bool{}
	var out []occurrence
	for _, s := range starts {
		o := e.instance(s, zone)
		key := o.Start.Unix()
		if seen[key] || overridden[key] || exInstants[s.Unix()] || exDates[s.Format(time.DateOnly)] {
			continue
		}
		seen[key] = true
		if overlaps(o, after, before) {
			out = append(out, o)
		}
	}
	if len(out) > limit {
		return out, rrule.ErrTooMany
	}
	return out, nil
}

// overlaps applies the spec's half-open rule: end > start && start < end.
func overlaps(o occurrence, after, before time.Time) bool {
	return o.End.After(after) && o.Start.Before(before)
}

func (e *eventRow) days() int64 {
	s, err1 := time.Parse(time.DateOnly, e.StartDate)
	en, err2 := time.Parse(time.DateOnly, e.EndDate)
	if err1 != nil || err2 != nil || !en.After(s) {
		return 1
	}
	return int64(en.Sub(s).Hours()+12) / 24
}

// single is the row itself as one occurrence.
func (e *eventRow) single(zone *time.Location) occurrence {
	o := occurrence{row: e, Start: time.Unix(e.StartAt, 0).In(zone), End: time.Unix(e.EndAt, 0).In(zone)}
	if e.AllDay {
		o.StartDate, o.EndDate = e.StartDate, e.EndDate
	}
	return o
}

// instance is the occurrence of a series starting at s (a civil date at
// midnight UTC for all-day series).
func (e *eventRow) instance(s time.Time, zone *time.Location) occurrence {
	o := occurrence{row: e, expanded: true}
	if e.AllDay {
		end := s.AddDate(0, 0, int(e.days()))
		o.StartDate, o.EndDate = s.Format(time.DateOnly), end.Format(time.DateOnly)
		o.Start, o.End = dateInZone(s, zone), dateInZone(end, zone)
		return o
	}
	o.Start = s.In(zone)
	o.End = s.Add(time.Duration(e.EndAt-e.StartAt) * time.Second).In(zone)
	return o
}

func civilOf(t time.Time, zone *time.Location) time.Time {
	y, m, d := t.In(zone).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// parseDateList splits a stored EXDATE/RDATE list into instants (unix
// seconds) and civil dates.
func parseDateList(s string) (map[int64]bool, map[string]bool) {
	var list []string
	_ = json.Unmarshal([]byte(s), &list)
	inst, dates := map[int64]bool{}, map[string]bool{}
	for _, v := range list {
		if len(v) == len(time.DateOnly) {
			dates[v] = true
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			inst[t.Unix()] = true
		}
	}
	return inst, dates
}

// overridesByParent returns, for each master ref, the original starts its
// detached occurrences replace.
func (x *Index) overridesByParent(ctx context.Context, parents []string) (map[string]map[int64]bool, error) {
	out := map[string]map[int64]bool{}
	if len(parents) == 0 {
		return out, nil
	}
	args := make([]any, len(parents))
	for i, p := range parents {
		args[i] = p
	}
	rows, err := x.db.QueryContext(ctx, `SELECT parent_ref, recurrence_id FROM events WHERE recurrence_id IS NOT NULL AND parent_ref IN (?`+
		strings.Repeat(",?", len(parents)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read detached occurrences: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		var rid int64
		if err := rows.Scan(&p, &rid); err != nil {
			return nil, err
		}
		if out[p] == nil {
			out[p] = map[int64]bool{}
		}
		out[p][rid] = true
	}
	return out, rows.Err()
}
