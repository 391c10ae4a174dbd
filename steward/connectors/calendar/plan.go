package calendar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/emersion/go-ical"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

// Operations a Plan performs.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Plan is one approved calendar write, resolved to its target: the complete
// executable input the journal keeps and the backend runs.
type Plan struct {
	Op     string `json:"op"`
	Target Target `json:"target"`
	// Backend is chosen before the plan is journaled (vdir, eventkit or
	// applescript) and never changes afterwards.
	Backend string `json:"backend"`
	// UID is the event's current UID (a create's new one, chosen before
	// journaling so that confirmation knows it even after a crash).
	UID string `json:"uid"`
	// Title names the event in summaries.
	Title string `json:"title"`
	// Path is the vdir file of the event (ics targets).
	Path string `json:"path,omitempty"`
	// Recurring says the event is a series; OccurrenceStart then selects one
	// occurrence and Scope says whether later ones follow.
	Recurring       bool       `json:"recurring,omitempty"`
	OccurrenceStart *time.Time `json:"occurrenceStart,omitempty"`
	Scope           string     `json:"scope,omitempty"`
	// FirstOccurrence: a futureEvents change from the first occurrence,
	// which is the whole series.
	FirstOccurrence bool `json:"firstOccurrence,omitempty"`
	// SeriesAllDay: the series is all-day, occurrences are civil dates.
	SeriesAllDay bool `json:"seriesAllDay,omitempty"`
	// Change holds the new values (everything, for a create).
	Change Change `json:"change"`
	// Before is the live time span the change was checked against (the
	// occurrence's, for an occurrence change); After is the span once the
	// change is applied.
	Before *span `json:"before,omitempty"`
	After  *span `json:"after,omitempty"`
	// NewUID and NewPath are the new series a futureEvents update splits off.
	NewUID  string `json:"newUid,omitempty"`
	NewPath string `json:"newPath,omitempty"`
	// Aliases are the event's earlier UIDs, Ref its index identity.
	Aliases []string `json:"aliases,omitempty"`
	Ref     string   `json:"ref,omitempty"`
	// Baseline is the index's view of the target before the write; a delete
	// is confirmed by absence only against it.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Params are the tool arguments as approved.
	Params any `json:"params"`
}

// Baseline is what the index showed before a write.
type Baseline struct {
	Ref        string `json:"ref"`
	Generation int64  `json:"generation"`
	// Present says the target (the occurrence, for an occurrence delete)
	// was indexed.
	Present bool `json:"present"`
}

// span of an Item.
func itemSpan(it *Item) span {
	return span{AllDay: it.AllDay, Start: it.Start, End: it.End, StartDate: it.StartDate, EndDate: it.EndDate, TZID: it.TZID}
}

// newUID returns a random UUID in the upper case calendar servers write.
func newUID() string { return strings.ToUpper(localsource.NewUUID()) }

// fileFor is the vdir file name of a new event: its UID, when that is a
// safe file name, else a random one.
func fileFor(dir, uid string) string {
	name := uid
	if strings.ContainsAny(name, "/\\:\x00") || strings.HasPrefix(name, ".") || len(name) > 200 {
		name = strings.ToLower(newUID())
	}
	return filepath.Join(dir, name+".ics")
}

