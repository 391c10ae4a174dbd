package calendar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// MaxICSFileBytes bounds one .ics/.vcs file; a larger one is reported as an
// item error and skipped.
const MaxICSFileBytes = 16 << 20

// maxICSFiles bounds a vdir walk.
const maxICSFiles = 200_000

// ReadICS reads an iCalendar (.ics) or vCalendar (.vcs) file, or a vdir
// folder: either a folder of .ics files (one calendar) or a folder of such
// folders (one calendar each, vdirsyncer layout, titled by its "displayname"
// file when present). A file that cannot be parsed, or an event with an
// unknown TZID, is an item error; the rest of the source still reads.
func ReadICS(ctx context.Context, src SourceConfig, opts ReadOptions) (*SourceResult, error) {
	info, err := os.Stat(src.Path)
	if err != nil {
		return nil, sourceError("read calendar", src.Path, err)
	}
	r := &icsReader{src: src, zone: opts.zone(), zones: newZoneResolver(), res: &SourceResult{}}
	if !info.IsDir() {
		calID := strings.TrimSuffix(filepath.Base(src.Path), filepath.Ext(src.Path))
		r.readFile(src.Path, calID, "", false)
		return r.res, nil
	}
	cals, err := vdirCalendars(src.Path)
	if err != nil {
		return nil, sourceError("read calendar folder", src.Path, err)
	}
	files := 0
	for _, c := range cals {
		for _, f := range c.files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if files++; files > maxICSFiles {
				return nil, fmt.Errorf("read calendar folder %s: more than %d files", src.Path, maxICSFiles)
			}
			r.readFile(f, c.id, c.title, true)
		}
	}
	return r.res, nil
}

type vdirCalendar struct {
	id, title string
	files     []string
}

// vdirCalendars lists the calendars of a vdir root: the root itself when it
// holds .ics files, and each direct sub-folder that does, titled by its
// "displayname" file when present.
func vdirCalendars(root string) ([]vdirCalendar, error) {
	folders, err := localsource.Vdir(root, ".ics", ".vcs", ".ical", ".ifb")
	if err != nil {
		return nil, err
	}
	out := make([]vdirCalendar, len(folders))
	for i, f := range folders {
		out[i] = vdirCalendar{id: f.Name, title: localsource.DisplayName(f.Path), files: f.Files}
	}
	return out, nil
}

type icsReader struct {
	src   SourceConfig
	zone  *time.Location
	zones *zoneResolver
	res   *SourceResult
}

// readFile parses one file. In a vdir the file name is the item's external
// id (the CalDAV href); in a single-file source items have none.
func (r *icsReader) readFile(path, calID, calTitle string, vdir bool) {
	data, err := localsource.ReadBounded(path, MaxICSFileBytes)
	if err != nil {
		r.fail(path, fmt.Errorf("read: %w", err))
		return
	}
	r.parseFile(path, data, calID, calTitle, vdir)
}

// parseFile adds the events of one file's content.
func (r *icsReader) parseFile(path string, data []byte, calID, calTitle string, vdir bool) {
	cals, err := decodeCalendars(data)
	if err != nil {
		r.fail(path, fmt.Errorf("not a valid iCalendar file: %w", err))
		return
	}
	extID := ""
	if vdir {
		extID = filepath.Base(path)
	}
	for _, cal := range cals {
		title := calTitle
		if title == "" {
			if name, err := cal.Props.Text("X-WR-CALNAME"); err == nil && strings.TrimSpace(name) != "" {
				title = strings.TrimSpace(name)
			} else {
				title = calID
			}
		}
		for _, child := range cal.Children {
			if child.Name != ical.CompEvent {
				continue // to-dos, journals, free/busy and time zones are not events
			}
			it, err := r.event(child, path, calID, title, extID)
			if err != nil {
				r.res.ItemErrors = append(r.res.ItemErrors, ItemError{Path: path, UID: it.UID, Err: err})
				continue
			}
			r.res.Items = append(r.res.Items, it)
		}
	}
}

func (r *icsReader) fail(path string, err error) {
	r.res.ItemErrors = append(r.res.ItemErrors, ItemError{Path: path, Err: err})
	r.res.FailedPaths = append(r.res.FailedPaths, path)
}

