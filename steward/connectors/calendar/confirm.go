package calendar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
	"github.com/agentstack/agentstack/steward/writeops"
)

// metaSyncStarted is the meta key holding when the last published sync
// started, in Unix milliseconds.
const metaSyncStarted = "sync_started_ms"

// Expected is the observable outcome of a calendar write, kept in the
// journal for confirmation (spec: "Confirmation Evidence And Retry
// Boundaries").
type Expected struct {
	Op         string   `json:"op"`
	Backend    string   `json:"backend"`
	Source     string   `json:"source"`
	CalendarID string   `json:"calendarId"`
	UID        string   `json:"uid,omitempty"`
	Aliases    []string `json:"aliases,omitempty"`
	Ref        string   `json:"ref,omitempty"`
	// OccurrenceStart and Scope select part of a series; SeriesAllDay says
	// occurrences are compared by civil date.
	OccurrenceStart *time.Time `json:"occurrenceStart,omitempty"`
	Scope           string     `json:"scope,omitempty"`
	FirstOccurrence bool       `json:"firstOccurrence,omitempty"`
	SeriesAllDay    bool       `json:"seriesAllDay,omitempty"`
	// Fields are the supplied values the event must show afterwards.
	Fields *Fields `json:"fields,omitempty"`
	// NewUID is the series a futureEvents update splits off.
	NewUID   string    `json:"newUid,omitempty"`
	Baseline *Baseline `json:"baseline,omitempty"`
}

// Fields are expected event values; nil ones were not supplied and are
// not compared.
type Fields struct {
	Title     *string    `json:"title,omitempty"`
	Location  *string    `json:"location,omitempty"`
	Notes     *string    `json:"notes,omitempty"`
	URL       *string    `json:"url,omitempty"`
	AllDay    *bool      `json:"allDay,omitempty"`
	Start     *time.Time `json:"start,omitempty"`
	End       *time.Time `json:"end,omitempty"`
	StartDate *string    `json:"startDate,omitempty"`
	EndDate   *string    `json:"endDate,omitempty"`
	Alarms    *[]int     `json:"alarms,omitempty"`
	RRule     *string    `json:"rrule,omitempty"`
}

// expectation derives what confirmation looks for from a plan.
func (p *Plan) expectation() *Expected {
	e := &Expected{Op: p.Op, Backend: p.Backend, Source: p.Target.Source, CalendarID: p.Target.CalendarID, UID: p.UID,
		Aliases: p.Aliases, Ref: p.Ref, OccurrenceStart: p.OccurrenceStart, Scope: p.Scope, FirstOccurrence: p.FirstOccurrence,
		NewUID: p.NewUID, Baseline: p.Baseline, SeriesAllDay: p.SeriesAllDay}
	if p.Op == OpDelete {
		return e
	}
	c := p.Change
	f := &Fields{Title: c.Title, Location: c.Location, Notes: c.Notes, URL: c.URL, Alarms: c.Alarms, RRule: c.RRule}
	if (c.timesChanged() || p.Op == OpCreate) && p.After != nil {
		f.AllDay = &p.After.AllDay
		if p.After.AllDay {
			f.StartDate, f.EndDate = &p.After.StartDate, &p.After.EndDate
		} else {
			f.Start, f.End = &p.After.Start, &p.After.End
		}
	}
	e.Fields = f
	return e
}

// ConfirmerOptions configure a Confirmer.
type ConfirmerOptions struct {
	// Index opens the calendar index (read-only is enough).
	Index func(ctx context.Context) (*Index, error)
	// Zone is the display zone (default: the one the index recorded).
	Zone *time.Location
	// StaleStarted bounds when a write whose caller crashed before
	// recording its outcome can have completed (writeops.DefaultStaleStarted).
	StaleStarted time.Duration
}

// Confirmer checks journaled calendar writes against the synchronised index.
// It implements writeops.Confirmer for the calendar kinds.
type Confirmer struct{ opts ConfirmerOptions }

