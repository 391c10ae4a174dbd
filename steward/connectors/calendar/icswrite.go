package calendar

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// ProductID is the PRODID of the iCalendar objects Steward writes.
const ProductID = "-//Steward//Steward calendar//EN"

// encodeICS renders cal as RFC 5545 text with content lines folded at 75
// octets (the encoder does not fold; long DESCRIPTIONs are common).
func encodeICS(cal *ical.Calendar) ([]byte, error) {
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return nil, err
	}
	return foldLines(buf.Bytes()), nil
}

// foldLines folds every CRLF-terminated line longer than 75 octets.
func foldLines(in []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(in, []byte("\r\n")) {
		body := bytes.TrimSuffix(line, []byte("\r\n"))
		out.WriteString(localsource.FoldLine(string(body)))
		if len(body) < len(line) {
			out.WriteString("\r\n")
		}
	}
	return out.Bytes()
}

// newCalendar is an empty VCALENDAR with Steward's PRODID.
func newCalendar() *ical.Calendar {
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Props.SetText(ical.PropProductID, ProductID)
	return cal
}

// stamp sets DTSTAMP and LAST-MODIFIED to now and, for an existing
// component, increments SEQUENCE (RFC 5545 3.8.7.4: a significant change).
func stamp(c *ical.Component, now time.Time, bump bool) {
	now = now.UTC().Truncate(time.Second)
	c.Props.SetDateTime(ical.PropDateTimeStamp, now)
	c.Props.SetDateTime(ical.PropLastModified, now)
	seq := 0
	if p := c.Props.Get(ical.PropSequence); p != nil {
		seq, _ = strconv.Atoi(strings.TrimSpace(p.Value))
		if bump {
			seq++
		}
	}
	c.Props.Set(&ical.Prop{Name: ical.PropSequence, Params: ical.Params{}, Value: strconv.Itoa(seq)})
}

// setText sets or, for an empty value, removes a text property.
func setText(c *ical.Component, name string, v *string) {
	if v == nil {
		return
	}
	if *v == "" {
		c.Props.Del(name)
		return
	}
	c.Props.SetText(name, *v)
}

// timeProp renders t as a DATE-TIME property: with TZID (the wall clock in
// tzid), in UTC when tzid is empty, or floating in zone.
func timeProp(name string, t time.Time, tzid string, floating bool, zone *time.Location) ical.Prop {
	p := ical.Prop{Name: name, Params: ical.Params{}}
	switch {
	case floating:
		p.Value = t.In(zone).Format("20060102T150405")
	case tzid != "":
		loc, err := resolveTZID(tzid)
		if err != nil {
			loc = time.UTC
		}
		p.Params.Set(ical.ParamTimezoneID, tzid)
		p.Value = t.In(loc).Format("20060102T150405")
	default:
		p.Value = t.UTC().Format("20060102T150405Z")
	}
	return p
}

// dateProp renders a civil date (YYYY-MM-DD) as a DATE property.
func dateProp(name, date string) ical.Prop {
	p := ical.Prop{Name: name, Params: ical.Params{}}
	p.Params.Set(ical.ParamValue, "DATE")
	p.Value = strings.ReplaceAll(date, "-", "")
	return p
}

// setSpan writes DTSTART and DTEND for s (DURATION is dropped).
func setSpan(c *ical.Component, s span, floating bool, zone *time.Location) {
	c.Props.Del(ical.PropDuration)
	if s.AllDay {
		c.Props.Set(ptr(dateProp(ical.PropDateTimeStart, s.StartDate)))
		c.Props.Set(ptr(dateProp(ical.PropDateTimeEnd, s.EndDate)))
		return
	}
	c.Props.Set(ptr(timeProp(ical.PropDateTimeStart, s.Start, s.TZID, floating, zone)))
	c.Props.Set(ptr(timeProp(ical.PropDateTimeEnd, s.End, s.TZID, floating, zone)))
}

// setAlarms replaces the VALARMs with display reminders minutes before the
// start.
func setAlarms(c *ical.Component, minutes []int, title string) {
	kept := c.Children[:0]
	for _, ch := range c.Children {
		if ch.Name != ical.CompAlarm {
			kept = append(kept, ch)
		}
	}
	c.Children = kept
	for _, m := range minutes {
		a := ical.NewComponent(ical.CompAlarm)
		a.Props.SetText(ical.PropAction, "DISPLAY")
		a.Props.SetText(ical.PropDescription, nonEmpty(title, "Reminder"))
		trig := "-PT" + strconv.Itoa(m) + "M"
		if m == 0 {
			trig = "PT0S"
		}
		a.Props.Set(&ical.Prop{Name: ical.PropTrigger, Params: ical.Params{}, Value: trig})
		c.Children = append(c.Children, a)
	}
}

// applyFields writes the text, alarm and rule parts of a change.
func applyFields(c *ical.Component, ch *Change) {
	setText(c, ical.PropSummary, ch.Title)
	setText(c, ical.PropLocation, ch.Location)
	setText(c, ical.PropDescription, ch.Notes)
	setText(c, ical.PropURL, ch.URL)
	if ch.RRule != nil {
		if *ch.RRule == "" {
			c.Props.Del(ical.PropRecurrenceRule)
		} else {
			c.Props.Set(&ical.Prop{Name: ical.PropRecurrenceRule, Params: ical.Params{}, Value: *ch.RRule})
		}
	}
	if ch.Alarms != nil {
		title := ""
		if p := c.Props.Get(ical.PropSummary); p != nil {
			title, _ = p.Text()
		}
		setAlarms(c, *ch.Alarms, title)
	}
}