// decodeCalendars reads every VCALENDAR in data (some exports concatenate several).
func decodeCalendars(data []byte) (cals []*ical.Calendar, err error) {
	defer func() {
		if p := recover(); p != nil { // the decoder panics on some truncated input
			cals, err = nil, fmt.Errorf("malformed content: %v", p)
		}
	}()
	dec := ical.NewDecoder(bytes.NewReader(data))
	for {
		cal, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		cals = append(cals, cal)
	}
	if len(cals) == 0 {
		return nil, errors.New("no VCALENDAR")
	}
	return cals, nil
}

func (r *icsReader) event(c *ical.Component, path, calID, calTitle, extID string) (Item, error) {
	text := func(name string) string {
		v, err := c.Props.Text(name)
		if err != nil {
			if p := c.Props.Get(name); p != nil {
				return p.Value
			}
		}
		return strings.TrimSpace(v)
	}
	it := Item{
		Source:     r.src.Name,
		Account:    r.src.Account,
		Calendar:   calTitle,
		CalendarID: calID,
		UID:        text(ical.PropUID),
		ExternalID: extID,
		SourcePath: path,
		Title:      text(ical.PropSummary),
		Location:   text(ical.PropLocation),
		Notes:      text(ical.PropDescription),
		URL:        text(ical.PropURL),
	}
	dtstart := c.Props.Get(ical.PropDateTimeStart)
	if it.UID == "" {
		// No UID (seen in Exchange exports): derive a stable one from the
		// content so that re-reading the same file gives the same identity.
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", calID, it.Title, it.Location, propValue(dtstart))
		if dtend := c.Props.Get(ical.PropDateTimeEnd); dtend != nil {
			fmt.Fprintf(h, "\x00%s", dtend.Value)
		}
		it.UID = "synthetic-" + hex.EncodeToString(h.Sum(nil))[:24]
	}
	if dtstart == nil {
		return it, errors.New("no DTSTART")
	}
	start, allDay, tz, floating, err := r.dateTime(dtstart)
	if err != nil {
		return it, fmt.Errorf("DTSTART: %w", err)
	}
	var end time.Time
	switch {
	case c.Props.Get(ical.PropDateTimeEnd) != nil:
		end, _, _, _, err = r.dateTime(c.Props.Get(ical.PropDateTimeEnd))
		if err != nil {
			return it, fmt.Errorf("DTEND: %w", err)
		}
	case c.Props.Get(ical.PropDuration) != nil:
		d, err := c.Props.Get(ical.PropDuration).Duration()
		if err != nil {
			return it, fmt.Errorf("DURATION: %w", err)
		}
		end = start.Add(d)
		if allDay {
			end = start.AddDate(0, 0, int(d/(24*time.Hour)))
		}
	case allDay:
		end = start.AddDate(0, 0, 1)
	default:
		end = start
	}
	if end.Before(start) {
		return it, fmt.Errorf("ends (%s) before it starts (%s)", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	if allDay {
		if !end.After(start) {
			end = start.AddDate(0, 0, 1)
		}
		setAllDay(&it, start, end, r.zone)
	} else {
		it.Start, it.End, it.Floating = start, end, floating
		if tz != nil && tz != time.UTC {
			it.TZID = tz.String()
		}
	}
	switch strings.ToUpper(text(ical.PropStatus)) {
	case "CONFIRMED":
		it.Status = "confirmed"
	case "TENTATIVE":
		it.Status = "tentative"
	case "CANCELLED":
		it.Status = "cancelled"
	}
	it.Transparent = strings.EqualFold(text(ical.PropTransparency), "TRANSPARENT")
	if lm := c.Props.Get(ical.PropLastModified); lm != nil {
		if t, _, _, _, err := r.dateTime(lm); err == nil {
			it.LastModified = t.UTC()
		}
	} else if st := c.Props.Get(ical.PropDateTimeStamp); st != nil {
		if t, _, _, _, err := r.dateTime(st); err == nil {
			it.LastModified = t.UTC()
		}
	}
	var rules []string
	for _, p := range c.Props.Values(ical.PropRecurrenceRule) {
		rules = append(rules, p.Value)
	}
	// Several RRULE properties are joined, so the strict parser sees the
	// repeated FREQ and marks the series instead of keeping only one rule.
	it.RRule = strings.Join(rules, ";")
	if it.ExDates, err = r.dateList(c.Props.Values(ical.PropExceptionDates), allDay); err != nil {
		return it, fmt.Errorf("EXDATE: %w", err)
	}
	if it.RDates, err = r.dateList(c.Props.Values(ical.PropRecurrenceDates), allDay); err != nil {
		return it, fmt.Errorf("RDATE: %w", err)
	}
	if rid := c.Props.Get(ical.PropRecurrenceID); rid != nil {
		t, ridAllDay, _, _, err := r.dateTime(rid)
		if err != nil {
			return it, fmt.Errorf("RECURRENCE-ID: %w", err)
		}
		if ridAllDay {
			t = dateInZone(t, r.zone)
		}
		it.RecurrenceID = t
		it.RRule = ""
	}
	for _, a := range c.Children {
		if a.Name != ical.CompAlarm {
			continue
		}
		if al, ok := r.alarm(a); ok {
			it.Alarms = append(it.Alarms, al)
		}
	}
	return it, nil
}

func propValue(p *ical.Prop) string {
	if p == nil {
		return ""
	}
	return p.Params.Get(ical.ParamTimezoneID) + ":" + p.Value
}

// dateTime parses a DATE or DATE-TIME property. A DATE is returned at
// midnight UTC with allDay set; a DATE-TIME with TZID uses that zone (IANA or
// Windows name), with a Z suffix UTC, and otherwise is floating (the display
// zone's wall clock).
func (r *icsReader) dateTime(p *ical.Prop) (t time.Time, allDay bool, loc *time.Location, floating bool, err error) {
	v := strings.TrimSpace(p.Value)
	isDate := strings.EqualFold(p.Params.Get(ical.ParamValue), "DATE") || len(v) == 8
	if isDate {
		t, err = time.Parse("20060102", v)
		if err != nil {
			return t, false, nil, false, fmt.Errorf("%q is not a date", v)
		}
		return t, true, nil, false, nil
	}
	if strings.HasSuffix(v, "Z") || strings.HasSuffix(v, "z") {
		t, err = time.Parse("20060102T150405", v[:len(v)-1])
		if err != nil {
			return t, false, nil, false, fmt.Errorf("%q is not a date-time", v)
		}
		return t, false, time.UTC, false, nil
	}
	naive, err := time.Parse("20060102T150405", v)
	if err != nil {
		return t, false, nil, false, fmt.Errorf("%q is not a date-time", v)
	}
	loc = r.zone
	floating = true
	if tzid := p.Params.Get(ical.ParamTimezoneID); tzid != "" {
		loc, err = r.zones.Resolve(tzid)
		if err != nil {
			return t, false, nil, false, err
		}
		floating = false
	}
	y, m, d := naive.Date()
	h, mi, s := naive.Clock()
	return rrule.WallTime(y, m, d, h, mi, s, loc), false, loc, floating, nil
}

// dateList reads EXDATE/RDATE values (comma lists, possibly several
// properties) as RFC 3339 instants, or as dates for all-day series.
func (r *icsReader) dateList(props []ical.Prop, allDay bool) ([]string, error) {
	var out []string
	for _, p := range props {
		if strings.EqualFold(p.Params.Get(ical.ParamValue), "PERIOD") {
			return nil, errors.New("PERIOD values are not supported")
		}
		for _, v := range strings.Split(p.Value, ",") {
			q := p
			q.Value = strings.TrimSpace(v)
			if q.Value == "" {
				continue
			}
			t, isDate, _, _, err := r.dateTime(&q)
			if err != nil {
				return nil, err
			}
			switch {
			case allDay || isDate:
				out = append(out, t.Format(time.DateOnly))
			default:
				out = append(out, t.UTC().Format(time.RFC3339))
			}
		}
	}
	return out, nil
}

func (r *icsReader) alarm(c *ical.Component) (Alarm, bool) {
	trig := c.Props.Get(ical.PropTrigger)
	if trig == nil {
		return Alarm{}, false
	}
	action := ""
	if a := c.Props.Get(ical.PropAction); a != nil {
		action = strings.ToLower(a.Value)
	}
	if strings.EqualFold(trig.Params.Get(ical.ParamValue), "DATE-TIME") || strings.HasSuffix(trig.Value, "Z") && !strings.HasPrefix(strings.TrimLeft(trig.Value, "+-"), "P") {
		t, _, _, _, err := r.dateTime(trig)
		if err != nil {
			return Alarm{}, false
		}
		t = t.UTC()
		return Alarm{At: &t, Action: action}, true
	}
	d, err := trig.Duration()
	if err != nil {
		return Alarm{}, false
	}
	m := int64(d / time.Minute)
	return Alarm{OffsetMinutes: &m, Action: action}, true
}
