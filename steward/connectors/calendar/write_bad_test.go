package calendar

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

// A rejected proposal writes nothing: no file changes and no journal row.
func TestBadWritesWriteNothing(t *testing.T) {
	e := newWriteEnv(t)
	ctx := context.Background()
	// A third calendar titled like the first makes that title ambiguous.
	if err := os.MkdirAll(filepath.Join(e.root, "personal-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.root, "personal-2", "displayname"), []byte("Personal"), 0o644)
	series, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "work", Title: "Yoga", Start: "2026-05-05T18:00:00+02:00",
		End: "2026-05-05T19:00:00+02:00", Recurrence: "FREQ=WEEKLY;BYDAY=TU;COUNT=4"})
	if err != nil {
		t.Fatal(err)
	}
	single, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "work", Title: "Lunch", Start: "2026-05-07T12:00:00+02:00",
		End: "2026-05-07T13:00:00+02:00"})
	if err != nil {
		t.Fatal(err)
	}
	e.sync()
	ok := CreateEventParams{CalendarID: "work", Title: "Dinner", Start: "2026-05-08T20:00:00+02:00", End: "2026-05-08T22:00:00+02:00"}
	with := func(f func(*CreateEventParams)) CreateEventParams { p := ok; f(&p); return p }
	create := func(f func(*CreateEventParams)) func() error {
		return func() error { _, err := e.w.CreateEvent(ctx, with(f)); return err }
	}
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"end before start", create(func(p *CreateEventParams) { p.End = "2026-05-08T19:00:00+02:00" }),
			"ends (2026-05-08T19:00:00+02:00) before or when it starts"},
		{"all-day end on start", create(func(p *CreateEventParams) { p.AllDay, p.Start, p.End = true, "2026-05-08", "2026-05-08" }),
			"before or when it starts"},
		{"unknown calendar", create(func(p *CreateEventParams) { p.CalendarID, p.Calendar = "", "Holidays" }), `unknown calendar "Holidays"`},
		{"unknown calendar id", create(func(p *CreateEventParams) { p.CalendarID = "nope" }), `unknown calendar id "nope"`},
		{"ambiguous calendar title", create(func(p *CreateEventParams) { p.CalendarID, p.Calendar = "", "personal" }),
			`ambiguous calendar title "personal": 2 calendars have it`},
		{"unsupported frequency", create(func(p *CreateEventParams) { p.Recurrence = "FREQ=HOURLY;COUNT=3" }), CodeRRuleUnsupported},
		{"unsupported component", create(func(p *CreateEventParams) { p.Recurrence = "FREQ=DAILY;BYHOUR=9,18" }),
			CodeRRuleUnsupported + `: recurrence "FREQ=DAILY;BYHOUR=9,18" cannot be represented (BYHOUR is not supported)`},
		{"malformed rule", create(func(p *CreateEventParams) { p.Recurrence = "FREQ=WEEKLY;COUNT=2;UNTIL=20260601" }), CodeRRuleUnsupported},
		{"unknown zone", create(func(p *CreateEventParams) { p.TimeZone = "Mars/Olympus" }), `timeZone "Mars/Olympus"`},
		{"time without offset", create(func(p *CreateEventParams) { p.Start = "2026-05-08 20:00" }), "not an RFC 3339 time"},
		{"no title", create(func(p *CreateEventParams) { p.Title = " " }), "title is required"},
		{"alarm after the start", create(func(p *CreateEventParams) { p.Alarms = []int{-5} }), "minutes before the start"},
		{"one-sided end before the live start", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: single.UID, End: ptr("2026-05-07T11:00:00+02:00")})
			return err
		}, "would end (2026-05-07T11:00:00+02:00) before or at its start (2026-05-07T12:00:00+02:00)"},
		{"one-sided start after the live end", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: single.UID, Start: ptr("2026-05-07T14:00:00+02:00")})
			return err
		}, "would end (2026-05-07T13:00:00+02:00) before or at its start"},
		{"recurring without occurrence", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: series.UID, Title: ptr("x")})
			return err
		}, "repeats: pass occurrenceStart"},
		{"occurrence that does not exist", func() error {
			_, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: series.UID, OccurrenceStart: "2026-05-06T18:00:00+02:00"})
			return err
		}, "has no occurrence starting at 2026-05-06T18:00:00+02:00"},
		{"rule change on one occurrence", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: series.UID, OccurrenceStart: "2026-05-12T18:00:00+02:00", Recurrence: ptr("FREQ=DAILY")})
			return err
		}, "scope futureEvents"},
		{"bad scope", func() error {
			_, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: series.UID, OccurrenceStart: "2026-05-12T18:00:00+02:00", Scope: "all"})
			return err
		}, `scope "all" must be thisEvent or futureEvents`},
		{"occurrence on a single event", func() error {
			_, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: single.UID, OccurrenceStart: "2026-05-07T12:00:00+02:00"})
			return err
		}, "does not repeat"},
		{"unknown event", func() error {
			_, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: "no-such-uid"})
			return err
		}, `no event with uid, alias or ref "no-such-uid"`},
		{"nothing to change", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: single.UID})
			return err
		}, "nothing to change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.files()
			ops, _ := e.journal.List(ctx, writeops.Filter{})
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if after := e.files(); !slices.Equal(before, after) {
				t.Errorf("a rejected write changed the calendar files")
			}
			if now, _ := e.journal.List(ctx, writeops.Filter{}); len(now) != len(ops) {
				t.Errorf("a rejected write was journaled: %d rows, had %d", len(now), len(ops))
			}
		})
	}
	// The stable id still selects one of the two calendars titled Personal.
	if _, err := e.w.CreateEvent(ctx, with(func(p *CreateEventParams) { p.CalendarID = "personal-2" })); err != nil {
		t.Errorf("calendarId with a duplicate title: %v", err)
	}
}