// ensureTimezone adds a VTIMEZONE for tzid to cal unless it has one.
// RFC 5545 requires one per TZID used; clients without the zone database
// (and Outlook) rely on it.
func ensureTimezone(cal *ical.Calendar, tzid string, year int) {
	if tzid == "" {
		return
	}
	for _, c := range cal.Children {
		if c.Name == ical.CompTimezone {
			if id, _ := c.Props.Text(ical.PropTimezoneID); id == tzid {
				return
			}
		}
	}
	loc, err := resolveTZID(tzid)
	if err != nil {
		return
	}
	tz := vtimezone(tzid, loc, year)
	cal.Children = append([]*ical.Component{tz}, cal.Children...)
}

// vtimezone describes loc as a VTIMEZONE: its standard and daylight
// observances as yearly rules derived from the transitions of year (the
// ordinal weekday of each transition, "-1SU" when it is the month's last),
// or one fixed observance for a zone without daylight saving.
func vtimezone(tzid string, loc *time.Location, year int) *ical.Component {
	tz := ical.NewComponent(ical.CompTimezone)
	tz.Props.SetText(ical.PropTimezoneID, tzid)
	type transition struct {
		at       time.Time // first instant of the new offset
		from, to int
		name     string
		dst      bool
	}
	var trans []transition
	t := time.Date(year, 1, 1, 0, 0, 0, 0, loc)
	end := time.Date(year+1, 1, 1, 0, 0, 0, 0, loc)
	for range 8 {
		_, zend := t.ZoneBounds()
		if zend.IsZero() || !zend.Before(end) {
			break
		}
		_, from := zend.Add(-time.Second).Zone()
		name, to := zend.Zone()
		trans = append(trans, transition{at: zend, from: from, to: to, name: name, dst: zend.IsDST()})
		t = zend
	}
	off := func(sec int) string {
		sign := "+"
		if sec < 0 {
			sign, sec = "-", -sec
		}
		return fmt.Sprintf("%s%02d%02d", sign, sec/3600, sec/60%60)
	}
	if len(trans) == 0 {
		name, offset := t.Zone()
		obs := ical.NewComponent("STANDARD")
		obs.Props.Set(&ical.Prop{Name: ical.PropDateTimeStart, Params: ical.Params{}, Value: "19700101T000000"})
		obs.Props.Set(&ical.Prop{Name: "TZOFFSETFROM", Params: ical.Params{}, Value: off(offset)})
		obs.Props.Set(&ical.Prop{Name: "TZOFFSETTO", Params: ical.Params{}, Value: off(offset)})
		obs.Props.SetText("TZNAME", name)
		tz.Children = append(tz.Children, obs)
		return tz
	}
	for _, tr := range trans {
		kind := "STANDARD"
		if tr.dst {
			kind = "DAYLIGHT"
		}
		// DTSTART is the wall clock just before the change, in the old offset.
		wall := tr.at.UTC().Add(time.Duration(tr.from) * time.Second)
		obs := ical.NewComponent(kind)
		obs.Props.Set(&ical.Prop{Name: ical.PropDateTimeStart, Params: ical.Params{}, Value: wall.Format("20060102T150405")})
		obs.Props.Set(&ical.Prop{Name: "TZOFFSETFROM", Params: ical.Params{}, Value: off(tr.from)})
		obs.Props.Set(&ical.Prop{Name: "TZOFFSETTO", Params: ical.Params{}, Value: off(tr.to)})
		obs.Props.SetText("TZNAME", tr.name)
		day := wall.Day()
		ord := strconv.Itoa((day-1)/7 + 1)
		if day+7 > time.Date(wall.Year(), wall.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day() {
			ord = "-1"
		}
		days := []string{"SU", "MO", "TU", "WE", "TH", "FR", "SA"}
		obs.Props.Set(&ical.Prop{Name: ical.PropRecurrenceRule, Params: ical.Params{},
			Value: fmt.Sprintf("FREQ=YEARLY;BYMONTH=%d;BYDAY=%s%s", int(wall.Month()), ord, days[wall.Weekday()])})
		tz.Children = append(tz.Children, obs)
	}
	return tz
}

// ruleUntil returns rule cut so that its last occurrence is before at: COUNT
// becomes an UNTIL one second before at (UTC for zoned and UTC series,
// floating for floating ones, the previous day for all-day ones).
func ruleUntil(rule string, at time.Time, allDay, floating bool, zone *time.Location) (string, error) {
	r, err := rrule.Parse(rule)
	if err != nil {
		return "", err
	}
	r.Count = 0
	switch {
	case allDay:
		y, m, d := at.In(zone).Date()
		r.Until, r.UntilKind = time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC), rrule.UntilDate
	case floating:
		w := at.Add(-time.Second).In(zone)
		r.Until, r.UntilKind = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, time.UTC), rrule.UntilFloating
	default:
		r.Until, r.UntilKind = at.Add(-time.Second).UTC(), rrule.UntilUTC
	}
	return r.Canonical(), nil
}
