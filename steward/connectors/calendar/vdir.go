package calendar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/writeops"
)

// vdirBackend writes RFC 5545 objects into vdir folders, one .ics file per
// event, the layout vdirsyncer synchronises with CalDAV servers and khal and
// other clients read. Every file is replaced atomically (temporary file and
// rename), so a sync or a reader never sees half an event; UIDs are kept,
// SEQUENCE, DTSTAMP and LAST-MODIFIED are updated, and changes to recurring
// events use RECURRENCE-ID (one occurrence), EXDATE (a deleted occurrence)
// and an UNTIL plus a new series (this and future occurrences).
type vdirBackend struct {
	zone *time.Location
	now  func() time.Time
}

// notDone marks an error as proof that nothing was written.
func notDone(format string, a ...any) error { return writeops.NotDone(fmt.Errorf(format, a...)) }

// Apply performs p on its vdir file(s).
func (b *vdirBackend) Apply(ctx context.Context, p *Plan) (*Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, writeops.NotDone(err)
	}
	out := &Outcome{Backend: BackendVdir, UID: p.UID, Path: p.Path}
	var err error
	switch p.Op {
	case OpCreate:
		err = b.create(p)
	case OpUpdate:
		err = b.update(p, out)
	case OpDelete:
		err = b.delete(p)
	default:
		err = notDone("unknown calendar operation %q", p.Op)
	}
	out.CompletedAt = b.now()
	if err != nil {
		return out, err
	}
	return out, nil
}

// publish writes data at path; failures before the file is in place are
// NotDone.
func publish(path string, data []byte, noClobber bool) error {
	err := localsource.WriteFileAtomic(path, data, localsource.WriteOptions{Perm: 0o644, NoClobber: noClobber})
	var pub *localsource.PublishedError
	if err != nil && !errors.As(err, &pub) {
		return writeops.NotDone(err)
	}
	return err
}

func (b *vdirBackend) create(p *Plan) error {
	if p.After == nil {
		return notDone("create without times")
	}
	cal := newCalendar()
	ev := ical.NewComponent(ical.CompEvent)
	ev.Props.SetText(ical.PropUID, p.UID)
	stamp(ev, b.now(), false)
	ev.Props.SetDateTime(ical.PropCreated, b.now().UTC().Truncate(time.Second))
	s := *p.After
	setSpan(ev, s, false, b.zone)
	applyFields(ev, &p.Change)
	cal.Children = append(cal.Children, ev)
	ensureTimezone(cal, s.TZID, s.Start.Year())
	data, err := encodeICS(cal)
	if err != nil {
		return notDone("encode event: %w", err)
	}
	return publish(p.Path, data, true)
}

// liveFile is an event file as read just before a change.
type liveFile struct {
	path   string
	raw    []byte
	cal    *ical.Calendar
	master *ical.Component
	form   timeForm
	item   Item
	r      *icsReader
}

func (b *vdirBackend) read(p *Plan) (*liveFile, error) {
	raw, err := localsource.ReadBounded(p.Path, MaxICSFileBytes)
	if err != nil {
		return nil, notDone("read %s: %w", p.Path, err)
	}
	cal, master, err := parseEventFile(raw, p.UID)
	if err != nil {
		return nil, notDone("%s: %w", p.Path, err)
	}
	if master == nil {
		return nil, notDone("event %s is no longer in %s; nothing was written", p.UID, p.Path)
	}
	r := &icsReader{src: SourceConfig{Name: p.Target.Source, Account: p.Target.Account}, zone: b.zone, zones: newZoneResolver(), res: &SourceResult{}}
	it, err := r.event(master, p.Path, p.Target.CalendarID, p.Target.Title, "")
	if err != nil {
		return nil, notDone("event %s in %s cannot be read: %w", p.UID, p.Path, err)
	}
	return &liveFile{path: p.Path, raw: raw, cal: cal, master: master, form: formOf(master.Props.Get(ical.PropDateTimeStart)), item: it, r: r}, nil
}

