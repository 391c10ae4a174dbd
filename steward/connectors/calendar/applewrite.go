package calendar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/ekbridge"
	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// AppleOptions configure writes to Apple Calendar on macOS.
type AppleOptions struct {
	// Bridge is the launcher's EventKit bridge; nil when the process was not
	// started by the launcher (no STEWARD_CALENDAR_BRIDGE_DIR). A configured
	// bridge is always used, even when it does not answer: an unresponsive
	// bridge is an error, never a reason to repeat the write another way.
	Bridge *ekbridge.Client
	// Script runs the AppleScript compatibility path (Calendar.app); nil
	// disables it.
	Script osascript.Runner
	// Local is the Mac's zone, in which AppleScript dates are written
	// (default time.Local).
	Local *time.Location
}

// NewAppleWriter returns the AppleWriter for o.
func NewAppleWriter(o AppleOptions) AppleWriter {
	if o.Local == nil {
		o.Local = time.Local
	}
	return &appleWriter{o: o}
}

type appleWriter struct{ o AppleOptions }

// Select picks EventKit when the bridge is configured, else the AppleScript
// path within its limits (spec table "Calendar Write Transport And
// Identity"): a create needs a calendar title no other Apple calendar has
// (AppleScript selects calendars by name); updates only of nonrecurring
// events; deletes of nonrecurring events only. Outside them the write is
// refused with CALENDAR_EVENTKIT_UNAVAILABLE before anything is journaled.
func (a *appleWriter) Select(p *Plan, all []Target) error {
	if a.o.Bridge != nil {
		p.Backend = BackendEventKit
		return nil
	}
	unavailable := func(why string) error {
		return &CodedError{Code: CodeEventKitUnavailable, Msg: why + " needs the EventKit bridge, which is not configured (start Steward from its macOS launcher); nothing was written"}
	}
	switch {
	case p.Op == OpCreate:
		n := 0
		for _, t := range all {
			if t.Kind == KindApple && strings.EqualFold(t.Title, p.Target.Title) {
				n++
			}
		}
		if n != 1 {
			return unavailable(fmt.Sprintf("creating in calendar %q, a title %d Apple calendars share,", p.Target.Title, n))
		}
	case p.Recurring && p.Op == OpUpdate:
		return unavailable("changing a recurring event")
	case p.Op == OpUpdate && p.Change.TimeZone != nil:
		return unavailable("changing an event's time zone (Calendar.app's AppleScript has no time zone)")
	case p.Recurring && p.Op == OpDelete && p.Scope == ScopeFutureEvents:
		return unavailable("deleting this and future occurrences (scope futureEvents)")
	case p.Recurring && p.Op == OpDelete:
		return unavailable("deleting one occurrence of a recurring event")
	}
	if a.o.Script == nil {
		return errors.New("Calendar.app cannot be scripted in this process (macOS only); nothing was written")
	}
	p.Backend = BackendAppleScript
	return nil
}

// Apply runs p on the backend Select recorded.
func (a *appleWriter) Apply(ctx context.Context, p *Plan) (*Outcome, error) {
	switch p.Backend {
	case BackendEventKit:
		if a.o.Bridge == nil {
			return nil, notDone("the plan was journaled for EventKit, which this process has no bridge to; nothing was written")
		}
		return a.eventKit(ctx, p)
	case BackendAppleScript:
		if a.o.Script == nil {
			return nil, notDone("the plan was journaled for AppleScript, which this process cannot run; nothing was written")
		}
		return a.appleScript(ctx, p)
	}
	return nil, notDone("unknown Apple Calendar backend %q", p.Backend)
}

// EventKitPayload is the payload of an EventKit bridge request.
type EventKitPayload struct {
	CalendarID      string    `json:"calendarId"`
	UID             string    `json:"uid,omitempty"`
	Aliases         []string  `json:"aliases,omitempty"`
	OccurrenceStart string    `json:"occurrenceStart,omitempty"`
	Scope           string    `json:"scope,omitempty"`
	Fields          *EKFields `json:"fields,omitempty"`
}

