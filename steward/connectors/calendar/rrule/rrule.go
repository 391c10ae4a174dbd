// Package rrule parses the RFC 5545 recurrence rules that Steward's calendar
// connector supports, compares two rules canonically and expands a rule into
// occurrences across daylight-saving transitions.
//
// The accepted subset is the one the spec names for the native write bridge:
// FREQ=DAILY|WEEKLY|MONTHLY|YEARLY, INTERVAL, COUNT or UNTIL, BYDAY (with
// ordinals), BYMONTHDAY, BYMONTH, BYWEEKNO, BYYEARDAY and BYSETPOS. A rule
// that uses anything else, or repeats a component, is never silently trimmed
// to the subset: Parse keeps it and marks it unrepresentable, listing why.
// WKST is honoured when expanding (calendar servers emit it often) but it is
// outside the bridge subset, so it too marks the rule unrepresentable.
package rrule

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Freq is a recurrence frequency of the supported subset.
type Freq int

// The supported frequencies.
const (
	Daily Freq = iota + 1
	Weekly
	Monthly
	Yearly
)

var freqNames = map[string]Freq{"DAILY": Daily, "WEEKLY": Weekly, "MONTHLY": Monthly, "YEARLY": Yearly}

// String returns the RFC 5545 name of f.
func (f Freq) String() string {
	switch f {
	case Daily:
		return "DAILY"
	case Weekly:
		return "WEEKLY"
	case Monthly:
		return "MONTHLY"
	case Yearly:
		return "YEARLY"
	}
	return "FREQ(" + strconv.Itoa(int(f)) + ")"
}

// WeekdayNum is one BYDAY entry: a weekday with an optional ordinal
// (N=0 means every such weekday; 2 means the second; -1 the last).
type WeekdayNum struct {
	N   int
	Day time.Weekday
}

var dayNames = []string{"SU", "MO", "TU", "WE", "TH", "FR", "SA"}

func (w WeekdayNum) String() string {
	if w.N == 0 {
		return dayNames[w.Day]
	}
	return strconv.Itoa(w.N) + dayNames[w.Day]
}

// Rule is a parsed recurrence rule.
type Rule struct {
	Freq     Freq
	Interval int // at least 1
	Count    int // 0 when the rule has no COUNT
	// Until is the inclusive end of the rule, zero when there is none.
	// UntilKind says how to compare it with an occurrence.
	Until      time.Time
	UntilKind  UntilKind
	ByDay      []WeekdayNum
	ByMonthDay []int
	ByMonth    []int
	ByWeekNo   []int
	ByYearDay  []int
	BySetPos   []int
	// WeekStart is WKST (Monday unless the rule says otherwise).
	WeekStart time.Weekday

	// Unrepresentable lists why the rule is outside the bridge subset
	// (an unsupported or repeated component). Empty means representable.
	Unrepresentable []string
	// unexpandable is set when the rule cannot be expanded faithfully
	// (a repeated component makes its meaning ambiguous, or it uses a
	// component this package does not evaluate, such as BYHOUR).
	unexpandable string
	// otherFreq and extra keep what lies outside the subset, so that
	// Canonical still tells two such rules apart.
	otherFreq string
	extra     []string
}

// UntilKind says what form UNTIL was written in.
type UntilKind int

// The forms of UNTIL.
const (
	UntilNone     UntilKind = iota
	UntilUTC                // 19970902T090000Z: compared as an instant
	UntilDate               // 19970902: compared with the occurrence's local date
	UntilFloating           // 19970902T090000: compared with the occurrence's wall clock
)

// Representable reports whether the rule lies inside the bridge subset.
func (r *Rule) Representable() bool { return len(r.Unrepresentable) == 0 }

// Expandable returns nil when Expand can evaluate the rule, or the reason it cannot.
func (r *Rule) Expandable() error {
	if r.unexpandable != "" {
		return errors.New(r.unexpandable)
	}
	return nil
}

// MaxRuleLength bounds the text Parse accepts; real rules are far shorter.
const MaxRuleLength = 4096

