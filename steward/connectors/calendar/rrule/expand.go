package rrule

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrTooMany is returned by Between when the window holds more occurrences
// than the caller's limit; the caller reports it instead of truncating.
var ErrTooMany = errors.New("rrule: too many occurrences")

// maxPeriods bounds the work of one expansion: a daily rule started in the
// year 1 and read in 2026 needs about 740,000 periods.
const maxPeriods = 1_000_000

// Between returns, in order, the starts s of the occurrences with
// after < s < before. start is the first occurrence (DTSTART, which RFC 5545
// always counts as an occurrence); its Location and wall clock give the local
// time of every occurrence, so a 09:00 meeting stays at 09:00 across daylight
// saving changes. A wall time that falls in a spring-forward gap moves forward
// by the gap; one that occurs twice resolves to the first instant. For an
// all-day event pass the civil date at midnight UTC.
//
// When more than limit occurrences fall in the window Between returns the
// first limit+1 of them and ErrTooMany.
func (r *Rule) Between(start, after, before time.Time, limit int) ([]time.Time, error) {
	if err := r.Expandable(); err != nil {
		return nil, err
	}
	loc := start.Location()
	hh, mm, ss := start.Clock()
	y0, m0, d0 := start.Date()
	var out []time.Time
	emitted := 0
	done := false
	tooMany := false
	emit := func(t time.Time) {
		if r.Count > 0 && emitted >= r.Count || r.pastUntil(t) {
			done = true
			return
		}
		emitted++
		if t.After(after) && t.Before(before) {
			out = append(out, t)
			if len(out) > limit {
				tooMany, done = true, true
			}
		}
	}
	emit(start)
	for k := 0; !done; k++ {
		if k >= maxPeriods {
			return nil, fmt.Errorf("rrule: expanding %s from %s needs more than %d periods", r.Canonical(), start.Format(time.RFC3339), maxPeriods)
		}
		first, dates := r.period(k, y0, m0, d0)
		if first.Year() > 9999 {
			break
		}
		periodStart := WallTime(first.Year(), first.Month(), first.Day(), 0, 0, 0, loc)
		if !periodStart.Before(before) || r.pastUntil(periodStart) {
			break // every later occurrence is at or after this instant
		}
		for _, d := range dates {
			t := WallTime(d.Year(), d.Month(), d.Day(), hh, mm, ss, loc)
			if !t.After(start) {
				continue // DTSTART was emitted first; earlier dates precede the rule
			}
			emit(t)
			if done {
				break
			}
		}
	}
	if tooMany {
		return out, ErrTooMany
	}
	return out, nil
}

// pastUntil reports whether t lies after the rule's UNTIL.
func (r *Rule) pastUntil(t time.Time) bool {
	switch r.UntilKind {
	case UntilUTC:
		return t.After(r.Until)
	case UntilDate:
		y, m, d := t.Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).After(r.Until)
	case UntilFloating:
		y, m, d := t.Date()
		h, mi, s := t.Clock()
		return time.Date(y, m, d, h, mi, s, 0, time.UTC).After(r.Until)
	}
	return false
}

// WallTime returns the instant at which the wall clock in loc reads the given
// civil time, resolving a spring-forward gap by moving forward by the gap and
// a fall-back overlap to the earlier instant (RFC 5545 §3.3.5).
func WallTime(y int, mo time.Month, d, h, mi, s int, loc *time.Location) time.Time {
	naive := time.Date(y, mo, d, h, mi, s, 0, time.UTC)
	_, offBefore := naive.Add(-30 * time.Hour).In(loc).Zone()
	_, offAfter := naive.Add(30 * time.Hour).In(loc).Zone()
	var best time.Time
	for _, off := range []int{offBefore, offAfter} {
		cand := naive.Add(-time.Duration(off) * time.Second).In(loc)
		cy, cm, cd := cand.Date()
		ch, cmi, cs := cand.Clock()
		if cy == y && cm == mo && cd == d && ch == h && cmi == mi && cs == s {
			if best.IsZero() || cand.Before(best) {
				best = cand
			}
		}
	}
	if best.IsZero() { // in a gap: keep the offset in force before it
		return naive.Add(-time.Duration(offBefore) * time.Second).In(loc)
	}
	return best
}