// The preflight shows the proposal resolved: the calendar's id and title,
// times in the event's zone, the rule canonical.
func TestPreflightNormalises(t *testing.T) {
	e := newWriteEnv(t)
	got, err := e.w.PreflightCreate(context.Background(), CreateEventParams{Calendar: "work", Title: " Review ",
		Start: "2026-05-04T07:00:00Z", End: "2026-05-04T08:00:00Z", Recurrence: "byday=mo,we;freq=weekly", Alarms: []int{30, 5, 30}})
	if err != nil {
		t.Fatal(err)
	}
	want := CreateEventParams{CalendarID: "local/work", Calendar: "Work", Title: "Review", Start: "2026-05-04T09:00:00+02:00",
		End: "2026-05-04T10:00:00+02:00", TimeZone: "Europe/Rome", Recurrence: "FREQ=WEEKLY;BYDAY=MO,WE", Alarms: []int{5, 30}}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Errorf("preflight = %s\nwant %s", mustJSON(t, got), mustJSON(t, want))
	}
	if files := e.files(); len(files) != 2 {
		t.Errorf("a preflight wrote files: %d", len(files))
	}
}

// Without a configured zone, new events keep the system zone's IANA name.
func TestZoneName(t *testing.T) {
	t.Setenv("TZ", "America/New_York")
	if got := zoneName(time.Local); got != "America/New_York" {
		t.Errorf("zoneName(Local) with TZ = %q", got)
	}
	if got := zoneName(rome); got != "Europe/Rome" {
		t.Errorf("zoneName(rome) = %q", got)
	}
}

// A one-sided change approved against the live times is not applied if
// another program moved the event in between.
func TestOneSidedChangeAfterAMoveWritesNothing(t *testing.T) {
	e := newWriteEnv(t)
	ctx := context.Background()
	res, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "work", Title: "Lunch", Start: "2026-05-07T12:00:00+02:00", End: "2026-05-07T13:00:00+02:00"})
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := e.w.planUpdate(ctx, UpdateEventParams{UID: res.UID, End: ptr("2026-05-07T12:30:00+02:00")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.root, "work", res.UID+".ics")
	b, _ := os.ReadFile(path)
	moved := strings.Replace(string(b), "DTSTART;TZID=Europe/Rome:20260507T120000", "DTSTART;TZID=Europe/Rome:20260507T124500", 1)
	os.WriteFile(path, []byte(moved), 0o644)
	e.w.selectBackend(ctx, plan)
	_, err = e.w.vdir.Apply(ctx, plan)
	if err == nil || !strings.Contains(err.Error(), "moved by another program") {
		t.Fatalf("err = %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != moved {
		t.Error("the file was changed")
	}
}