// planCreate validates create_event's arguments and resolves its calendar.
func (w *Writer) planCreate(ctx context.Context, p CreateEventParams) (*Plan, *CreateEventParams, error) {
	title := strings.TrimSpace(p.Title)
	if title == "" {
		return nil, nil, errors.New("title is required")
	}
	all, err := w.targets(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := resolveTarget(all, p.CalendarID, p.Calendar)
	if err != nil {
		return nil, nil, err
	}
	ch := Change{Title: &title, Location: textPtr(&p.Location), Notes: textPtr(&p.Notes), URL: textPtr(&p.URL), AllDay: ptr(p.AllDay)}
	var s span
	norm := p
	norm.CalendarID, norm.Calendar, norm.Title = t.QualifiedID(), t.Title, title
	if p.AllDay {
		if s.StartDate, err = parseDate("start", p.Start); err != nil {
			return nil, nil, err
		}
		if s.EndDate, err = parseDate("end", p.End); err != nil {
			return nil, nil, err
		}
		s.AllDay = true
		ch.StartDate, ch.EndDate = &s.StartDate, &s.EndDate
		norm.Start, norm.End, norm.TimeZone = s.StartDate, s.EndDate, ""
	} else {
		zone, err := parseZone(nonEmpty(p.TimeZone, zoneName(w.zone)))
		if err != nil {
			return nil, nil, err
		}
		loc, _ := resolveTZID(zone)
		if zone == "UTC" {
			loc = time.UTC
		}
		start, err := parseInstant("start", p.Start)
		if err != nil {
			return nil, nil, err
		}
		end, err := parseInstant("end", p.End)
		if err != nil {
			return nil, nil, err
		}
		s.Start, s.End = start.In(loc), end.In(loc)
		if zone != "UTC" {
			s.TZID = zone
		}
		ch.Start, ch.End, ch.TimeZone = &s.Start, &s.End, &zone
		norm.Start, norm.End, norm.TimeZone = s.Start.Format(time.RFC3339), s.End.Format(time.RFC3339), zone
	}
	if s.AllDay && s.EndDate <= s.StartDate || !s.AllDay && !s.End.After(s.Start) {
		return nil, nil, fmt.Errorf("the event ends (%s) before or when it starts (%s); nothing was written", p.End, p.Start)
	}
	rule, err := normalizeRule(p.Recurrence)
	if err != nil {
		return nil, nil, err
	}
	ch.RRule, norm.Recurrence = &rule, rule
	alarms, err := normalizeAlarms(p.Alarms)
	if err != nil {
		return nil, nil, err
	}
	ch.Alarms, norm.Alarms = &alarms, alarms
	if len(alarms) == 0 {
		norm.Alarms = nil
	}
	plan := &Plan{Op: OpCreate, Target: t, Title: title, Change: ch, After: &s, Params: norm}
	if t.Kind == KindICS {
		// Steward names the event; Apple backends assign the UID themselves.
		plan.UID = newUID()
		plan.Path = fileFor(t.Dir, plan.UID)
	}
	return plan, &norm, nil
}

// located is an existing event: where the index and the live store have it.
type located struct {
	target  Target
	uid     string
	ref     string
	aliases []string
	path    string
	// baseline generation of the index when it was looked up
	generation int64
	// The live event: for ics targets parsed from its file.
	cal  *ical.Calendar
	item Item // the master as the reader sees it
}

// locate finds the event key names (UID, alias or ref): the index gives its
// calendar and file, the file gives its live state. An event not indexed yet
// (created since the last sync) is found by scanning the writable vdir
// folders for its UID.
func (w *Writer) locate(ctx context.Context, key string) (*located, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, errors.New("uid is required")
	}
	all, err := w.targets(ctx)
	if err != nil {
		return nil, err
	}
	l := &located{uid: key}
	idx, idxErr := w.index(ctx)
	if idxErr == nil {
		rows, err := idx.queryRows(ctx, `(uid = ? OR ref_id = ? OR ref_id IN (SELECT ref_id FROM uid_aliases WHERE uid = ?))
			AND recurrence_id IS NULL ORDER BY id`, key, key, key)
		if err != nil {
			return nil, err
		}
		if len(rows) > 1 {
			var where []string
			for _, r := range rows {
				where = append(where, fmt.Sprintf("%s in %s/%s", r.Ref, r.Source, r.CalendarID))
			}
			return nil, fmt.Errorf("%q names %d events (%s); pass the ref of the one to change", key, len(rows), strings.Join(where, ", "))
		}
		if len(rows) == 1 {
			r := rows[0]
			l.uid, l.ref, l.path = r.UID, r.Ref, r.SourcePath
			if st, err := idx.State(ctx); err == nil && st != nil {
				l.generation = st.Generation
			}
			l.aliases, _ = idx.aliasesOf(ctx, r.Ref)
			for _, t := range all {
				if t.Source == r.Source && t.CalendarID == r.CalendarID {
					l.target = t
				}
			}
			if l.target.Source == "" {
				return nil, fmt.Errorf("event %q is in calendar %s/%s, which the configuration no longer lists", key, r.Source, r.CalendarID)
			}
			l.item = Item{UID: r.UID, Title: r.Title, AllDay: r.AllDay, StartDate: r.StartDate, EndDate: r.EndDate, TZID: r.TZID,
				Floating: r.Floating, RRule: r.RRule, Start: time.Unix(r.StartAt, 0).In(w.zone), End: time.Unix(r.EndAt, 0).In(w.zone),
				Location: r.Location, Calendar: r.Calendar, CalendarID: r.CalendarID}
			json.Unmarshal([]byte(r.ExDates), &l.item.ExDates)
			json.Unmarshal([]byte(r.RDates), &l.item.RDates)
		}
	}
	if l.target.Source == "" {
		// Not indexed: look for the UID in the vdir folders.
		for _, t := range all {
			if t.Kind != KindICS || t.Dir == "" {
				continue
			}
			if p, _ := findUID(t.Dir, key); p != "" {
				l.target, l.path = t, p
				break
			}
		}
		if l.target.Source == "" {
			if idxErr != nil && !errors.Is(idxErr, ErrNoIndex) {
				return nil, fmt.Errorf("no event %q: %w", key, idxErr)
			}
			return nil, fmt.Errorf("%w: no event with uid, alias or ref %q (search_events shows them)", ErrNotFound, key)
		}
	}
	if l.target.NotWritable != "" {
		return nil, fmt.Errorf("event %q cannot be changed: %s", key, l.target.NotWritable)
	}
	if l.target.Kind == KindICS {
		if err := w.readLive(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// readLive parses the event's vdir file; when the index's file no longer
// holds the UID (vdirsyncer renamed it), the collection is searched.
func (w *Writer) readLive(l *located) error {
	for attempt := 0; attempt < 2; attempt++ {
		if l.path != "" {
			data, err := localsource.ReadBounded(l.path, MaxICSFileBytes)
			if err == nil {
				cal, master, err := parseEventFile(data, l.uid)
				if err == nil && master != nil {
					r := &icsReader{src: SourceConfig{Name: l.target.Source, Account: l.target.Account}, zone: w.zone, zones: newZoneResolver(), res: &SourceResult{}}
					it, err := r.event(master, l.path, l.target.CalendarID, l.target.Title, filepath.Base(l.path))
					if err != nil {
						return fmt.Errorf("event %q in %s cannot be read: %w", l.uid, l.path, err)
					}
					l.cal, l.item = cal, it
					return nil
				}
				if err != nil {
					return fmt.Errorf("event %q: %s is not a valid iCalendar file: %w", l.uid, l.path, err)
				}
			}
		}
		if attempt == 0 && l.target.Dir != "" {
			l.path, _ = findUID(l.target.Dir, l.uid)
		}
	}
	return fmt.Errorf("%w: event %q is no longer in %s (it may have been deleted or moved); run `steward calendar sync` and search again",
		ErrNotFound, l.uid, l.target.Dir)
}

// parseEventFile returns the calendar in data and the master VEVENT of uid
// (nil when the file does not hold it).
func parseEventFile(data []byte, uid string) (*ical.Calendar, *ical.Component, error) {
	cals, err := decodeCalendars(data)
	if err != nil {
		return nil, nil, err
	}
	if len(cals) != 1 {
		return nil, nil, fmt.Errorf("the file holds %d calendars; Steward only rewrites single-calendar files", len(cals))
	}
	for _, c := range cals[0].Children {
		if c.Name == ical.CompEvent && c.Props.Get(ical.PropRecurrenceID) == nil {
			if v, _ := c.Props.Text(ical.PropUID); strings.TrimSpace(v) == uid {
				return cals[0], c, nil
			}
		}
	}
	return cals[0], nil, nil
}

// findUID returns the .ics file of dir whose content names uid.
func findUID(dir, uid string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	needle := []byte("UID:" + uid)
	for i, e := range entries {
		if i >= maxICSFiles {
			break
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || !strings.EqualFold(filepath.Ext(e.Name()), ".ics") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := localsource.ReadBounded(p, MaxICSFileBytes)
		if err != nil || !bytes.Contains(unfold(data), needle) {
			continue
		}
		if _, m, err := parseEventFile(data, uid); err == nil && m != nil {
			return p, nil
		}
	}
	return "", nil
}

// unfold joins folded content lines.
func unfold(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n "), nil)
	b = bytes.ReplaceAll(b, []byte("\r\n\t"), nil)
	return bytes.ReplaceAll(b, []byte("\n "), nil)
}

// aliasesOf lists the earlier UIDs of ref.
func (x *Index) aliasesOf(ctx context.Context, ref string) ([]string, error) {
	rows, err := x.db.QueryContext(ctx, `SELECT uid FROM uid_aliases WHERE ref_id = ? ORDER BY first_seen, uid`, ref)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// recurring reports whether the item is a series.
func (it *Item) recurring() bool { return it.RRule != "" || len(it.RDates) > 0 }

// occurrence resolves occurrenceStart against a series: the occurrence's
// original start (a civil date at midnight in the display zone for all-day
// series) and its live span (its detached version's, when one exists).
func (w *Writer) occurrence(l *located, v string) (time.Time, span, error) {
	at, err := parseOccurrence(v, w.zone)
	if err != nil {
		return at, span{}, err
	}
	it := &l.item
	dur := it.End.Sub(it.Start)
	days := 0
	if it.AllDay {
		s, _ := time.Parse(time.DateOnly, it.StartDate)
		e, _ := time.Parse(time.DateOnly, it.EndDate)
		days = int(e.Sub(s).Hours()/24 + 0.5)
		at = dateInZone(civilOf(at, w.zone), w.zone)
	}
	occSpan := func(start time.Time) span {
		s := span{AllDay: it.AllDay, TZID: it.TZID}
		if it.AllDay {
			d := civilOf(start, w.zone)
			s.StartDate, s.EndDate = d.Format(time.DateOnly), d.AddDate(0, 0, days).Format(time.DateOnly)
			s.Start, s.End = dateInZone(d, w.zone), dateInZone(d.AddDate(0, 0, days), w.zone)
			return s
		}
		s.Start, s.End = start, start.Add(dur)
		return s
	}
	if l.cal != nil {
		if ov := w.override(l, at); ov != nil {
			r := &icsReader{src: SourceConfig{Name: l.target.Source}, zone: w.zone, zones: newZoneResolver(), res: &SourceResult{}}
			if oi, err := r.event(ov, l.path, l.target.CalendarID, l.target.Title, ""); err == nil {
				return at, itemSpan(&oi), nil
			}
		}
	}
	rule, err := rrule.Parse(it.RRule)
	if err != nil {
		return at, span{}, fmt.Errorf("event %q repeats by a rule Steward cannot read (%v)", it.Title, err)
	}
	first, err := seriesStart(it.AllDay, it.StartDate, it.Start, it.TZID, it.Floating, w.zone)
	if err != nil {
		return at, span{}, err
	}
	probe := at
	if it.AllDay {
		probe = civilOf(at, w.zone)
	}
	list, err := rule.Between(first, probe.Add(-time.Second), probe.Add(time.Second), 10)
	if err != nil {
		return at, span{}, err
	}
	excluded := false
	inst, dates := parseDateList(jsonList(it.ExDates))
	if it.AllDay {
		excluded = dates[probe.Format(time.DateOnly)]
	} else {
		excluded = inst[at.Unix()]
	}
	for _, o := range list {
		if o.Equal(probe) && !excluded {
			return at, occSpan(at), nil
		}
	}
	return at, span{}, fmt.Errorf("%w: event %q has no occurrence starting at %s (search_events lists the occurrences with their occurrenceStart)",
		ErrNotFound, it.Title, at.In(w.zone).Format(time.RFC3339))
}

// override returns the detached VEVENT replacing the occurrence at, if any.
func (w *Writer) override(l *located, at time.Time) *ical.Component {
	r := &icsReader{zone: w.zone, zones: newZoneResolver()}
	for _, c := range l.cal.Children {
		if c.Name != ical.CompEvent {
			continue
		}
		rid := c.Props.Get(ical.PropRecurrenceID)
		if uid, _ := c.Props.Text(ical.PropUID); rid == nil || strings.TrimSpace(uid) != l.uid {
			continue
		}
		t, allDay, _, _, err := r.dateTime(rid)
		if err != nil {
			continue
		}
		if allDay {
			t = dateInZone(t, w.zone)
		}
		if t.Equal(at) {
			return c
		}
	}
	return nil
}

// isFirst reports whether at is the series' first occurrence.
func (w *Writer) isFirst(it *Item, at time.Time) bool {
	if it.AllDay {
		return civilOf(at, w.zone).Format(time.DateOnly) == it.StartDate
	}
	return at.Equal(it.Start)
}

// planUpdate validates update_event's arguments against the live event.
func (w *Writer) planUpdate(ctx context.Context, p UpdateEventParams) (*Plan, *UpdateEventParams, error) {
	l, err := w.locate(ctx, p.UID)
	if err != nil {
		return nil, nil, err
	}
	scope, err := normalizeScope(p.Scope)
	if err != nil {
		return nil, nil, err
	}
	norm := p
	norm.UID, norm.Scope = l.uid, scope
	plan := &Plan{Op: OpUpdate, Target: l.target, UID: l.uid, Title: l.item.Title, Path: l.path, Aliases: l.aliases, Ref: l.ref,
		Recurring: l.item.recurring(), Scope: scope, SeriesAllDay: l.item.AllDay}
	live := itemSpan(&l.item)
	if plan.Recurring {
		if strings.TrimSpace(p.OccurrenceStart) == "" {
			return nil, nil, fmt.Errorf("event %q repeats: pass occurrenceStart (from search_events) and scope thisEvent or futureEvents", l.item.Title)
		}
		at, occ, err := w.occurrence(l, p.OccurrenceStart)
		if err != nil {
			return nil, nil, err
		}
		plan.OccurrenceStart, live = &at, occ
		plan.FirstOccurrence = scope == ScopeFutureEvents && w.isFirst(&l.item, at)
		norm.OccurrenceStart = at.In(w.zone).Format(time.RFC3339)
	} else {
		if strings.TrimSpace(p.OccurrenceStart) != "" {
			return nil, nil, fmt.Errorf("event %q does not repeat; leave occurrenceStart out", l.item.Title)
		}
		plan.Scope, norm.Scope = "", ""
	}
	ch := Change{Title: textPtr(p.Title), Location: textPtr(p.Location), Notes: textPtr(p.Notes), URL: textPtr(p.URL), AllDay: p.AllDay}
	if ch.Title != nil && *ch.Title == "" {
		return nil, nil, errors.New("title cannot be empty")
	}
	allDay := live.AllDay
	if p.AllDay != nil {
		allDay = *p.AllDay
	}
	if p.TimeZone != nil {
		z, err := parseZone(*p.TimeZone)
		if err != nil {
			return nil, nil, err
		}
		ch.TimeZone, norm.TimeZone = &z, &z
	}
	// bound reads a changed start or end: a date for an all-day event, else an
	// instant, with the form the approval card shows.
	bound := func(field, v string) (date *string, at *time.Time, shown *string, err error) {
		if allDay {
			d, err := parseDate(field, v)
			if err != nil {
				return nil, nil, nil, err
			}
			return &d, nil, &d, nil
		}
		t, err := parseInstant(field, v)
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, &t, ptr(t.In(w.zone).Format(time.RFC3339)), nil
	}
	if p.Start != nil {
		if ch.StartDate, ch.Start, norm.Start, err = bound("start", *p.Start); err != nil {
			return nil, nil, err
		}
	}
	if p.End != nil {
		if ch.EndDate, ch.End, norm.End, err = bound("end", *p.End); err != nil {
			return nil, nil, err
		}
	}
	if p.Alarms != nil {
		a, err := normalizeAlarms(*p.Alarms)
		if err != nil {
			return nil, nil, err
		}
		ch.Alarms, norm.Alarms = &a, &a
	}
	if p.Recurrence != nil {
		if plan.Recurring && scope != ScopeFutureEvents {
			return nil, nil, errors.New("the recurrence of a series changes with scope futureEvents (from the chosen occurrence on)")
		}
		rule, err := normalizeRule(*p.Recurrence)
		if err != nil {
			return nil, nil, err
		}
		ch.RRule, norm.Recurrence = &rule, &rule
	}
	if (ch == Change{}) {
		return nil, nil, errors.New("nothing to change: give at least one field to update")
	}
	after, err := live.apply(&ch)
	if err != nil {
		return nil, nil, fmt.Errorf("%w; nothing was written", err)
	}
	plan.Before, plan.After, plan.Change = &live, &after, ch
	if plan.Recurring && scope == ScopeFutureEvents && !plan.FirstOccurrence && l.target.Kind == KindICS {
		// The split-off series' UID; EventKit assigns its own and returns it.
		plan.NewUID = newUID()
		plan.NewPath = fileFor(l.target.Dir, plan.NewUID)
	}
	plan.Baseline = &Baseline{Ref: l.ref, Generation: l.generation, Present: l.ref != ""}
	plan.Params = norm
	return plan, &norm, nil
}

// planDelete validates delete_event's arguments against the live event.
func (w *Writer) planDelete(ctx context.Context, p DeleteEventParams) (*Plan, *DeleteEventParams, error) {
	l, err := w.locate(ctx, p.UID)
	if err != nil {
		return nil, nil, err
	}
	scope, err := normalizeScope(p.Scope)
	if err != nil {
		return nil, nil, err
	}
	norm := p
	norm.UID, norm.Scope = l.uid, scope
	plan := &Plan{Op: OpDelete, Target: l.target, UID: l.uid, Title: l.item.Title, Path: l.path, Aliases: l.aliases, Ref: l.ref,
		Recurring: l.item.recurring(), Scope: scope, SeriesAllDay: l.item.AllDay}
	if plan.Recurring {
		if strings.TrimSpace(p.OccurrenceStart) == "" {
			return nil, nil, fmt.Errorf("event %q repeats: pass occurrenceStart (from search_events) with scope thisEvent, or the first occurrence with scope futureEvents to delete the whole series", l.item.Title)
		}
		at, _, err := w.occurrence(l, p.OccurrenceStart)
		if err != nil {
			return nil, nil, err
		}
		plan.OccurrenceStart = &at
		plan.FirstOccurrence = scope == ScopeFutureEvents && w.isFirst(&l.item, at)
		norm.OccurrenceStart = at.In(w.zone).Format(time.RFC3339)
	} else {
		if strings.TrimSpace(p.OccurrenceStart) != "" {
			return nil, nil, fmt.Errorf("event %q does not repeat; leave occurrenceStart out", l.item.Title)
		}
		plan.Scope, norm.Scope = "", ""
	}
	plan.Baseline = &Baseline{Ref: l.ref, Generation: l.generation, Present: l.ref != ""}
	plan.Params = norm
	return plan, &norm, nil
}