// NewConfirmer returns a Confirmer.
func NewConfirmer(opts ConfirmerOptions) *Confirmer {
	if opts.StaleStarted <= 0 {
		opts.StaleStarted = writeops.DefaultStaleStarted
	}
	return &Confirmer{opts: opts}
}

// Evidence is what a confirmation check looked at.
type Evidence struct {
	SyncGeneration int64     `json:"syncGeneration,omitempty"`
	SyncStartedAt  time.Time `json:"syncStartedAt,omitzero"`
	SyncComplete   bool      `json:"syncComplete"`
	BackendDoneBy  time.Time `json:"backendDoneBy,omitzero"`
	Ref            string    `json:"ref,omitempty"`
	Matched        []string  `json:"matched,omitempty"`
	Mismatches     []string  `json:"mismatches,omitempty"`
}

// doneBy is the latest instant the backend can have completed op.
func (c *Confirmer) doneBy(op writeops.Operation) time.Time {
	if !op.ReturnedAt.IsZero() {
		return op.ReturnedAt
	}
	var out Outcome
	if len(op.Result) > 0 && json.Unmarshal(op.Result, &out) == nil && !out.CompletedAt.IsZero() {
		return out.CompletedAt
	}
	// The caller crashed before recording the outcome: the backend call
	// (at most the bridge's 30 s wait) ended before the row went stale.
	at := op.AttemptedAt
	if at.IsZero() {
		at = op.CreatedAt
	}
	return at.Add(c.opts.StaleStarted)
}

// Confirm looks in the index for evidence of op.
func (c *Confirmer) Confirm(ctx context.Context, op writeops.Operation) (writeops.Check, error) {
	var e Expected
	if err := json.Unmarshal(op.Expected, &e); err != nil || e.Op == "" {
		return writeops.Check{Note: "the journal holds no expected outcome for this write", Exhaust: true}, nil
	}
	var out Outcome
	if len(op.Result) > 0 {
		json.Unmarshal(op.Result, &out)
	}
	if e.Op == OpCreate && e.UID == "" && out.UID == "" && op.State == writeops.StateFailed {
		return writeops.Check{Note: "the create failed and returned no identity to look for", Exhaust: true}, nil
	}
	if e.UID == "" {
		e.UID = out.UID
	}
	if e.NewUID == "" {
		e.NewUID = out.NewUID
	}
	idx, err := c.opts.Index(ctx)
	if err != nil {
		return writeops.Check{}, fmt.Errorf("open calendar index: %w", err)
	}
	ev := &Evidence{BackendDoneBy: c.doneBy(op)}
	st, err := idx.State(ctx)
	if err != nil {
		return writeops.Check{}, err
	}
	if st == nil {
		return writeops.Check{Note: "the calendar index has not been synced yet", Evidence: ev}, nil
	}
	started, legacy, err := idx.syncStarted(ctx)
	if err != nil {
		return writeops.Check{}, err
	}
	ev.SyncGeneration, ev.SyncStartedAt, ev.SyncComplete = st.Generation, started, st.Complete
	fresh := started.After(ev.BackendDoneBy)
	if legacy {
		// A second-resolution marker: one extra second of margin.
		fresh = st.CompletedAt.After(ev.BackendDoneBy.Truncate(time.Second).Add(time.Second))
	}
	if !fresh {
		return writeops.Check{Note: "waiting for a calendar sync that starts after the write (the last one started " +
			started.Format(time.RFC3339Nano) + ")", Evidence: ev}, nil
	}
	zone := c.opts.Zone
	if zone == nil {
		zone = idx.zone(ctx)
	}
	chk := &checker{idx: idx, e: &e, ev: ev, gen: st.Generation, zone: zone}
	ok, note, err := chk.run(ctx, st.Complete)
	if err != nil {
		return writeops.Check{}, err
	}
	return writeops.Check{Confirmed: ok, Note: note, Evidence: ev}, nil
}