// write replaces the file, unless another program changed it since it was
// read (then nothing is written).
func (f *liveFile) write() error {
	now, err := localsource.ReadBounded(f.path, MaxICSFileBytes)
	if err != nil || !bytes.Equal(now, f.raw) {
		return notDone("%s changed while Steward was editing it (a sync?); nothing was written, try again", f.path)
	}
	data, err := encodeICS(f.cal)
	if err != nil {
		return notDone("encode %s: %w", f.path, err)
	}
	return publish(f.path, data, false)
}

// timeForm is how a series writes its times: as dates, in a zone, in UTC or
// floating. RECURRENCE-ID and EXDATE must use the DTSTART's form.
type timeForm struct {
	allDay, floating bool
	tzid             string
}

func formOf(p *ical.Prop) timeForm {
	if p == nil {
		return timeForm{}
	}
	v := strings.TrimSpace(p.Value)
	if strings.EqualFold(p.Params.Get(ical.ParamValue), "DATE") || len(v) == 8 {
		return timeForm{allDay: true}
	}
	if tz := p.Params.Get(ical.ParamTimezoneID); tz != "" {
		return timeForm{tzid: tz}
	}
	return timeForm{floating: !strings.HasSuffix(strings.ToUpper(v), "Z")}
}

// prop renders an occurrence start (midnight in zone for all-day series).
func (f timeForm) prop(name string, t time.Time, zone *time.Location) ical.Prop {
	if f.allDay {
		return dateProp(name, t.In(zone).Format(time.DateOnly))
	}
	return timeProp(name, t, f.tzid, f.floating, zone)
}

// instant reads a RECURRENCE-ID or EXDATE value as an occurrence start in
// the form the index uses (midnight in zone for dates).
func (f *liveFile) instant(p *ical.Prop, zone *time.Location) (time.Time, error) {
	t, allDay, _, _, err := f.r.dateTime(p)
	if err == nil && allDay {
		t = dateInZone(t, zone)
	}
	return t, err
}

// overrides returns the detached occurrences of the file's series.
func (f *liveFile) overrides(uid string) []*ical.Component {
	var out []*ical.Component
	for _, c := range f.cal.Children {
		if c.Name != ical.CompEvent || c.Props.Get(ical.PropRecurrenceID) == nil {
			continue
		}
		if v, _ := c.Props.Text(ical.PropUID); strings.TrimSpace(v) == uid {
			out = append(out, c)
		}
	}
	return out
}

// removeComponents drops the given children.
func (f *liveFile) removeComponents(drop map[*ical.Component]bool) {
	kept := f.cal.Children[:0]
	for _, c := range f.cal.Children {
		if !drop[c] {
			kept = append(kept, c)
		}
	}
	f.cal.Children = kept
}

// exdates returns the master's EXDATE values as instants, with their
// property index and value.
func (f *liveFile) keepExdates(keep func(time.Time) bool, zone *time.Location) {
	var kept []ical.Prop
	for _, p := range f.master.Props.Values(ical.PropExceptionDates) {
		var vals []string
		for _, v := range strings.Split(p.Value, ",") {
			q := p
			q.Value = strings.TrimSpace(v)
			t, err := f.instant(&q, zone)
			if err != nil || keep(t) {
				vals = append(vals, q.Value)
			}
		}
		if len(vals) > 0 {
			p.Value = strings.Join(vals, ",")
			kept = append(kept, p)
		}
	}
	f.master.Props.Del(ical.PropExceptionDates)
	for _, p := range kept {
		f.master.Props.Add(&p)
	}
}

func cloneComponent(c *ical.Component) *ical.Component {
	out := ical.NewComponent(c.Name)
	for name, ps := range c.Props {
		for _, p := range ps {
			q := ical.Prop{Name: p.Name, Value: p.Value, Params: ical.Params{}}
			for k, v := range p.Params {
				q.Params[k] = append([]string(nil), v...)
			}
			out.Props[name] = append(out.Props[name], q)
		}
	}
	for _, ch := range c.Children {
		out.Children = append(out.Children, cloneComponent(ch))
	}
	return out
}

