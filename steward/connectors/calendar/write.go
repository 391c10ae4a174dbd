package calendar

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
)

// Scopes of a change to a recurring event (spec: "Calendar Write Transport
// And Identity"). A change to a recurring event names one occurrence by its
// occurrenceStart and says whether it applies to that occurrence alone or to
// it and every later one.
const (
	ScopeThisEvent    = "thisEvent"
	ScopeFutureEvents = "futureEvents"
)

// Error codes the spec names. They travel in the error text as its first
// word, so the model and the user see them, and CodeOf finds them again.
const (
	// CodeEventKitUnavailable: the operation needs the native EventKit
	// bridge (a recurring or future-scope change, a calendar that only an id
	// can select) and none is configured.
	CodeEventKitUnavailable = "CALENDAR_EVENTKIT_UNAVAILABLE"
	// CodeRRuleUnsupported: the recurrence lies outside the rule subset the
	// backend can represent (and Steward can confirm).
	CodeRRuleUnsupported = "CALENDAR_RRULE_UNSUPPORTED"
	// CodeFullAccessRequired: the bridge reports that Calendar authorisation
	// is not Full Access; nothing was changed.
	CodeFullAccessRequired = "CALENDAR_FULL_ACCESS_REQUIRED"
)

// CodedError is a refusal with one of the spec's codes. It always means that
// nothing was written.
type CodedError struct {
	Code string
	Msg  string
}

func (e *CodedError) Error() string { return e.Code + ": " + e.Msg }

// CodeOf returns the code of a *CodedError in err's chain, or "".
func CodeOf(err error) string {
	var c *CodedError
	if errors.As(err, &c) {
		return c.Code
	}
	return ""
}

// CreateEventParams are the arguments of create_event.
type CreateEventParams struct {
	CalendarID string `json:"calendarId,omitempty" jsonschema:"the calendar's stable id from list_calendars (preferred; source/id when two sources share an id)"`
	Calendar   string `json:"calendar,omitempty" jsonschema:"the calendar's title; accepted only when exactly one calendar has it"`
	Title      string `json:"title" jsonschema:"the event's title"`
	Start      string `json:"start" jsonschema:"start: RFC 3339 with offset (2026-05-04T09:00:00+02:00), or YYYY-MM-DD for an all-day event"`
	End        string `json:"end" jsonschema:"end (exclusive): RFC 3339, or YYYY-MM-DD (the day after the last day) for an all-day event"`
	AllDay     bool   `json:"allDay,omitempty" jsonschema:"an all-day event: start and end are dates"`
	TimeZone   string `json:"timeZone,omitempty" jsonschema:"IANA zone whose wall clock the event keeps, e.g. Europe/Rome (default: the calendar's display zone)"`
	Location   string `json:"location,omitempty"`
	Notes      string `json:"notes,omitempty"`
	URL        string `json:"url,omitempty"`
	Alarms     []int  `json:"alarms,omitempty" jsonschema:"reminders, in minutes before the start (0 = at the start)"`
	Recurrence string `json:"recurrence,omitempty" jsonschema:"an RRULE such as FREQ=WEEKLY;BYDAY=MO;COUNT=10 (DAILY/WEEKLY/MONTHLY/YEARLY, INTERVAL, COUNT or UNTIL, BYDAY, BYMONTHDAY, BYMONTH, BYWEEKNO, BYYEARDAY, BYSETPOS)"`
}