// syncStarted returns when the last published sync started; legacy is true
// for an index whose sync predates the millisecond marker (its completion
// second is all there is).
func (x *Index) syncStarted(ctx context.Context) (time.Time, bool, error) {
	v, err := x.meta(ctx, x.db, metaSyncStarted)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read sync start: %w", err)
	}
	if v == "" {
		return time.Time{}, true, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read sync start %q: %w", v, err)
	}
	return time.UnixMilli(ms).UTC(), false, nil
}

type checker struct {
	idx  *Index
	e    *Expected
	ev   *Evidence
	gen  int64
	zone *time.Location
}

// identities returns the master rows that carry the UID, one of its aliases
// or the ref.
func (c *checker) identities(ctx context.Context, uid string, aliases []string, ref string) ([]*eventRow, error) {
	keys := append([]string{uid}, aliases...)
	keys = slices.DeleteFunc(keys, func(s string) bool { return s == "" })
	if len(keys) == 0 && ref == "" {
		return nil, nil
	}
	ph := strings.TrimSuffix(strings.Repeat("?,", len(keys)), ",")
	args := []any{}
	for _, k := range keys {
		args = append(args, k)
	}
	where := `recurrence_id IS NULL AND (ref_id = ?`
	args = append([]any{ref}, args...)
	if len(keys) > 0 {
		where += ` OR uid IN (` + ph + `) OR ref_id IN (SELECT ref_id FROM uid_aliases WHERE uid IN (` + ph + `))`
		for _, k := range keys {
			args = append(args, k)
		}
	}
	return c.idx.queryRows(ctx, where+`) ORDER BY id`, args...)
}

func (c *checker) run(ctx context.Context, complete bool) (bool, string, error) {
	e := c.e
	rows, err := c.identities(ctx, e.UID, e.Aliases, e.Ref)
	if err != nil {
		return false, "", err
	}
	rows = slices.DeleteFunc(rows, func(r *eventRow) bool { return r.Source != e.Source || r.CalendarID != e.CalendarID })
	if e.Op == OpDelete {
		return c.deleted(ctx, rows, complete)
	}
	if e.Op == OpCreate && e.UID == "" {
		// No UID came back: exactly one candidate among the events of the
		// calendar that start at the expected time with the expected title.
		if e.Fields == nil || e.Fields.Title == nil {
			return false, "no identity and no title to look for", nil
		}
		start := int64(0)
		if e.Fields.Start != nil {
			start = e.Fields.Start.Unix()
		} else if e.Fields.StartDate != nil {
			start = dateInZone(mustDate(*e.Fields.StartDate), c.zone).Unix()
		}
		cands, err := c.idx.queryRows(ctx, `recurrence_id IS NULL AND source = ? AND calendar_id = ? AND start_at = ? AND title = ? LIMIT 20`,
			e.Source, e.CalendarID, start, *e.Fields.Title)
		if err != nil {
			return false, "", err
		}
		if len(cands) != 1 {
			return false, fmt.Sprintf("%d candidate events match the create without a returned UID; exactly one is needed", len(cands)), nil
		}
		rows = cands
	}
	if len(rows) == 0 {
		return false, "the event is not in the index yet", nil
	}
	if len(rows) > 1 {
		return false, fmt.Sprintf("%d indexed events carry this identity; ambiguous", len(rows)), nil
	}
	master := rows[0]
	c.ev.Ref = master.Ref
	if master.SeenGeneration != c.gen {
		return false, "the event's source was not read by the last sync", nil
	}
	switch {
	case e.Op == OpCreate, e.OccurrenceStart == nil, e.FirstOccurrence:
		return c.compare(master, e.Fields)
	case e.Scope == ScopeThisEvent:
		rows, err := c.idx.queryRows(ctx, `parent_ref = ? AND recurrence_id = ?`, master.Ref, e.OccurrenceStart.Unix())
		if err != nil {
			return false, "", err
		}
		if len(rows) != 1 {
			return false, fmt.Sprintf("%d detached occurrences at %s in the index; exactly one is needed", len(rows), e.OccurrenceStart.Format(time.RFC3339)), nil
		}
		return c.compare(rows[0], e.Fields)
	default: // futureEvents split
		if ok, note := c.cutBefore(master); !ok {
			return false, note, nil
		}
		next, err := c.identities(ctx, e.NewUID, nil, "")
		if err != nil {
			return false, "", err
		}
		if len(next) != 1 {
			return false, fmt.Sprintf("%d indexed series with the new UID %s; exactly one is needed", len(next), e.NewUID), nil
		}
		if next[0].RRule == "" || next[0].Problem != "" {
			return false, "the new series does not repeat by a supported rule", nil
		}
		return c.compare(next[0], e.Fields)
	}
}