// onOrAfter compares occurrence starts; all-day ones by civil date.
func onOrAfter(t, at time.Time, allDay bool, zone *time.Location) bool {
	if allDay {
		return !civilOf(t, zone).Before(civilOf(at, zone))
	}
	return !t.Before(at)
}

func sameOccurrence(t, at time.Time, allDay bool, zone *time.Location) bool {
	if allDay {
		return civilOf(t, zone).Equal(civilOf(at, zone))
	}
	return t.Equal(at)
}

func (b *vdirBackend) update(p *Plan, out *Outcome) error {
	f, err := b.read(p)
	if err != nil {
		return err
	}
	now := b.now()
	floating := f.form.floating && p.Change.TimeZone == nil
	switch {
	case !p.Recurring || p.FirstOccurrence:
		// The change was checked against the live times when it was
		// approved; if another client has moved the event since, a
		// one-sided edit could now end before it starts.
		if live := itemSpan(&f.item); p.Before != nil && p.Change.timesChanged() && !sameSpan(live, *p.Before) {
			return notDone("event %s was moved by another program since the change was approved; nothing was written", p.UID)
		}
		if p.Change.timesChanged() && p.Recurring {
			b.shiftSeries(f, p)
		}
		if p.Change.timesChanged() || p.Change.TimeZone != nil {
			setSpan(f.master, *p.After, floating, b.zone)
		}
		applyFields(f.master, &p.Change)
		stamp(f.master, now, true)
	case p.Scope == ScopeThisEvent:
		at := *p.OccurrenceStart
		var ov *ical.Component
		for _, c := range f.overrides(p.UID) {
			if rid, err := f.instant(c.Props.Get(ical.PropRecurrenceID), b.zone); err == nil && sameOccurrence(rid, at, f.form.allDay, b.zone) {
				ov = c
			}
		}
		bump := ov != nil
		if ov == nil {
			ov = cloneComponent(f.master)
			for _, name := range []string{ical.PropRecurrenceRule, ical.PropRecurrenceDates, ical.PropExceptionDates, ical.PropCreated} {
				ov.Props.Del(name)
			}
			ov.Props.Set(ptr(f.form.prop(ical.PropRecurrenceID, at, b.zone)))
			f.cal.Children = append(f.cal.Children, ov)
		}
		setSpan(ov, *p.After, floating, b.zone)
		applyFields(ov, &p.Change)
		stamp(ov, now, bump)
	default: // futureEvents from a later occurrence: split the series
		if err := b.split(f, p, now); err != nil {
			return err
		}
		out.NewUID = p.NewUID
	}
	if !p.After.AllDay {
		ensureTimezone(f.cal, p.After.TZID, p.After.Start.Year())
	}
	return f.write()
}

// shiftSeries moves the detached occurrences and exclusions of a series
// whose start moves, so they keep naming the same occurrences.
func (b *vdirBackend) shiftSeries(f *liveFile, p *Plan) {
	old := itemSpan(&f.item)
	var delta time.Duration
	days := 0
	if f.form.allDay && p.After.AllDay {
		o, _ := time.Parse(time.DateOnly, old.StartDate)
		n, _ := time.Parse(time.DateOnly, p.After.StartDate)
		days = int(n.Sub(o).Hours() / 24)
	} else if !f.form.allDay && !p.After.AllDay {
		delta = p.After.Start.Sub(old.Start)
	} else {
		return // the series changes kind; its old exclusions no longer apply
	}
	move := func(t time.Time) time.Time {
		if days != 0 {
			return dateInZone(civilOf(t, b.zone).AddDate(0, 0, days), b.zone)
		}
		return t.Add(delta)
	}
	for _, c := range f.overrides(p.UID) {
		if t, err := f.instant(c.Props.Get(ical.PropRecurrenceID), b.zone); err == nil {
			c.Props.Set(ptr(f.form.prop(ical.PropRecurrenceID, move(t), b.zone)))
		}
	}
	var moved []time.Time
	f.keepExdates(func(t time.Time) bool { moved = append(moved, move(t)); return false }, b.zone)
	for _, t := range moved {
		f.master.Props.Add(ptr(f.form.prop(ical.PropExceptionDates, t, b.zone)))
	}
}