func civil(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// period returns the first civil date of period k and the dates in it that
// the rule selects, sorted, with BYSETPOS applied.
func (r *Rule) period(k, y0 int, m0 time.Month, d0 int) (time.Time, []time.Time) {
	start := civil(y0, m0, d0)
	var first time.Time
	var days []time.Time
	switch r.Freq {
	case Daily:
		first = civil(y0, m0, d0+k*r.Interval)
		days = []time.Time{first}
	case Weekly:
		back := (int(start.Weekday()) - int(r.WeekStart) + 7) % 7
		first = civil(y0, m0, d0-back+7*k*r.Interval)
		for i := range 7 {
			days = append(days, first.AddDate(0, 0, i))
		}
	case Monthly:
		first = civil(y0, m0+time.Month(k*r.Interval), 1)
		n := daysIn(first.Year(), first.Month())
		for i := range n {
			days = append(days, first.AddDate(0, 0, i))
		}
	case Yearly:
		first = civil(y0+k*r.Interval, 1, 1)
		n := yearLen(first.Year())
		for i := range n {
			days = append(days, first.AddDate(0, 0, i))
		}
	}
	if first.Year() > 9999 {
		return first, nil
	}
	f := r.filterFor(first.Year(), m0, d0, start.Weekday())
	kept := days[:0]
	for _, d := range days {
		if f.keep(d) {
			kept = append(kept, d)
		}
	}
	return first, r.applySetPos(kept)
}

// filter holds the per-period predicates with the defaults RFC 5545 derives
// from DTSTART already filled in.
type filter struct {
	r          *Rule
	byMonth    []int
	byMonthDay []int
	plainDays  []time.Weekday
	ordinals   []WeekdayNum
	weekNo     []bool // for YEARLY BYWEEKNO: index = day of year (0-based)
}

func (r *Rule) filterFor(year int, m0 time.Month, d0 int, wd0 time.Weekday) *filter {
	f := &filter{r: r, byMonth: r.ByMonth, byMonthDay: r.ByMonthDay}
	for _, w := range r.ByDay {
		if w.N == 0 {
			f.plainDays = append(f.plainDays, w.Day)
		} else {
			f.ordinals = append(f.ordinals, w)
		}
	}
	noDaySpec := len(r.ByWeekNo)+len(r.ByYearDay)+len(r.ByMonthDay)+len(r.ByDay) == 0
	// BYWEEKNO names weeks, not days: without a day part the day is DTSTART's
	// weekday in each of those weeks (as libical and python-dateutil
	// expand it), never every day of the week.
	if r.Freq == Yearly && len(r.ByWeekNo) > 0 && len(r.ByYearDay)+len(r.ByMonthDay)+len(r.ByDay) == 0 {
		f.plainDays = []time.Weekday{wd0}
	}
	// Likewise BYMONTHDAY in a YEARLY rule without BYMONTH takes the month
	// from DTSTART (RFC 5545 §3.3.10: what the rule leaves out comes from
	// DTSTART), as libical reads it; python-dateutil repeats it every month.
	if r.Freq == Yearly && len(r.ByMonthDay) > 0 && len(f.byMonth)+len(r.ByWeekNo)+len(r.ByYearDay) == 0 {
		f.byMonth = []int{int(m0)}
	}
	if noDaySpec {
		switch r.Freq {
		case Weekly:
			f.plainDays = []time.Weekday{wd0}
		case Monthly:
			f.byMonthDay = []int{d0}
		case Yearly:
			f.byMonthDay = []int{d0}
			if len(f.byMonth) == 0 {
				f.byMonth = []int{int(m0)}
			}
		}
	}
	if len(r.ByWeekNo) > 0 {
		f.weekNo = weekNoMask(year, r.WeekStart, r.ByWeekNo)
	}
	return f
}

func (f *filter) keep(d time.Time) bool {
	r := f.r
	if len(f.byMonth) > 0 && !slices.Contains(f.byMonth, int(d.Month())) {
		return false
	}
	if f.weekNo != nil && !f.weekNo[d.YearDay()-1] {
		return false
	}
	if len(r.ByYearDay) > 0 {
		yd := d.YearDay()
		if !slices.Contains(r.ByYearDay, yd) && !slices.Contains(r.ByYearDay, yd-yearLen(d.Year())-1) {
			return false
		}
	}
	if len(f.byMonthDay) > 0 {
		md := d.Day()
		if !slices.Contains(f.byMonthDay, md) && !slices.Contains(f.byMonthDay, md-daysIn(d.Year(), d.Month())-1) {
			return false
		}
	}
	if len(f.plainDays)+len(f.ordinals) > 0 {
		if !slices.Contains(f.plainDays, d.Weekday()) && !f.matchesOrdinal(d) {
			return false
		}
	}
	return true
}

// matchesOrdinal reports whether d is the nth weekday of its month (MONTHLY,
// or YEARLY with BYMONTH) or of its year (YEARLY without BYMONTH).
func (f *filter) matchesOrdinal(d time.Time) bool {
	for _, w := range f.ordinals {
		if w.Day != d.Weekday() {
			continue
		}
		var index, total int
		if f.r.Freq == Monthly || len(f.r.ByMonth) > 0 {
			index = (d.Day()-1)/7 + 1
			total = (daysIn(d.Year(), d.Month())-d.Day())/7 + index
		} else {
			index = (d.YearDay()-1)/7 + 1
			total = (yearLen(d.Year())-d.YearDay())/7 + index
		}
		if w.N == index || w.N == index-total-1 {
			return true
		}
	}
	return false
}

func (r *Rule) applySetPos(days []time.Time) []time.Time {
	if len(r.BySetPos) == 0 || len(days) == 0 {
		return days
	}
	var out []time.Time
	for _, p := range r.BySetPos {
		i := p - 1
		if p < 0 {
			i = len(days) + p
		}
		if i >= 0 && i < len(days) && !slices.ContainsFunc(out, days[i].Equal) {
			out = append(out, days[i])
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func daysIn(y int, m time.Month) int { return civil(y, m+1, 0).Day() }

func yearLen(y int) int {
	if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 366
	}
	return 365
}

// weekNoMask marks the days of year (0-based) that fall in the requested
// week numbers, weeks starting on wkst and week 1 being the first with at
// least four days in the year. It follows python-dateutil's algorithm, the
// reference most implementations (rrule-go included) agree with, including
// the days of next year's week 1 and last year's final week that lie in this
// year.
func weekNoMask(year int, wkst time.Weekday, byWeekNo []int) []bool {
	yl := yearLen(year)
	mask := make([]bool, yl+7)
	ws := mondayIndex(wkst)
	yearWeekday := mondayIndex(civil(year, 1, 1).Weekday())
	no1wkst := (7 - yearWeekday + ws) % 7
	firstwkst := no1wkst
	var wyearlen int
	if no1wkst >= 4 {
		no1wkst = 0
		wyearlen = yl + (yearWeekday-ws+7)%7
	} else {
		wyearlen = yl - no1wkst
	}
	numWeeks := wyearlen/7 + (wyearlen%7)/4
	markWeek := func(i int) {
		for range 7 {
			if i >= len(mask) {
				return
			}
			mask[i] = true
			i++
			if mondayIndex(civil(year, 1, 1+i).Weekday()) == ws {
				return
			}
		}
	}
	for _, n := range byWeekNo {
		if n < 0 {
			n += numWeeks + 1
		}
		if n <= 0 || n > numWeeks {
			continue
		}
		var i int
		if n > 1 {
			i = no1wkst + (n-1)*7
			if no1wkst != firstwkst {
				i -= 7 - firstwkst
			}
		} else {
			i = no1wkst
		}
		markWeek(i)
	}
	if slices.Contains(byWeekNo, 1) {
		i := no1wkst + numWeeks*7
		if no1wkst != firstwkst {
			i -= 7 - firstwkst
		}
		if i < yl {
			markWeek(i)
		}
	}
	if no1wkst != 0 {
		var lastNumWeeks int
		if !slices.Contains(byWeekNo, -1) {
			lyWeekday := mondayIndex(civil(year-1, 1, 1).Weekday())
			lno1wkst := (7 - lyWeekday + ws) % 7
			lyl := yearLen(year - 1)
			if lno1wkst >= 4 {
				lastNumWeeks = 52 + ((lyl+(lyWeekday-ws+7)%7)%7)/4
			} else {
				lastNumWeeks = 52 + ((yl-no1wkst)%7)/4
			}
		} else {
			lastNumWeeks = -1
		}
		if slices.Contains(byWeekNo, lastNumWeeks) {
			for i := range no1wkst {
				mask[i] = true
			}
		}
	}
	return mask
}