// UpdateEventParams are the arguments of update_event. Absent fields stay as
// they are; an empty text clears it.
type UpdateEventParams struct {
	UID             string  `json:"uid" jsonschema:"the event's UID, an earlier UID (alias) or its ref"`
	OccurrenceStart string  `json:"occurrenceStart,omitempty" jsonschema:"required for a recurring event: the occurrence to change (RFC 3339, as search_events returns it)"`
	Scope           string  `json:"scope,omitempty" jsonschema:"thisEvent (default) or futureEvents: this occurrence and every later one"`
	Title           *string `json:"title,omitempty"`
	Start           *string `json:"start,omitempty" jsonschema:"new start: RFC 3339, or YYYY-MM-DD for an all-day event"`
	End             *string `json:"end,omitempty" jsonschema:"new end (exclusive): RFC 3339, or YYYY-MM-DD for an all-day event"`
	AllDay          *bool   `json:"allDay,omitempty" jsonschema:"make the event all-day (true) or timed (false); give start and end with it"`
	TimeZone        *string `json:"timeZone,omitempty" jsonschema:"IANA zone whose wall clock the event keeps"`
	Location        *string `json:"location,omitempty"`
	Notes           *string `json:"notes,omitempty"`
	URL             *string `json:"url,omitempty"`
	Alarms          *[]int  `json:"alarms,omitempty" jsonschema:"replaces the reminders: minutes before the start; [] removes them"`
	Recurrence      *string `json:"recurrence,omitempty" jsonschema:"replaces the RRULE of the series (scope futureEvents, or a non-recurring event); empty stops repeating"`
}

// DeleteEventParams are the arguments of delete_event.
type DeleteEventParams struct {
	UID             string `json:"uid" jsonschema:"the event's UID, an earlier UID (alias) or its ref"`
	OccurrenceStart string `json:"occurrenceStart,omitempty" jsonschema:"required for a recurring event: the occurrence to delete (RFC 3339)"`
	Scope           string `json:"scope,omitempty" jsonschema:"thisEvent (default) or futureEvents: this occurrence and every later one"`
}

// Change is a normalised set of new values: what a backend writes and what
// confirmation expects to observe. Nil fields are left as they are.
type Change struct {
	Title    *string `json:"title,omitempty"`
	Location *string `json:"location,omitempty"`
	Notes    *string `json:"notes,omitempty"`
	URL      *string `json:"url,omitempty"`
	AllDay   *bool   `json:"allDay,omitempty"`
	// Start and End are instants of a timed event.
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// StartDate and EndDate (exclusive) are the civil dates of an all-day event.
	StartDate *string `json:"startDate,omitempty"`
	EndDate   *string `json:"endDate,omitempty"`
	// TimeZone is the IANA zone a timed event keeps ("UTC" for none).
	TimeZone *string `json:"timeZone,omitempty"`
	// Alarms are offsets in minutes before the start, sorted.
	Alarms *[]int `json:"alarms,omitempty"`
	// RRule is the canonical rule; "" removes the recurrence.
	RRule *string `json:"rrule,omitempty"`
}

// timesChanged reports whether the change moves the event in time.
func (c *Change) timesChanged() bool {
	return c.Start != nil || c.End != nil || c.StartDate != nil || c.EndDate != nil || c.AllDay != nil
}

// span is an event's time extent in the two forms: instants for a timed
// event, civil dates for an all-day one.
type span struct {
	AllDay             bool
	Start, End         time.Time
	StartDate, EndDate string
	TZID               string // "" for UTC or floating
}

// apply returns s moved by c, checking the result: the end after the start.
// A one-sided edit keeps the other, live boundary, so "end: 08:00" on an
// event that starts at 09:00 is refused before anything is journaled.
func (s span) apply(c *Change) (span, error) {
	out := s
	if c.AllDay != nil {
		out.AllDay = *c.AllDay
	}
	if c.TimeZone != nil {
		out.TZID = *c.TimeZone
		if out.TZID == "UTC" {
			out.TZID = ""
		}
	}
	if out.AllDay {
		if c.StartDate != nil {
			out.StartDate = *c.StartDate
		}
		if c.EndDate != nil {
			out.EndDate = *c.EndDate
		}
		if !s.AllDay && (c.StartDate == nil || c.EndDate == nil) {
			return out, errors.New("making an event all-day needs both start and end as dates (YYYY-MM-DD)")
		}
		if out.EndDate <= out.StartDate {
			return out, fmt.Errorf("the event would end (%s) on or before its start (%s); an all-day end is the day after the last day",
				out.EndDate, out.StartDate)
		}
		return out, nil
	}
	if c.Start != nil {
		out.Start = *c.Start
	}
	if c.End != nil {
		out.End = *c.End
	}
	if s.AllDay && (c.Start == nil || c.End == nil) {
		return out, errors.New("making an all-day event timed needs both start and end as RFC 3339 times")
	}
	if !out.End.After(out.Start) {
		return out, fmt.Errorf("the event would end (%s) before or at its start (%s)", out.End.Format(time.RFC3339), out.Start.Format(time.RFC3339))
	}
	return out, nil
}