// split ends the series before the chosen occurrence and starts a new one
// (a new UID, in its own file) there with the change applied; later
// detached occurrences and exclusions move to the new series.
func (b *vdirBackend) split(f *liveFile, p *Plan, now time.Time) error {
	at := *p.OccurrenceStart
	oldRule := f.item.RRule
	cut, err := ruleUntil(oldRule, at, f.form.allDay, f.form.floating, b.zone)
	if err != nil {
		return notDone("the series' rule cannot be cut: %w", err)
	}
	next := cloneComponent(f.master)
	next.Props.SetText(ical.PropUID, p.NewUID)
	next.Props.Del(ical.PropSequence)
	next.Props.Del(ical.PropExceptionDates)
	next.Props.Del(ical.PropRecurrenceDates)
	next.Props.SetDateTime(ical.PropCreated, now.UTC().Truncate(time.Second))
	rule, err := remainingRule(oldRule, &f.item, at, b.zone)
	if err != nil {
		return notDone("the series' rule cannot be continued: %w", err)
	}
	next.Props.Set(&ical.Prop{Name: ical.PropRecurrenceRule, Params: ical.Params{}, Value: rule})
	floating := f.form.floating && p.Change.TimeZone == nil
	setSpan(next, *p.After, floating, b.zone)
	applyFields(next, &p.Change)
	stamp(next, now, false)
	nextForm := formOf(next.Props.Get(ical.PropDateTimeStart))
	var delta time.Duration
	if !p.After.AllDay && !f.form.allDay {
		delta = p.After.Start.Sub(at)
	}
	newCal := newCalendar()
	newCal.Children = append(newCal.Children, next)
	drop := map[*ical.Component]bool{}
	for _, c := range f.overrides(p.UID) {
		t, err := f.instant(c.Props.Get(ical.PropRecurrenceID), b.zone)
		if err != nil || !onOrAfter(t, at, f.form.allDay, b.zone) {
			continue
		}
		drop[c] = true
		if nextForm.allDay != f.form.allDay {
			continue // the detached occurrence no longer names an occurrence of the new series
		}
		moved := cloneComponent(c)
		moved.Props.SetText(ical.PropUID, p.NewUID)
		moved.Props.Set(ptr(nextForm.prop(ical.PropRecurrenceID, t.Add(delta), b.zone)))
		newCal.Children = append(newCal.Children, moved)
	}
	var later []time.Time
	f.keepExdates(func(t time.Time) bool {
		if onOrAfter(t, at, f.form.allDay, b.zone) {
			later = append(later, t)
			return false
		}
		return true
	}, b.zone)
	if nextForm.allDay == f.form.allDay {
		for _, t := range later {
			next.Props.Add(ptr(nextForm.prop(ical.PropExceptionDates, t.Add(delta), b.zone)))
		}
	}
	f.removeComponents(drop)
	f.master.Props.Set(&ical.Prop{Name: ical.PropRecurrenceRule, Params: ical.Params{}, Value: cut})
	stamp(f.master, now, true)
	if !p.After.AllDay {
		ensureTimezone(newCal, p.After.TZID, p.After.Start.Year())
	}
	for _, tz := range f.cal.Children {
		if tz.Name == ical.CompTimezone && nextForm.tzid != "" {
			if id, _ := tz.Props.Text(ical.PropTimezoneID); id == nextForm.tzid {
				newCal.Children = append([]*ical.Component{cloneComponent(tz)}, newCal.Children...)
				break
			}
		}
	}
	dedupeTimezones(newCal)
	data, err := encodeICS(newCal)
	if err != nil {
		return notDone("encode the new series: %w", err)
	}
	// The new series first: if the old file cannot be cut afterwards, the
	// outcome is uncertain (two series overlap) rather than silently lost.
	if err := publish(p.NewPath, data, true); err != nil {
		return err
	}
	if err := f.write(); err != nil {
		if writeops.IsNotDone(err) {
			return fmt.Errorf("the new series %s was written but the old one could not be cut: %w", p.NewPath, errors.Unwrap(err))
		}
		return err
	}
	return nil
}