// Parse reads an RRULE value (with or without the "RRULE:" prefix).
//
// It returns an error only for text that is not a valid RFC 5545 rule in a
// supported frequency (missing or unknown FREQ, a malformed or out-of-range
// value, COUNT together with UNTIL, a BY-component the frequency forbids).
// Components outside the subset and repeated components do not fail: they
// are listed in Rule.Unrepresentable.
func Parse(s string) (*Rule, error) {
	if len(s) > MaxRuleLength {
		return nil, fmt.Errorf("rrule: rule is %d bytes, more than %d", len(s), MaxRuleLength)
	}
	s = strings.TrimSpace(s)
	if len(s) >= 6 && strings.EqualFold(s[:6], "RRULE:") {
		s = s[6:]
	}
	if s == "" {
		return nil, errors.New("rrule: empty rule")
	}
	r := &Rule{Interval: 1, WeekStart: time.Monday}
	seen := map[string]bool{}
	var freqSeen bool
	for _, part := range strings.Split(s, ";") {
		if part == "" {
			continue // a trailing ';' is common and harmless
		}
		name, value, ok := strings.Cut(part, "=")
		name = strings.ToUpper(strings.TrimSpace(name))
		value = strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf("rrule: %q is not NAME=VALUE", part)
		}
		if seen[name] {
			r.extra = append(r.extra, name+"="+strings.ToUpper(value))
			r.Unrepresentable = append(r.Unrepresentable, "duplicate "+name)
			r.unexpandable = "the rule repeats " + name + ", so its meaning is ambiguous"
			continue // the first value stands for parsing; the rule stays flagged
		}
		seen[name] = true
		var err error
		switch name {
		case "FREQ":
			f, known := freqNames[strings.ToUpper(value)]
			if !known {
				switch strings.ToUpper(value) {
				case "HOURLY", "MINUTELY", "SECONDLY":
					r.Unrepresentable = append(r.Unrepresentable, "FREQ="+strings.ToUpper(value))
					r.unexpandable = "FREQ=" + strings.ToUpper(value) + " is not supported"
					r.otherFreq = strings.ToUpper(value)
					freqSeen = true
					continue
				}
				return nil, fmt.Errorf("rrule: unknown FREQ %q", value)
			}
			r.Freq, freqSeen = f, true
		case "INTERVAL":
			r.Interval, err = parseInt(name, value, 1, 1_000_000)
		case "COUNT":
			r.Count, err = parseInt(name, value, 1, 1_000_000)
		case "UNTIL":
			r.Until, r.UntilKind, err = parseUntil(value)
		case "BYDAY":
			r.ByDay, err = parseByDay(value)
		case "BYMONTHDAY":
			r.ByMonthDay, err = parseIntList(name, value, 1, 31, true)
		case "BYMONTH":
			r.ByMonth, err = parseIntList(name, value, 1, 12, false)
		case "BYWEEKNO":
			r.ByWeekNo, err = parseIntList(name, value, 1, 53, true)
		case "BYYEARDAY":
			r.ByYearDay, err = parseIntList(name, value, 1, 366, true)
		case "BYSETPOS":
			r.BySetPos, err = parseIntList(name, value, 1, 366, true)
		case "WKST":
			d, ok := parseWeekday(strings.ToUpper(value))
			if !ok {
				return nil, fmt.Errorf("rrule: bad WKST %q", value)
			}
			r.WeekStart = d
			r.Unrepresentable = append(r.Unrepresentable, "WKST is outside the bridge subset")
		case "BYHOUR", "BYMINUTE", "BYSECOND", "BYEASTER", "RSCALE", "SKIP":
			r.extra = append(r.extra, name+"="+strings.ToUpper(value))
			r.Unrepresentable = append(r.Unrepresentable, name+" is not supported")
			r.unexpandable = name + " is not supported"
		default:
			if strings.HasPrefix(name, "X-") {
				r.extra = append(r.extra, name+"="+strings.ToUpper(value))
				r.Unrepresentable = append(r.Unrepresentable, name+" is not supported")
				continue
			}
			return nil, fmt.Errorf("rrule: unknown component %q", name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !freqSeen {
		return nil, errors.New("rrule: FREQ is required")
	}
	if r.Count > 0 && r.UntilKind != UntilNone {
		return nil, errors.New("rrule: COUNT and UNTIL cannot both be given")
	}
	if r.Freq != 0 {
		if err := r.checkFreqConstraints(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkFreqConstraints applies RFC 5545's rules on which BY-components a
// frequency may use, so an ill-formed rule is refused rather than guessed at.
func (r *Rule) checkFreqConstraints() error {
	hasOrdinal := slices.ContainsFunc(r.ByDay, func(w WeekdayNum) bool { return w.N != 0 })
	switch {
	case hasOrdinal && (r.Freq == Daily || r.Freq == Weekly):
		return fmt.Errorf("rrule: BYDAY ordinals are not allowed with FREQ=%s", r.Freq)
	case hasOrdinal && r.Freq == Yearly && len(r.ByWeekNo) > 0:
		return errors.New("rrule: BYDAY ordinals are not allowed together with BYWEEKNO")
	case len(r.ByWeekNo) > 0 && r.Freq != Yearly:
		return fmt.Errorf("rrule: BYWEEKNO is only allowed with FREQ=YEARLY, not %s", r.Freq)
	case len(r.ByYearDay) > 0 && r.Freq != Yearly:
		return fmt.Errorf("rrule: BYYEARDAY is not allowed with FREQ=%s", r.Freq)
	case len(r.ByMonthDay) > 0 && r.Freq == Weekly:
		return errors.New("rrule: BYMONTHDAY is not allowed with FREQ=WEEKLY")
	case len(r.BySetPos) > 0 && len(r.ByDay)+len(r.ByMonthDay)+len(r.ByMonth)+len(r.ByWeekNo)+len(r.ByYearDay) == 0:
		return errors.New("rrule: BYSETPOS needs another BY-component")
	}
	return nil
}

func parseInt(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("rrule: %s=%q must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// parseIntList reads a comma list; signed lists accept -hi..-lo as well.
func parseIntList(name, v string, lo, hi int, signed bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(f), "+"))
		ok := err == nil && (n >= lo && n <= hi || signed && n <= -lo && n >= -hi)
		if !ok {
			return nil, fmt.Errorf("rrule: %s value %q is out of range", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseWeekday(s string) (time.Weekday, bool) {
	for i, n := range dayNames {
		if n == s {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

func parseByDay(v string) ([]WeekdayNum, error) {
	var out []WeekdayNum
	for _, f := range strings.Split(v, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if len(f) < 2 {
			return nil, fmt.Errorf("rrule: BYDAY value %q is not a weekday", f)
		}
		d, ok := parseWeekday(f[len(f)-2:])
		if !ok {
			return nil, fmt.Errorf("rrule: BYDAY value %q is not a weekday", f)
		}
		w := WeekdayNum{Day: d}
		if num := f[:len(f)-2]; num != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(num, "+"))
			if err != nil || n == 0 || n > 53 || n < -53 {
				return nil, fmt.Errorf("rrule: BYDAY ordinal in %q must be 1..53 or -53..-1", f)
			}
			w.N = n
		}
		out = append(out, w)
	}
	return out, nil
}

func parseUntil(v string) (time.Time, UntilKind, error) {
	switch {
	case len(v) == 8:
		t, err := time.Parse("20060102", v)
		if err == nil {
			return t, UntilDate, nil
		}
	case len(v) == 16 && (v[15] == 'Z' || v[15] == 'z'):
		t, err := time.Parse("20060102T150405", v[:15])
		if err == nil {
			return t, UntilUTC, nil
		}
	case len(v) == 15:
		t, err := time.Parse("20060102T150405", v)
		if err == nil {
			return t, UntilFloating, nil
		}
	}
	return time.Time{}, UntilNone, fmt.Errorf("rrule: UNTIL %q is not a DATE or DATE-TIME", v)
}

// Canonical returns the rule in a normalised text form: FREQ, INTERVAL (only
// when above 1), COUNT or UNTIL, then BYMONTH, BYWEEKNO, BYYEARDAY,
// BYMONTHDAY, BYDAY, BYSETPOS and WKST (only when not Monday), each list
// sorted and without repeats. Two rules with the same meaning written in a
// different order or spelling have the same canonical form.
func (r *Rule) Canonical() string {
	var b strings.Builder
	if r.Freq == 0 {
		b.WriteString("FREQ=" + r.otherFreq)
	} else {
		b.WriteString("FREQ=" + r.Freq.String())
	}
	if r.Interval > 1 {
		b.WriteString(";INTERVAL=" + strconv.Itoa(r.Interval))
	}
	if r.Count > 0 {
		b.WriteString(";COUNT=" + strconv.Itoa(r.Count))
	}
	switch r.UntilKind {
	case UntilUTC:
		b.WriteString(";UNTIL=" + r.Until.UTC().Format("20060102T150405Z"))
	case UntilDate:
		b.WriteString(";UNTIL=" + r.Until.Format("20060102"))
	case UntilFloating:
		b.WriteString(";UNTIL=" + r.Until.Format("20060102T150405"))
	}
	writeInts(&b, "BYMONTH", r.ByMonth)
	writeInts(&b, "BYWEEKNO", r.ByWeekNo)
	writeInts(&b, "BYYEARDAY", r.ByYearDay)
	writeInts(&b, "BYMONTHDAY", r.ByMonthDay)
	if len(r.ByDay) > 0 {
		days := slices.Clone(r.ByDay)
		slices.SortFunc(days, func(a, c WeekdayNum) int {
			if a.N != c.N {
				return a.N - c.N
			}
			return mondayIndex(a.Day) - mondayIndex(c.Day)
		})
		days = slices.Compact(days)
		parts := make([]string, len(days))
		for i, d := range days {
			parts[i] = d.String()
		}
		b.WriteString(";BYDAY=" + strings.Join(parts, ","))
	}
	writeInts(&b, "BYSETPOS", r.BySetPos)
	if r.WeekStart != time.Monday {
		b.WriteString(";WKST=" + dayNames[r.WeekStart])
	}
	extra := slices.Clone(r.extra)
	slices.Sort(extra)
	for _, e := range extra {
		b.WriteString(";" + e)
	}
	return b.String()
}

// String returns the canonical form.
func (r *Rule) String() string { return r.Canonical() }

func mondayIndex(d time.Weekday) int { return (int(d) + 6) % 7 }

func writeInts(b *strings.Builder, name string, v []int) {
	if len(v) == 0 {
		return
	}
	s := slices.Clone(v)
	slices.Sort(s)
	s = slices.Compact(s)
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.Itoa(n)
	}
	b.WriteString(";" + name + "=" + strings.Join(parts, ","))
}

// Equal reports whether a and b are the same rule once normalised.
func Equal(a, b *Rule) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Canonical() == b.Canonical()
}

// Equivalent reports whether a and b produce the same occurrences from the
// first occurrence start: besides Equal it fills in the components RFC 5545
// implies from DTSTART (FREQ=WEEKLY alone means BYDAY=<start's weekday>), as
// a calendar server may write them out explicitly after a save.
func Equivalent(a, b *Rule, start time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.withImplied(start).Canonical() == b.withImplied(start).Canonical()
}

func (r *Rule) withImplied(start time.Time) *Rule {
	c := *r
	if c.Freq == Yearly && len(c.ByYearDay)+len(c.ByDay) == 0 {
		switch {
		case len(c.ByWeekNo) > 0 && len(c.ByMonthDay) == 0:
			c.ByDay = []WeekdayNum{{Day: start.Weekday()}}
		case len(c.ByMonthDay) > 0 && len(c.ByMonth)+len(c.ByWeekNo) == 0:
			c.ByMonth = []int{int(start.Month())}
		}
	}
	if len(c.ByWeekNo)+len(c.ByYearDay)+len(c.ByMonthDay)+len(c.ByDay) > 0 {
		return &c
	}
	switch c.Freq {
	case Weekly:
		c.ByDay = []WeekdayNum{{Day: start.Weekday()}}
	case Monthly:
		c.ByMonthDay = []int{start.Day()}
	case Yearly:
		c.ByMonthDay = []int{start.Day()}
		if len(c.ByMonth) == 0 {
			c.ByMonth = []int{int(start.Month())}
		}
	}
	return &c
}