// parseInstant reads an RFC 3339 time with an offset.
func parseInstant(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return t, fmt.Errorf("%s %q is not an RFC 3339 time with an offset, such as 2026-05-04T09:00:00+02:00", name, v)
	}
	return t, nil
}

// parseDate reads a YYYY-MM-DD civil date.
func parseDate(name, v string) (string, error) {
	v = strings.TrimSpace(v)
	if _, err := time.Parse(time.DateOnly, v); err != nil {
		return "", fmt.Errorf("%s %q is not a date such as 2026-05-04 (all-day events take dates)", name, v)
	}
	return v, nil
}

// parseZone checks an IANA (or Windows) zone name.
func parseZone(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.EqualFold(v, "UTC") || v == "Z" {
		return "UTC", nil
	}
	loc, err := resolveTZID(v)
	if err != nil {
		return "", fmt.Errorf("timeZone %q is not a known IANA zone such as Europe/Rome", v)
	}
	return loc.String(), nil
}

// normalizeRule checks a recurrence rule against the supported subset and
// returns its canonical form. Rules outside it are refused with
// CALENDAR_RRULE_UNSUPPORTED: the backend could not represent them and
// confirmation could not compare them.
func normalizeRule(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	r, err := rrule.Parse(v)
	if err != nil {
		return "", &CodedError{Code: CodeRRuleUnsupported, Msg: fmt.Sprintf("recurrence %q: %v; nothing was written", v, strings.TrimPrefix(err.Error(), "rrule: "))}
	}
	if !r.Representable() {
		return "", &CodedError{Code: CodeRRuleUnsupported, Msg: fmt.Sprintf("recurrence %q cannot be represented (%s); nothing was written",
			v, strings.Join(r.Unrepresentable, "; "))}
	}
	if err := r.Expandable(); err != nil {
		return "", &CodedError{Code: CodeRRuleUnsupported, Msg: fmt.Sprintf("recurrence %q: %v; nothing was written", v, err)}
	}
	return r.Canonical(), nil
}

// normalizeAlarms sorts and checks reminder offsets (at most four weeks
// before the start).
func normalizeAlarms(a []int) ([]int, error) {
	out := slices.Clone(a)
	if out == nil {
		out = []int{}
	}
	for _, m := range out {
		if m < 0 || m > 40320 {
			return nil, fmt.Errorf("alarm %d: reminders are minutes before the start, from 0 to 40320", m)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// normalizeScope defaults the scope to thisEvent.
func normalizeScope(v string) (string, error) {
	switch strings.TrimSpace(v) {
	case "", ScopeThisEvent:
		return ScopeThisEvent, nil
	case ScopeFutureEvents:
		return ScopeFutureEvents, nil
	}
	return "", fmt.Errorf("scope %q must be thisEvent or futureEvents", v)
}

// textPtr trims an optional text.
func textPtr(p *string) *string {
	if p == nil {
		return nil
	}
	v := strings.TrimSpace(*p)
	return &v
}

func ptr[T any](v T) *T { return &v }

// zoneName is the IANA name of loc, which new events keep as their TZID.
// For the system zone (time.Local, named "Local") it comes from TZ or the
// /etc/localtime link; without either, "UTC".
func zoneName(loc *time.Location) string {
	if loc != time.Local && loc.String() != "Local" {
		return loc.String()
	}
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" {
		if l, err := time.LoadLocation(tz); err == nil && l.String() != "Local" {
			return l.String()
		}
	}
	if p, err := filepath.EvalSymlinks("/etc/localtime"); err == nil {
		if i := strings.Index(p, "zoneinfo/"); i >= 0 {
			if _, err := time.LoadLocation(p[i+len("zoneinfo/"):]); err == nil {
				return p[i+len("zoneinfo/"):]
			}
		}
	}
	return "UTC"
}