// dedupeTimezones keeps the first VTIMEZONE of each TZID.
func dedupeTimezones(cal *ical.Calendar) {
	seen := map[string]bool{}
	kept := cal.Children[:0]
	for _, c := range cal.Children {
		if c.Name == ical.CompTimezone {
			id, _ := c.Props.Text(ical.PropTimezoneID)
			if seen[id] {
				continue
			}
			seen[id] = true
		}
		kept = append(kept, c)
	}
	cal.Children = kept
}

// remainingRule is the rule of the series split off at at: the same rule,
// with COUNT reduced by the occurrences before at.
func remainingRule(rule string, it *Item, at time.Time, zone *time.Location) (string, error) {
	r, err := rrule.Parse(rule)
	if err != nil {
		return "", err
	}
	if r.Count == 0 {
		return r.Canonical(), nil
	}
	first, err := seriesStart(it.AllDay, it.StartDate, it.Start, it.TZID, it.Floating, zone)
	if err != nil {
		return "", err
	}
	end := at
	if it.AllDay {
		end = civilOf(at, zone)
	}
	before, err := r.Between(first, first.Add(-time.Second), end, r.Count)
	if err != nil {
		return "", err
	}
	r.Count -= len(before)
	if r.Count < 1 {
		return "", errors.New("no occurrences remain after the chosen one")
	}
	return r.Canonical(), nil
}

func (b *vdirBackend) delete(p *Plan) error {
	f, err := b.read(p)
	if err != nil {
		return err
	}
	now := b.now()
	if !p.Recurring || p.FirstOccurrence {
		drop := map[*ical.Component]bool{}
		others := 0
		for _, c := range f.cal.Children {
			if c.Name == ical.CompTimezone {
				continue
			}
			if uid, _ := c.Props.Text(ical.PropUID); strings.TrimSpace(uid) == p.UID {
				drop[c] = true
			} else {
				others++
			}
		}
		if others == 0 {
			if now, err := localsource.ReadBounded(f.path, MaxICSFileBytes); err != nil || !bytes.Equal(now, f.raw) {
				return notDone("%s changed while Steward was deleting from it; nothing was deleted, try again", f.path)
			}
			if err := localsource.RemoveFile(f.path); err != nil {
				var pub *localsource.PublishedError
				if errors.As(err, &pub) {
					return err
				}
				return writeops.NotDone(err)
			}
			return nil
		}
		f.removeComponents(drop)
		return f.write()
	}
	at := *p.OccurrenceStart
	drop := map[*ical.Component]bool{}
	for _, c := range f.overrides(p.UID) {
		t, err := f.instant(c.Props.Get(ical.PropRecurrenceID), b.zone)
		if err != nil {
			continue
		}
		if p.Scope == ScopeThisEvent && sameOccurrence(t, at, f.form.allDay, b.zone) ||
			p.Scope == ScopeFutureEvents && onOrAfter(t, at, f.form.allDay, b.zone) {
			drop[c] = true
		}
	}
	f.removeComponents(drop)
	if p.Scope == ScopeThisEvent {
		f.master.Props.Add(ptr(f.form.prop(ical.PropExceptionDates, at, b.zone)))
	} else {
		cut, err := ruleUntil(f.item.RRule, at, f.form.allDay, f.form.floating, b.zone)
		if err != nil {
			return notDone("the series' rule cannot be cut: %w", err)
		}
		f.master.Props.Set(&ical.Prop{Name: ical.PropRecurrenceRule, Params: ical.Params{}, Value: cut})
		f.keepExdates(func(t time.Time) bool { return !onOrAfter(t, at, f.form.allDay, b.zone) }, b.zone)
	}
	stamp(f.master, now, true)
	return f.write()
}

// sameSpan compares two spans by their instants or civil dates.
func sameSpan(a, b span) bool {
	if a.AllDay || b.AllDay {
		return a.AllDay == b.AllDay && a.StartDate == b.StartDate && a.EndDate == b.EndDate
	}
	return a.Start.Equal(b.Start) && a.End.Equal(b.End)
}
