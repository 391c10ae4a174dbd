package rrule

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	ref "github.com/teambition/rrule-go"
)

func TestParseSubsetAndCanonical(t *testing.T) {
	tests := []struct {
		in, canonical string
	}{
		{"FREQ=DAILY;COUNT=10", "FREQ=DAILY;COUNT=10"},
		{"RRULE:freq=weekly;byday=WE,MO;interval=1", "FREQ=WEEKLY;BYDAY=MO,WE"},
		{"FREQ=WEEKLY;INTERVAL=2;BYDAY=FR,MO,FR", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR"},
		{"FREQ=MONTHLY;BYDAY=+1MO,-1FR,2TU", "FREQ=MONTHLY;BYDAY=-1FR,1MO,2TU"},
		{"FREQ=MONTHLY;BYMONTHDAY=15,-1,1;BYSETPOS=1", "FREQ=MONTHLY;BYMONTHDAY=-1,1,15;BYSETPOS=1"},
		{"FREQ=YEARLY;BYMONTH=11,3;BYWEEKNO=10;BYYEARDAY=-1,100;UNTIL=20301231", "FREQ=YEARLY;UNTIL=20301231;BYMONTH=3,11;BYWEEKNO=10;BYYEARDAY=-1,100"},
		{"FREQ=DAILY;UNTIL=20201010T145800Z;", "FREQ=DAILY;UNTIL=20201010T145800Z"},
	}
	for _, tt := range tests {
		r, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if !r.Representable() {
			t.Errorf("Parse(%q) unrepresentable: %v", tt.in, r.Unrepresentable)
		}
		if got := r.Canonical(); got != tt.canonical {
			t.Errorf("Canonical(%q) = %q, want %q", tt.in, got, tt.canonical)
		}
		again, err := Parse(r.Canonical())
		if err != nil || !Equal(r, again) {
			t.Errorf("canonical form %q does not parse back to an equal rule: %v", r.Canonical(), err)
		}
	}
}

func TestParseMarksUnrepresentableInsteadOfDropping(t *testing.T) {
	tests := []struct {
		in         string
		reason     string
		expandable bool
	}{
		{"FREQ=WEEKLY;BYDAY=MO;BYDAY=TU", "duplicate BYDAY", false},
		{"FREQ=DAILY;INTERVAL=2;INTERVAL=3", "duplicate INTERVAL", false},
		{"FREQ=DAILY;BYHOUR=9,17", "BYHOUR is not supported", false},
		{"FREQ=HOURLY;INTERVAL=4", "FREQ=HOURLY", false},
		{"FREQ=WEEKLY;WKST=SU;BYDAY=MO", "WKST is outside the bridge subset", true},
		{"FREQ=DAILY;X-NAME=1", "X-NAME is not supported", true},
	}
	for _, tt := range tests {
		r, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if r.Representable() || !slices.Contains(r.Unrepresentable, tt.reason) {
			t.Errorf("Parse(%q).Unrepresentable = %v, want it to contain %q", tt.in, r.Unrepresentable, tt.reason)
		}
		if got := r.Expandable() == nil; got != tt.expandable {
			t.Errorf("Parse(%q).Expandable() = %v, want expandable=%v", tt.in, r.Expandable(), tt.expandable)
		}
	}
	// The unsupported part stays in the canonical form, so two rules that
	// differ only there are not reported equal.
	a, _ := Parse("FREQ=DAILY;BYHOUR=9")
	b, _ := Parse("FREQ=DAILY;BYHOUR=17")
	if Equal(a, b) {
		t.Errorf("rules differing in BYHOUR compare equal: %q", a.Canonical())
	}
}

func TestParseRejectsInvalidRules(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty rule"},
		{"COUNT=3", "FREQ is required"},
		{"FREQ=FORTNIGHTLY", `unknown FREQ "FORTNIGHTLY"`},
		{"FREQ=DAILY;COUNT=0", `COUNT="0" must be a whole number from 1 to`},
		{"FREQ=DAILY;COUNT=x", `COUNT="x" must be a whole number`},
		{"FREQ=YEARLY;BYMONTH=13", `BYMONTH value "13" is out of range`},
		{"FREQ=MONTHLY;BYMONTHDAY=32", `BYMONTHDAY value "32" is out of range`},
		{"FREQ=MONTHLY;BYMONTHDAY=0", `BYMONTHDAY value "0" is out of range`},
		{"FREQ=DAILY;COUNT=3;UNTIL=20200101", "COUNT and UNTIL cannot both be given"},
		{"FREQ=DAILY;BYDAY=1MO", "BYDAY ordinals are not allowed with FREQ=DAILY"},
		{"FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY is not allowed with FREQ=WEEKLY"},
		{"FREQ=MONTHLY;BYWEEKNO=3", "BYWEEKNO is only allowed with FREQ=YEARLY"},
		{"FREQ=MONTHLY;BYYEARDAY=3", "BYYEARDAY is not allowed with FREQ=MONTHLY"},
		{"FREQ=MONTHLY;BYSETPOS=1", "BYSETPOS needs another BY-component"},
		{"FREQ=YEARLY;BYDAY=XX", `BYDAY value "XX" is not a weekday`},
		{"FREQ=YEARLY;BYDAY=60MO", `BYDAY ordinal in "60MO" must be 1..53`},
		{"FREQ=DAILY;UNTIL=2020-01-01", `UNTIL "2020-01-01" is not a DATE or DATE-TIME`},
		{"FREQ=DAILY;NOPE", `"NOPE" is not NAME=VALUE`},
		{"FREQ=DAILY;FOO=1", `unknown component "FOO"`},
		{"FREQ=YEARLY;BYWEEKNO=1;BYDAY=1MO", "BYDAY ordinals are not allowed together with BYWEEKNO"},
		{"FREQ=DAILY;INTERVAL=" + strings.Repeat("9", 5000), "more than 4096"},
	} {
		r, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%.40q) = %q, want an error", tc.in, r.Canonical())
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%.40q): %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestEquivalentFillsImpliedComponents(t *testing.T) {
	monday := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a, _ := Parse("FREQ=WEEKLY")
	b, _ := Parse("FREQ=WEEKLY;BYDAY=MO")
	c, _ := Parse("FREQ=WEEKLY;BYDAY=TU")
	if Equal(a, b) {
		t.Fatal("Equal should compare the written rules, not their implied defaults")
	}
	if !Equivalent(a, b, monday) {
		t.Error("FREQ=WEEKLY from a Monday should be equivalent to BYDAY=MO")
	}
	if Equivalent(a, c, monday) {
		t.Error("FREQ=WEEKLY from a Monday is not equivalent to BYDAY=TU")
	}
	y1, _ := Parse("FREQ=YEARLY")
	y2, _ := Parse("FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=2")
	if !Equivalent(y1, y2, monday) {
		t.Error("FREQ=YEARLY from 2 March should be equivalent to BYMONTH=3;BYMONTHDAY=2")
	}
	// BYWEEKNO alone expands to DTSTART's weekday; BYMONTHDAY alone to DTSTART's month.
	for _, pair := range [][2]string{
		{"FREQ=YEARLY;BYWEEKNO=1,2", "FREQ=YEARLY;BYWEEKNO=1,2;BYDAY=MO"},
		{"FREQ=YEARLY;BYMONTHDAY=29", "FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=29"},
	} {
		p, _ := Parse(pair[0])
		q, _ := Parse(pair[1])
		if !Equivalent(p, q, monday) {
			t.Errorf("%s from Monday 2 March should be equivalent to %s", pair[0], pair[1])
		}
		wednesday := monday.AddDate(0, 1, -1) // 1 April 2026: another weekday and month
		if Equivalent(p, q, wednesday) {
			t.Errorf("%s from %s is not equivalent to %s", pair[0], wednesday.Format("Mon 2 Jan"), pair[1])
		}
	}
}