// EKFields are the values to set; absent ones stay as they are. Times are
// RFC 3339 instants; all-day dates are YYYY-MM-DD (end exclusive); alarms
// are minutes before the start. The bridge re-checks the effective
// boundaries (end after start) against the live event before saving.
type EKFields struct {
	Title     *string `json:"title,omitempty"`
	Location  *string `json:"location,omitempty"`
	Notes     *string `json:"notes,omitempty"`
	URL       *string `json:"url,omitempty"`
	AllDay    *bool   `json:"allDay,omitempty"`
	Start     *string `json:"start,omitempty"`
	End       *string `json:"end,omitempty"`
	StartDate *string `json:"startDate,omitempty"`
	EndDate   *string `json:"endDate,omitempty"`
	TimeZone  *string `json:"timeZone,omitempty"`
	Alarms    *[]int  `json:"alarms,omitempty"`
	RRule     *string `json:"rrule,omitempty"`
}

// eventKitPayload translates a plan for the bridge.
func eventKitPayload(p *Plan) EventKitPayload {
	out := EventKitPayload{CalendarID: p.Target.CalendarID, Scope: p.Scope, Aliases: p.Aliases}
	if p.Op != OpCreate {
		out.UID = p.UID
	}
	if p.OccurrenceStart != nil {
		out.OccurrenceStart = p.OccurrenceStart.UTC().Format(time.RFC3339)
	}
	if p.Op == OpDelete {
		return out
	}
	c := p.Change
	f := &EKFields{Title: c.Title, Location: c.Location, Notes: c.Notes, URL: c.URL, AllDay: c.AllDay, StartDate: c.StartDate,
		EndDate: c.EndDate, TimeZone: c.TimeZone, Alarms: c.Alarms, RRule: c.RRule}
	if c.Start != nil {
		f.Start = ptr(c.Start.Format(time.RFC3339))
	}
	if c.End != nil {
		f.End = ptr(c.End.Format(time.RFC3339))
	}
	out.Fields = f
	return out
}

func (a *appleWriter) eventKit(ctx context.Context, p *Plan) (*Outcome, error) {
	resp, err := a.o.Bridge.Do(ctx, p.Op, eventKitPayload(p))
	out := &Outcome{Backend: BackendEventKit, UID: p.UID, CompletedAt: time.Now()}
	switch {
	case errors.Is(err, ekbridge.ErrNotExecuted):
		return out, writeops.NotDone(err)
	case err != nil:
		return out, err
	case resp.OutcomeUnknown:
		return out, errors.New("the Steward launcher restarted while performing the change; whether it was made is unknown")
	case !resp.OK && resp.Error != nil && resp.Error.NotExecuted:
		return out, writeops.NotDone(&CodedError{Code: resp.Error.Code, Msg: resp.Error.Message})
	case !resp.OK:
		msg := "the EventKit bridge reported a failure without details"
		if resp.Error != nil {
			msg = resp.Error.Error()
		}
		return out, errors.New(msg)
	}
	var r struct {
		UID    string `json:"uid"`
		NewUID string `json:"newUid"`
	}
	json.Unmarshal(resp.Result, &r)
	if r.UID != "" {
		out.UID = r.UID
	}
	out.NewUID = r.NewUID
	return out, nil
}

// scriptRefused is the AppleScript error number the compatibility scripts
// raise for a check that fails before anything is changed.
const scriptRefused = 7001