// cutBefore checks that a series ends before the selected occurrence.
func (c *checker) cutBefore(master *eventRow) (bool, string) {
	at := *c.e.OccurrenceStart
	r, err := rrule.Parse(master.RRule)
	if err != nil || master.Problem != "" {
		return false, "the series no longer has a supported rule"
	}
	first, err := seriesStart(master.AllDay, master.StartDate, time.Unix(master.StartAt, 0), master.TZID, master.Floating, c.zone)
	if err != nil {
		return false, err.Error()
	}
	probe := at
	if master.AllDay {
		probe = civilOf(at, c.zone)
	}
	later, err := r.Between(first, probe.Add(-time.Second), probe.Add(400*24*time.Hour), 1)
	if err != nil && !errors.Is(err, rrule.ErrTooMany) || len(later) > 0 {
		return false, "the original series still has occurrences from " + at.In(c.zone).Format(time.RFC3339)
	}
	c.ev.Matched = append(c.ev.Matched, "series ends before "+at.In(c.zone).Format(time.RFC3339))
	return true, ""
}

// deleted checks absence against the pre-write baseline.
func (c *checker) deleted(ctx context.Context, rows []*eventRow, complete bool) (bool, string, error) {
	e := c.e
	if e.Baseline == nil || !e.Baseline.Present {
		return false, "no pre-write baseline: the event was not indexed before the delete, so its absence proves nothing", nil
	}
	if !complete {
		return false, "the last sync was partial; absence from it is not evidence of deletion", nil
	}
	if e.OccurrenceStart == nil || e.FirstOccurrence {
		if len(rows) > 0 {
			return false, "the event is still in the index", nil
		}
		c.ev.Matched = append(c.ev.Matched, "absent after a complete sync")
		return true, "", nil
	}
	if len(rows) != 1 {
		return false, fmt.Sprintf("%d indexed series carry this identity; exactly one is needed", len(rows)), nil
	}
	master := rows[0]
	c.ev.Ref = master.Ref
	at := *e.OccurrenceStart
	if e.Scope == ScopeFutureEvents {
		if ok, note := c.cutBefore(master); !ok {
			return false, note, nil
		}
		n := 0
		if err := c.idx.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE parent_ref = ? AND recurrence_id >= ?`, master.Ref, at.Unix()).Scan(&n); err != nil {
			return false, "", err
		}
		if n > 0 {
			return false, fmt.Sprintf("%d detached occurrences from %s remain", n, at.Format(time.RFC3339)), nil
		}
		return true, "", nil
	}
	inst, dates := parseDateList(master.ExDates)
	excluded := inst[at.Unix()]
	if master.AllDay {
		excluded = dates[civilOf(at, c.zone).Format(time.DateOnly)]
	}
	if !excluded {
		return false, "the occurrence is not excluded from the series yet", nil
	}
	n := 0
	if err := c.idx.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE parent_ref = ? AND recurrence_id = ?`, master.Ref, at.Unix()).Scan(&n); err != nil {
		return false, "", err
	}
	if n > 0 {
		return false, "a detached version of the occurrence remains", nil
	}
	c.ev.Matched = append(c.ev.Matched, "occurrence excluded")
	return true, "", nil
}