// TestBetweenMatchesReference compares the expander with rrule-go (a port
// of python-dateutil) on rules whose DTSTART is itself an occurrence.
func TestBetweenMatchesReference(t *testing.T) {
	rules := []struct{ rule, seed string }{
		{"FREQ=DAILY;COUNT=10", "19970902T090000"},
		{"FREQ=DAILY;INTERVAL=3;UNTIL=19971224T000000Z", "19970902T090000"},
		{"FREQ=DAILY;BYMONTH=1", "19980101T090000"},
		{"FREQ=WEEKLY;BYDAY=MO,WE,FR;COUNT=25", "19970901T090000"},
		{"FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=TU,TH", "19970902T090000"},
		{"FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,SU", "19970805T090000"},
		{"FREQ=MONTHLY;BYDAY=-1FR", "19970926T090000"},
		{"FREQ=MONTHLY;BYDAY=1FR;COUNT=10", "19970905T090000"},
		{"FREQ=MONTHLY;INTERVAL=2;BYDAY=1SU,-1SU", "19970907T090000"},
		{"FREQ=MONTHLY;BYMONTHDAY=-3", "19970928T090000"},
		{"FREQ=MONTHLY;BYMONTHDAY=31", "19970131T090000"},
		{"FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2", "19970929T090000"},
		{"FREQ=MONTHLY;BYDAY=TU,WE,TH;BYSETPOS=3;COUNT=3", "19970904T090000"},
		{"FREQ=MONTHLY;INTERVAL=18;BYMONTHDAY=10,11,12,13,14,15;COUNT=10", "19970910T090000"},
		{"FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13", "19980213T090000"},
		{"FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU", "19970330T020000"},
		{"FREQ=YEARLY;BYMONTH=6,7;COUNT=10", "19970610T090000"},
		{"FREQ=YEARLY;BYDAY=20MO", "19970519T090000"},
		{"FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO", "19970512T090000"},
		{"FREQ=YEARLY;BYWEEKNO=1;BYDAY=MO", "19971229T090000"},
		{"FREQ=YEARLY;BYWEEKNO=-1;BYDAY=MO", "19971222T090000"},
		{"FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO", "19981228T090000"},
		{"FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200", "19970101T090000"},
		{"FREQ=YEARLY;BYYEARDAY=-1", "19971231T090000"},
		{"FREQ=YEARLY", "20000229T090000"},
		{"FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8", "19961105T090000"},
		{"FREQ=YEARLY;BYMONTH=1,2;BYDAY=TU,TH;BYSETPOS=1,-1", "19970102T090000"},
	}
	after := time.Date(1996, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range rules {
		t.Run(tt.rule, func(t *testing.T) {
			seed, _ := time.Parse("20060102T150405", tt.seed)
			opt, err := ref.StrToROption(tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			opt.Dtstart = seed
			want := mustRef(t, opt).Between(after, before, false)
			if len(want) == 0 || !want[0].Equal(seed) {
				t.Fatalf("test setup: seed %s is not the reference's first occurrence (%v)", seed, want[:min(1, len(want))])
			}
			r, err := Parse(tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Between(seed, after, before, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("got %d occurrences, reference %d\n got: %v\nwant: %v", len(got), len(want), head(got), head(want))
			}
		})
	}
}

func mustRef(t *testing.T, o *ref.ROption) *ref.RRule {
	t.Helper()
	r, err := ref.NewRRule(*o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func head(v []time.Time) []time.Time { return v[:min(8, len(v))] }

func TestBetweenAcrossDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	rome, _ := time.LoadLocation("Europe/Rome")
	utc := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	tests := []struct {
		name, rule string
		start      time.Time
		after      time.Time
		before     time.Time
		want       []string // RFC 3339 instants in UTC
	}{
		{
			name: "09:00 stays 09:00 across spring forward", rule: "FREQ=DAILY;COUNT=4",
			start: time.Date(2024, 3, 8, 9, 0, 0, 0, ny), after: utc("2024-03-01T00:00:00Z"), before: utc("2024-04-01T00:00:00Z"),
			want: []string{"2024-03-08T14:00:00Z", "2024-03-09T14:00:00Z", "2024-03-10T13:00:00Z", "2024-03-11T13:00:00Z"},
		},
		{
			name: "02:30 falls in the gap and moves forward by an hour", rule: "FREQ=DAILY;COUNT=3",
			start: time.Date(2024, 3, 9, 2, 30, 0, 0, ny), after: utc("2024-03-01T00:00:00Z"), before: utc("2024-04-01T00:00:00Z"),
			want: []string{"2024-03-09T07:30:00Z", "2024-03-10T07:30:00Z", "2024-03-11T06:30:00Z"},
		},
		{
			name: "01:30 occurs twice on fall back; the first instant is used", rule: "FREQ=DAILY;COUNT=3",
			start: time.Date(2024, 11, 2, 1, 30, 0, 0, ny), after: utc("2024-11-01T00:00:00Z"), before: utc("2024-12-01T00:00:00Z"),
			want: []string{"2024-11-02T05:30:00Z", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"},
		},
		{
			name: "weekly in Rome across the last Sunday of March", rule: "FREQ=WEEKLY;BYDAY=SA,MO;UNTIL=20260331T000000Z",
			start: time.Date(2026, 3, 23, 10, 0, 0, 0, rome), after: utc("2026-03-01T00:00:00Z"), before: utc("2026-05-01T00:00:00Z"),
			want: []string{"2026-03-23T09:00:00Z", "2026-03-28T09:00:00Z", "2026-03-30T08:00:00Z"},
		},
		{
			name: "window clips occurrences but COUNT counts from DTSTART", rule: "FREQ=DAILY;COUNT=5",
			start: time.Date(2024, 3, 8, 9, 0, 0, 0, ny), after: utc("2024-03-10T00:00:00Z"), before: utc("2024-04-01T00:00:00Z"),
			want: []string{"2024-03-10T13:00:00Z", "2024-03-11T13:00:00Z", "2024-03-12T13:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Between(tt.start, tt.after, tt.before, 100)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, g := range got {
				s = append(s, g.UTC().Format(time.RFC3339))
			}
			if !slices.Equal(s, tt.want) {
				t.Errorf("got %v\nwant %v", s, tt.want)
			}
		})
	}
}

func TestBetweenLimitAndUntilForms(t *testing.T) {
	r, _ := Parse("FREQ=DAILY")
	start := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	got, err := r.Between(start, start.Add(-time.Hour), start.AddDate(1, 0, 0), 10)
	if !errors.Is(err, ErrTooMany) || len(got) != 11 {
		t.Fatalf("want ErrTooMany with limit+1 occurrences, got %d, %v", len(got), err)
	}
	// UNTIL as a DATE includes the occurrence on that date.
	d, _ := Parse("FREQ=DAILY;UNTIL=20260103")
	got, _ = d.Between(start, start.Add(-time.Hour), start.AddDate(0, 1, 0), 100)
	if len(got) != 3 {
		t.Errorf("UNTIL=20260103 gave %d occurrences, want 3", len(got))
	}
	// A rule that never matches ends at the window instead of scanning to 9999.
	never, _ := Parse("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30")
	got, err = never.Between(start, start, start.AddDate(0, 6, 0), 100)
	if err != nil || len(got) != 0 {
		t.Errorf("never-matching rule: %v, %v", got, err)
	}
	dup, _ := Parse("FREQ=DAILY;COUNT=2;COUNT=3")
	if _, err := dup.Between(start, start, start.AddDate(0, 1, 0), 10); err == nil {
		t.Error("a rule with a duplicate component must not expand")
	}
}

func TestWallTime(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	tests := []struct {
		h, d int
		want string
	}{
		{d: 29, h: 2, want: "2026-03-29T01:00:00Z"}, // 02:00 does not exist: 03:00 CEST
		{d: 29, h: 3, want: "2026-03-29T01:00:00Z"},
		{d: 28, h: 2, want: "2026-03-28T01:00:00Z"},
	}
	for _, tt := range tests {
		if got := WallTime(2026, 3, tt.d, tt.h, 0, 0, rome).UTC().Format(time.RFC3339); got != tt.want {
			t.Errorf("WallTime(2026-03-%d %02d:00 Rome) = %s, want %s", tt.d, tt.h, got, tt.want)
		}
	}
	if got := WallTime(2026, 10, 25, 2, 30, 0, rome).UTC().Format(time.RFC3339); got != "2026-10-25T00:30:00Z" {
		t.Errorf("ambiguous 02:30 resolved to %s, want the first instant 00:30Z", got)
	}
}