// appleScriptFor builds the Calendar.app script for a plan. Every value is
// quoted by osascript.Quote; dates are built field by field in loc.
func appleScriptFor(p *Plan, loc *time.Location) (string, error) {
	var b strings.Builder
	refuse := func(cond, msg string) {
		fmt.Fprintf(&b, "if %s then error %s number %d\n", cond, osascript.Quote(msg), scriptRefused)
	}
	b.WriteString("tell application \"Calendar\"\n")
	cal := osascript.Quote(p.Target.Title)
	refuse("(count of (calendars whose name is "+cal+")) is not 1", "calendar "+p.Target.Title+" is missing or its title is not unique; nothing was changed")
	b.WriteString("set theCal to first calendar whose name is " + cal + "\n")
	if p.Op != OpCreate {
		uid := osascript.Quote(p.UID)
		refuse("(count of (events of theCal whose uid is "+uid+")) is not 1", "event "+p.UID+" is not in calendar "+p.Target.Title+"; nothing was changed")
		b.WriteString("set theEvent to first event of theCal whose uid is " + uid + "\n")
	}
	if p.Op == OpDelete {
		b.WriteString("delete theEvent\nreturn \"\"\nend tell\n")
		return b.String(), nil
	}
	c := p.Change
	dates := func(s span) {
		if s.AllDay {
			sd, _ := time.ParseInLocation(time.DateOnly, s.StartDate, loc)
			ed, _ := time.ParseInLocation(time.DateOnly, s.EndDate, loc)
			b.WriteString(osascript.SetDate("sd", sd, loc))
			b.WriteString(osascript.SetDate("ed", ed, loc))
			return
		}
		b.WriteString(osascript.SetDate("sd", s.Start, loc))
		b.WriteString(osascript.SetDate("ed", s.End, loc))
	}
	if p.Op == OpCreate {
		s := *p.After
		dates(s)
		props := []string{"summary:" + osascript.Quote(deref(c.Title)), "start date:sd", "end date:ed", fmt.Sprintf("allday event:%t", s.AllDay)}
		for _, f := range []struct {
			name string
			v    *string
		}{{"location", c.Location}, {"description", c.Notes}, {"url", c.URL}} {
			if deref(f.v) != "" {
				props = append(props, f.name+":"+osascript.Quote(*f.v))
			}
		}
		if deref(c.RRule) != "" {
			props = append(props, "recurrence:"+osascript.Quote("RRULE:"+*c.RRule))
		}
		b.WriteString("set theEvent to make new event at end of events of theCal with properties {" + strings.Join(props, ", ") + "}\n")
	} else {
		startSet, endSet := c.Start != nil || c.StartDate != nil, c.End != nil || c.EndDate != nil
		switch {
		case startSet && endSet:
			dates(*p.After)
			refuse("ed ≤ sd", "the event would end before it starts; nothing was changed")
			b.WriteString("set allday event of theEvent to " + fmt.Sprint(p.After.AllDay) + "\n")
			// Order the two assignments so that Calendar never sees an end
			// before the start in between.
			b.WriteString("if sd ≥ (end date of theEvent) then\nset end date of theEvent to ed\nset start date of theEvent to sd\n" +
				"else\nset start date of theEvent to sd\nset end date of theEvent to ed\nend if\n")
		case startSet:
			// A one-sided change is checked against the live, unchanged end.
			dates(*p.After)
			refuse("(end date of theEvent) ≤ sd", "the event would end before it starts; nothing was changed")
			b.WriteString("set start date of theEvent to sd\n")
		case endSet:
			dates(*p.After)
			refuse("ed ≤ (start date of theEvent)", "the event would end before it starts; nothing was changed")
			b.WriteString("set end date of theEvent to ed\n")
		}
		for _, f := range []struct {
			name string
			v    *string
		}{{"summary", c.Title}, {"location", c.Location}, {"description", c.Notes}, {"url", c.URL}} {
			if f.v != nil {
				b.WriteString("set " + f.name + " of theEvent to " + osascript.Quote(*f.v) + "\n")
			}
		}
		if c.RRule != nil {
			rule := ""
			if *c.RRule != "" {
				rule = "RRULE:" + *c.RRule
			}
			b.WriteString("set recurrence of theEvent to " + osascript.Quote(rule) + "\n")
		}
	}
	if c.Alarms != nil {
		b.WriteString("delete every display alarm of theEvent\n")
		for _, m := range *c.Alarms {
			fmt.Fprintf(&b, "make new display alarm at end of display alarms of theEvent with properties {trigger interval:%d}\n", -m)
		}
	}
	b.WriteString("return uid of theEvent\nend tell\n")
	return b.String(), nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (a *appleWriter) appleScript(ctx context.Context, p *Plan) (*Outcome, error) {
	script, err := appleScriptFor(p, a.o.Local)
	if err != nil {
		return nil, writeops.NotDone(err)
	}
	res, err := a.o.Script.Run(ctx, script)
	out := &Outcome{Backend: BackendAppleScript, UID: p.UID, CompletedAt: time.Now()}
	var se *osascript.Error
	switch {
	case errors.As(err, &se) && se.Number == scriptRefused:
		return out, writeops.NotDone(se)
	case err != nil:
		return out, fmt.Errorf("Calendar.app: %w", err)
	}
	if p.Op == OpCreate {
		// Calendar.app assigns the UID; without one, confirmation looks for
		// exactly one matching candidate.
		out.UID = strings.TrimSpace(res)
	}
	return out, nil
}