// compare checks the supplied fields on an indexed row: text exactly, timed
// values as instants, all-day values as civil dates, alarms as sorted
// offsets, rules by their canonical form.
func (c *checker) compare(r *eventRow, f *Fields) (bool, string, error) {
	c.ev.Ref = r.Ref
	if f == nil {
		return true, "", nil
	}
	var miss []string
	check := func(name string, ok bool, got, want any) {
		if ok {
			c.ev.Matched = append(c.ev.Matched, name)
		} else {
			miss = append(miss, fmt.Sprintf("%s is %v, expected %v", name, got, want))
		}
	}
	text := func(name string, want *string, got string) {
		if want != nil {
			check(name, strings.TrimSpace(got) == *want, strconv.Quote(got), strconv.Quote(*want))
		}
	}
	text("title", f.Title, r.Title)
	text("location", f.Location, r.Location)
	text("notes", f.Notes, r.Notes)
	text("url", f.URL, r.URL)
	if f.AllDay != nil {
		check("allDay", r.AllDay == *f.AllDay, r.AllDay, *f.AllDay)
	}
	if f.StartDate != nil {
		check("startDate", r.AllDay && r.StartDate == *f.StartDate, r.StartDate, *f.StartDate)
	}
	if f.EndDate != nil {
		check("endDate", r.AllDay && r.EndDate == *f.EndDate, r.EndDate, *f.EndDate)
	}
	if f.Start != nil {
		check("start", !r.AllDay && r.StartAt == f.Start.Unix(), time.Unix(r.StartAt, 0).In(c.zone).Format(time.RFC3339), f.Start.In(c.zone).Format(time.RFC3339))
	}
	if f.End != nil {
		check("end", !r.AllDay && r.EndAt == f.End.Unix(), time.Unix(r.EndAt, 0).In(c.zone).Format(time.RFC3339), f.End.In(c.zone).Format(time.RFC3339))
	}
	if f.Alarms != nil {
		got, err := alarmOffsets(r.Alarms)
		check("alarms", err == nil && slices.Equal(got, *f.Alarms), got, *f.Alarms)
	}
	if f.RRule != nil {
		ok := false
		switch {
		case *f.RRule == "":
			ok = r.RRule == ""
		case r.RRule != "" && r.Problem == "":
			want, err1 := rrule.Parse(*f.RRule)
			got, err2 := rrule.Parse(r.RRule)
			start := time.Unix(r.StartAt, 0)
			if s, err := seriesStart(r.AllDay, r.StartDate, start, r.TZID, r.Floating, c.zone); err == nil {
				start = s
			}
			ok = err1 == nil && err2 == nil && (rrule.Equal(want, got) || rrule.Equivalent(want, got, start))
		}
		check("rrule", ok, r.Canonical, *f.RRule)
	}
	if len(miss) > 0 {
		c.ev.Mismatches = miss
		return false, "the indexed event differs: " + strings.Join(miss, "; "), nil
	}
	return true, "", nil
}

// alarmOffsets turns indexed alarms into sorted minutes before the start;
// an absolute alarm makes the list incomparable.
func alarmOffsets(stored string) ([]int, error) {
	var as []Alarm
	if err := json.Unmarshal([]byte(stored), &as); err != nil {
		return nil, err
	}
	out := []int{}
	for _, a := range as {
		if a.OffsetMinutes == nil {
			return nil, errors.New("absolute alarm")
		}
		out = append(out, int(-*a.OffsetMinutes))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func mustDate(s string) time.Time {
	t, _ := time.Parse(time.DateOnly, s)
	return t
}
