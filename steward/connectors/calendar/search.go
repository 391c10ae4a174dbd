package calendar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentstack/agentstack/search/vecindex"
	"github.com/agentstack/agentstack/steward/connectors/calendar/rrule"
)

// Limits and defaults of the read tools (spec: Calendar Search).
const (
	DefaultLimit      = 10
	MaxLimit          = 50
	MaxWindowDays     = 366
	MaxOccurrences    = 1000
	DefaultDaysBack   = 30
	DefaultDaysAhead  = 90
	LexicalCandidates = 500
	VectorCandidates  = 50
	maxNotesChars     = 20_000
)

// ErrWindowTooLarge and ErrTooManyOccurrences make range reads fail
// explicitly instead of silently truncating availability.
var (
	ErrWindowTooLarge     = errors.New("time window too large")
	ErrTooManyOccurrences = errors.New("too many occurrences")
)

// Service answers the calendar read tools from an index.
type Service struct {
	idx  *Index
	emb  Embedder
	now  func() time.Time
	zone *time.Location
}

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// Embedder embeds free-text queries for hybrid ranking; nil means lexical only.
	Embedder Embedder
	// Now replaces time.Now (for the default window).
	Now func() time.Time
	// Zone overrides the display zone recorded by the last sync.
	Zone *time.Location
}

// NewService returns the read tools over idx.
func NewService(ctx context.Context, idx *Index, opts ServiceOptions) *Service {
	s := &Service{idx: idx, emb: opts.Embedder, now: opts.Now, zone: opts.Zone}
	if s.now == nil {
		s.now = time.Now
	}
	if s.zone == nil {
		s.zone = idx.zone(ctx)
	}
	return s
}

// SearchParams are the arguments of search_events. All given constraints
// are ANDed.
type SearchParams struct {
	Query    string `json:"query,omitempty" jsonschema:"free text matched against title, location, notes and calendar"`
	Start    string `json:"start,omitempty" jsonschema:"window start, RFC 3339 (e.g. 2026-05-04T00:00:00+02:00)"`
	End      string `json:"end,omitempty" jsonschema:"window end (exclusive), RFC 3339; at most 366 days after start"`
	Account  string `json:"account,omitempty" jsonschema:"only events of this account"`
	Calendar string `json:"calendar,omitempty" jsonschema:"only events of this calendar (title or id)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"results per page, default 10, at most 50"`
	Offset   int    `json:"offset,omitempty" jsonschema:"results to skip, for the next page"`
}

// EventSummary is one compact search result; recurring events appear once
// per occurrence with OccurrenceStart set.
type EventSummary struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind            string  `json:"kind"`
	UID             string  `json:"uid"`
	Ref             string  `json:"ref"`
	Title           string  `json:"title"`
	Start           string  `json:"start"`
	End             string  `json:"end"`
	AllDay          bool    `json:"allDay,omitempty"`
	StartDate       string  `json:"startDate,omitempty"`
	EndDate         string  `json:"endDate,omitempty"`
	OccurrenceStart string  `json:"occurrenceStart,omitempty"`
	Recurring       bool    `json:"recurring,omitempty"`
	Location        string  `json:"location,omitempty"`
	Calendar        string  `json:"calendar"`
	Account         string  `json:"account"`
	Status          string  `json:"status,omitempty"`
	Free            bool    `json:"free,omitempty"`
	Score           float64 `json:"score,omitempty"`
}

// SearchResult is one page of search_events.
type SearchResult struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind string `json:"kind"`
	// Mode is "window" (occurrences in a time range) or "entity" (stored
	// events ranked by relevance, no window).
	Mode        string         `json:"mode"`
	Ranking     string         `json:"ranking"` // chronological, lexical or hybrid
	WindowStart string         `json:"windowStart,omitempty"`
	WindowEnd   string         `json:"windowEnd,omitempty"`
	Total       int            `json:"total"`
	Offset      int            `json:"offset"`
	Limit       int            `json:"limit"`
	NextOffset  *int           `json:"nextOffset,omitempty"`
	Events      []EventSummary `json:"events"`
	Warnings    []string       `json:"warnings,omitempty"`
}

// window resolves explicit or default bounds.
func (s *Service) window(startArg, endArg string, defaultIfEmpty bool) (time.Time, time.Time, bool, error) {
	parse := func(name, v string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			return t, fmt.Errorf("%s %q is not an RFC 3339 time such as 2026-05-04T09:00:00+02:00", name, v)
		}
		return t, nil
	}
	var start, end time.Time
	var err error
	switch {
	case startArg == "" && endArg == "":
		if !defaultIfEmpty {
			return start, end, false, nil
		}
		now := s.now()
		return now.AddDate(0, 0, -DefaultDaysBack), now.AddDate(0, 0, DefaultDaysAhead), true, nil
	case startArg != "" && endArg != "":
		if start, err = parse("start", startArg); err != nil {
			return start, end, false, err
		}
		if end, err = parse("end", endArg); err != nil {
			return start, end, false, err
		}
	case startArg != "":
		if start, err = parse("start", startArg); err != nil {
			return start, end, false, err
		}
		end = start.AddDate(0, 0, DefaultDaysAhead)
	default:
		if end, err = parse("end", endArg); err != nil {
			return start, end, false, err
		}
		start = end.AddDate(0, 0, -DefaultDaysBack)
	}
	if !end.After(start) {
		return start, end, false, fmt.Errorf("end %s must be after start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	if end.Sub(start) > MaxWindowDays*24*time.Hour {
		return start, end, false, fmt.Errorf("%w: %.0f days between start and end, the limit is %d; narrow the window",
			ErrWindowTooLarge, end.Sub(start).Hours()/24, MaxWindowDays)
	}
	return start, end, true, nil
}

func clampLimit(limit, offset int) (int, int, error) {
	if offset < 0 {
		return 0, 0, errors.New("offset must not be negative")
	}
	if limit < 0 {
		return 0, 0, errors.New("limit must not be negative")
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	return min(limit, MaxLimit), offset, nil
}

// matchesFilter applies the account and calendar constraints.
func matchesFilter(e *eventRow, account, calendar string) bool {
	if account != "" && !strings.EqualFold(e.Account, account) && !strings.EqualFold(e.Source, account) {
		return false
	}
	if calendar != "" && !strings.EqualFold(e.Calendar, calendar) && e.CalendarID != calendar {
		return false
	}
	return true
}

// SearchEvents implements search_events. With a window (explicit, or the
// default 30 days back to 90 ahead when there is no query) it lists
// occurrences, recurring events expanded; a free-text query without dates
// searches stored events by relevance. A pure time range never embeds.
func (s *Service) SearchEvents(ctx context.Context, p SearchParams) (*SearchResult, error) {
	limit, offset, err := clampLimit(p.Limit, p.Offset)
	if err != nil {
		return nil, err
	}
	query := strings.TrimSpace(p.Query)
	start, end, windowed, err := s.window(p.Start, p.End, query == "")
	if err != nil {
		return nil, err
	}
	res := &SearchResult{Offset: offset, Limit: limit, Events: []EventSummary{}}
	var ranked map[int64]float64 // row id → fused score, nil without a query
	var order []int64
	if query != "" {
		order, ranked, res.Ranking, res.Warnings, err = s.rank(ctx, query)
		if err != nil {
			return nil, err
		}
	} else {
		res.Ranking = "chronological"
	}
	if !windowed {
		res.Mode = "entity"
		return s.entityPage(ctx, res, order, ranked, p)
	}
	res.Mode = "window"
	res.WindowStart, res.WindowEnd = start.In(s.zone).Format(time.RFC3339), end.In(s.zone).Format(time.RFC3339)
	occ, warnings, err := s.occurrences(ctx, start, end, p.Account, p.Calendar, ranked, query != "")
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, warnings...)
	if ranked != nil {
		slices.SortStableFunc(occ, func(a, b occurrence) int {
			if sa, sb := ranked[a.row.ID], ranked[b.row.ID]; sa != sb {
				if sa > sb {
					return -1
				}
				return 1
			}
			return a.Start.Compare(b.Start)
		})
	}
	res.Total = len(occ)
	for i := offset; i < len(occ) && i < offset+limit; i++ {
		res.Events = append(res.Events, s.summary(occ[i], ranked))
	}
	if offset+limit < len(occ) {
		n := offset + limit
		res.NextOffset = &n
	}
	return res, nil
}

// rank returns row ids best first with their fused scores: FTS5 candidates
// (all terms required) fused by reciprocal rank with vector neighbours when
// an embedder is available. An embedding failure degrades to lexical with a
// warning, never to an error.
func (s *Service) rank(ctx context.Context, query string) ([]int64, map[int64]float64, string, []string, error) {
	lex, err := s.idx.text.Candidates(ctx, query, true, LexicalCandidates)
	if err != nil {
		return nil, nil, "", nil, err
	}
	var warnings []string
	near, err := s.idx.vectors.SearchText(ctx, s.emb, query, VectorCandidates)
	if err != nil {
		warnings = append(warnings, err.Error())
	}
	ranking := "lexical"
	if near != nil {
		ranking = "hybrid"
	}
	order, scores := vecindex.Fuse(lex, near)
	return order, scores, ranking, warnings, nil
}

// entityPage pages through ranked stored rows (query without dates).
func (s *Service) entityPage(ctx context.Context, res *SearchResult, order []int64, scores map[int64]float64, p SearchParams) (*SearchResult, error) {
	rows, err := s.idx.rowsByID(ctx, order)
	if err != nil {
		return nil, err
	}
	var kept []*eventRow
	for _, id := range order {
		if e, ok := rows[id]; ok && matchesFilter(e, p.Account, p.Calendar) {
			kept = append(kept, e)
		}
	}
	res.Total = len(kept)
	for i := res.Offset; i < len(kept) && i < res.Offset+res.Limit; i++ {
		res.Events = append(res.Events, s.summary(kept[i].single(s.zone), scores))
	}
	if res.Offset+res.Limit < len(kept) {
		n := res.Offset + res.Limit
		res.NextOffset = &n
	}
	return res, nil
}

func (x *Index) rowsByID(ctx context.Context, ids []int64) (map[int64]*eventRow, error) {
	out := map[int64]*eventRow{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := x.queryRows(ctx, `id IN (?`+strings.Repeat(",?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.ID] = r
		}
	}
	return out, nil
}

// occurrences lists the instances overlapping [start, end) that pass the
// filters, chronologically. With ranked set (a query was given) only the
// ranked rows take part. An unexpandable recurring event in the window is
// reported as a warning; more than MaxOccurrences is an error.
func (s *Service) occurrences(ctx context.Context, start, end time.Time, account, calendar string, ranked map[int64]float64, textFilter bool) ([]occurrence, []string, error) {
	rows, err := s.idx.queryRows(ctx, `(rrule = '' AND rdates = '[]' AND end_at > ? AND start_at < ?)
		OR ((rrule <> '' OR rdates <> '[]') AND start_at < ? AND (series_end IS NULL OR series_end + (end_at - start_at) > ?))
		ORDER BY start_at, id`, start.Unix()-1, end.Unix()+1, end.Unix()+1, start.Unix()-1)
	if err != nil {
		return nil, nil, err
	}
	var parents []string
	for _, r := range rows {
		if r.recurring() {
			parents = append(parents, r.Ref)
		}
	}
	overrides, err := s.idx.overridesByParent(ctx, parents)
	if err != nil {
		return nil, nil, err
	}
	var out []occurrence
	var warnings []string
	for _, r := range rows {
		if !matchesFilter(r, account, calendar) {
			continue
		}
		if textFilter {
			if _, ok := ranked[r.ID]; !ok {
				continue
			}
		}
		occ, err := r.occurrencesIn(start, end, MaxOccurrences, s.zone, overrides[r.Ref])
		var ue *errUnexpandable
		switch {
		case errors.As(err, &ue):
			warnings = append(warnings, ue.Error()+"; its occurrences in this window are not listed")
			continue
		case errors.Is(err, rrule.ErrTooMany):
			return nil, nil, fmt.Errorf("%w: more than %d occurrences in this window; narrow the window or add filters", ErrTooManyOccurrences, MaxOccurrences)
		case err != nil:
			return nil, nil, err
		}
		out = append(out, occ...)
		if len(out) > MaxOccurrences {
			return nil, nil, fmt.Errorf("%w: more than %d occurrences in this window; narrow the window or add filters", ErrTooManyOccurrences, MaxOccurrences)
		}
	}
	slices.SortStableFunc(out, func(a, b occurrence) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.row.Title, b.row.Title)
	})
	return out, warnings, nil
}

func (s *Service) summary(o occurrence, scores map[int64]float64) EventSummary {
	e := o.row
	sum := EventSummary{
		UID: e.UID, Ref: e.Ref, Title: e.Title, Location: e.Location, Calendar: e.Calendar, Account: e.Account,
		Start: o.Start.In(s.zone).Format(time.RFC3339), End: o.End.In(s.zone).Format(time.RFC3339),
		AllDay: e.AllDay, StartDate: o.StartDate, EndDate: o.EndDate, Recurring: e.recurring() || e.RecurrenceID.Valid,
		Status: e.Status, Free: e.Transparent, Score: scores[e.ID],
	}
	switch {
	case o.expanded:
		sum.OccurrenceStart = o.Start.In(s.zone).Format(time.RFC3339)
	case e.RecurrenceID.Valid:
		sum.OccurrenceStart = time.Unix(e.RecurrenceID.Int64, 0).In(s.zone).Format(time.RFC3339)
	}
	return sum
}

// ReadParams are the arguments of read_event.
type ReadParams struct {
	UID             string `json:"uid" jsonschema:"the event's UID, an earlier UID (alias) or its ref"`
	OccurrenceStart string `json:"occurrenceStart,omitempty" jsonschema:"for a recurring event, the occurrence to read (RFC 3339, as returned by search_events)"`
}

// Event is the full record returned by read_event.
type Event struct {
	EventSummary
	Aliases        []string    `json:"aliases,omitempty"`
	Notes          string      `json:"notes,omitempty"`
	NotesTruncated bool        `json:"notesTruncated,omitempty"`
	URL            string      `json:"url,omitempty"`
	TimeZone       string      `json:"timeZone,omitempty"`
	Floating       bool        `json:"floating,omitempty"`
	Recurrence     *Recurrence `json:"recurrence,omitempty"`
	Alarms         []Alarm     `json:"alarms,omitempty"`
	LastModified   string      `json:"lastModified,omitempty"`
	ExternalID     string      `json:"externalId,omitempty"`
	CalendarID     string      `json:"calendarId"`
	Source         string      `json:"source"`
	OtherMatches   []string    `json:"otherMatches,omitempty"`
}

// Recurrence describes a series.
type Recurrence struct {
	Rule          string   `json:"rule,omitempty"`
	Canonical     string   `json:"canonical,omitempty"`
	Representable bool     `json:"representable"`
	Problem       string   `json:"problem,omitempty"`
	ExDates       []string `json:"exdates,omitempty"`
	RDates        []string `json:"rdates,omitempty"`
}

// ErrNotFound reports an unknown UID, alias or occurrence.
var ErrNotFound = errors.New("not found")

// ReadEvent implements read_event: it resolves the current UID, a historical
// alias or a ref; with occurrenceStart it returns that occurrence of a
// recurring event (its detached version when one exists).
func (s *Service) ReadEvent(ctx context.Context, p ReadParams) (*Event, error) {
	key := strings.TrimSpace(p.UID)
	if key == "" {
		return nil, errors.New("uid is required")
	}
	rows, err := s.idx.queryRows(ctx, `(uid = ? OR ref_id = ? OR ref_id IN (SELECT ref_id FROM uid_aliases WHERE uid = ?))
		ORDER BY recurrence_id IS NOT NULL, id`, key, key, key)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no event with uid, alias or ref %q", ErrNotFound, key)
	}
	master := rows[0]
	var others []string
	for _, r := range rows[1:] {
		if !r.RecurrenceID.Valid && r.Ref != master.Ref {
			others = append(others, fmt.Sprintf("%s (%s / %s)", r.Ref, r.Account, r.Calendar))
		}
	}
	occ := master.single(s.zone)
	row := master
	if p.OccurrenceStart != "" {
		at, err := parseOccurrence(p.OccurrenceStart, s.zone)
		if err != nil {
			return nil, err
		}
		found := false
		for _, r := range rows {
			if r.RecurrenceID.Valid && r.RecurrenceID.Int64 == at.Unix() && r.Parent == master.Ref {
				row, occ, found = r, r.single(s.zone), true
				occ.expanded = false
				break
			}
		}
		if !found {
			if !master.recurring() {
				return nil, fmt.Errorf("%w: event %q does not repeat; read it without occurrenceStart", ErrNotFound, master.Title)
			}
			list, err := master.occurrencesIn(at.Add(-time.Second), at.Add(time.Second), 10, s.zone, nil)
			if err != nil {
				return nil, err
			}
			for _, o := range list {
				if o.Start.Equal(at) {
					occ, found = o, true
				}
			}
			if !found {
				return nil, fmt.Errorf("%w: event %q has no occurrence starting at %s (it may have been cancelled or moved)",
					ErrNotFound, master.Title, at.In(s.zone).Format(time.RFC3339))
			}
		}
	}
	return s.fullEvent(ctx, row, occ, others)
}

func parseOccurrence(v string, zone *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		return dateInZone(d, zone), nil
	}
	return time.Time{}, fmt.Errorf("occurrenceStart %q is not an RFC 3339 time or a YYYY-MM-DD date", v)
}

func (s *Service) fullEvent(ctx context.Context, e *eventRow, occ occurrence, others []string) (*Event, error) {
	ev := &Event{
		EventSummary: s.summary(occ, nil),
		URL:          e.URL, TimeZone: e.TZID, Floating: e.Floating, ExternalID: e.ExternalID,
		CalendarID: e.CalendarID, Source: e.Source, OtherMatches: others,
	}
	notes := []rune(e.Notes)
	if len(notes) > maxNotesChars {
		ev.Notes, ev.NotesTruncated = string(notes[:maxNotesChars]), true
	} else {
		ev.Notes = e.Notes
	}
	if err := json.Unmarshal([]byte(e.Alarms), &ev.Alarms); err != nil {
		return nil, fmt.Errorf("read alarms of %s: %w", e.UID, err)
	}
	if e.LastModified.Valid {
		ev.LastModified = time.Unix(e.LastModified.Int64, 0).In(s.zone).Format(time.RFC3339)
	}
	if e.recurring() {
		rec := &Recurrence{Rule: e.RRule, Canonical: e.Canonical, Problem: e.Problem, Representable: e.Problem == ""}
		json.Unmarshal([]byte(e.ExDates), &rec.ExDates)
		json.Unmarshal([]byte(e.RDates), &rec.RDates)
		ev.Recurrence = rec
	}
	ref := e.Ref
	if e.Parent != "" {
		ref = e.Parent
	}
	rows, err := s.idx.db.QueryContext(ctx, `SELECT uid FROM uid_aliases WHERE ref_id = ? ORDER BY first_seen, uid`, ref)
	if err != nil {
		return nil, fmt.Errorf("read UID aliases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid string
		if err := rows.Scan(&uid); err != nil {
			return nil, err
		}
		ev.Aliases = append(ev.Aliases, uid)
	}
	return ev, rows.Err()
}

// CalendarInfo is one entry of list_calendars.
type CalendarInfo struct {
	Account    string `json:"account"`
	Calendar   string `json:"calendar"`
	CalendarID string `json:"calendarId"`
	Source     string `json:"source"`
	Events     int    `json:"events"`
}

// CalendarList is the result of list_calendars.
type CalendarList struct {
	Calendars    []CalendarInfo `json:"calendars"`
	LastSync     string         `json:"lastSync,omitempty"`
	SyncComplete bool           `json:"syncComplete"`
	TimeZone     string         `json:"timeZone"`
}

// ListCalendars implements list_calendars.
func (s *Service) ListCalendars(ctx context.Context) (*CalendarList, error) {
	rows, err := s.idx.db.QueryContext(ctx, `SELECT account, calendar, calendar_id, source, count(*) FROM events
		GROUP BY source, account, calendar_id ORDER BY account, calendar`)
	if err != nil {
		return nil, fmt.Errorf("list calendars: %w", err)
	}
	defer rows.Close()
	out := &CalendarList{Calendars: []CalendarInfo{}, TimeZone: s.zone.String()}
	for rows.Next() {
		var c CalendarInfo
		if err := rows.Scan(&c.Account, &c.Calendar, &c.CalendarID, &c.Source, &c.Events); err != nil {
			return nil, err
		}
		out.Calendars = append(out.Calendars, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st, err := s.idx.State(ctx)
	if err != nil {
		return nil, err
	}
	if st != nil {
		out.LastSync = st.CompletedAt.In(s.zone).Format(time.RFC3339)
		out.SyncComplete = st.Complete
	}
	return out, nil
}

// AvailabilityParams are the arguments of check_availability.
type AvailabilityParams struct {
	Start    string `json:"start" jsonschema:"window start, RFC 3339"`
	End      string `json:"end" jsonschema:"window end (exclusive), RFC 3339; at most 366 days after start"`
	Account  string `json:"account,omitempty" jsonschema:"only this account"`
	Calendar string `json:"calendar,omitempty" jsonschema:"only this calendar (title or id)"`
}

// Interval is a span of time.
type Interval struct {
	Start  string   `json:"start"`
	End    string   `json:"end"`
	Events []string `json:"events,omitempty"`
}

// Availability is the result of check_availability.
type Availability struct {
	WindowStart string         `json:"windowStart"`
	WindowEnd   string         `json:"windowEnd"`
	Busy        []Interval     `json:"busy"`
	Free        []Interval     `json:"free"`
	AllDay      []EventSummary `json:"allDay,omitempty"`
	Note        string         `json:"note"`
}

// CheckAvailability implements check_availability: busy time is the union of
// timed occurrences that are neither cancelled nor marked free; all-day
// events are listed apart and do not block time. A recurring event that
// cannot be expanded makes the answer unknowable, so it is an error.
func (s *Service) CheckAvailability(ctx context.Context, p AvailabilityParams) (*Availability, error) {
	if p.Start == "" || p.End == "" {
		return nil, errors.New("start and end are required")
	}
	start, end, _, err := s.window(p.Start, p.End, false)
	if err != nil {
		return nil, err
	}
	occ, warnings, err := s.occurrences(ctx, start, end, p.Account, p.Calendar, nil, false)
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("availability cannot be established: %s", strings.Join(warnings, "; "))
	}
	res := &Availability{WindowStart: start.In(s.zone).Format(time.RFC3339), WindowEnd: end.In(s.zone).Format(time.RFC3339),
		Busy: []Interval{}, Free: []Interval{},
		Note: "Computed from the local index; it reflects the last sync and is not a reservation of the time slot."}
	type span struct {
		a, b   time.Time
		titles []string
	}
	var spans []span
	for _, o := range occ {
		switch {
		case o.row.Status == "cancelled" || o.row.Transparent && !o.row.AllDay:
			continue
		case o.row.AllDay:
			if o.row.Status != "cancelled" {
				res.AllDay = append(res.AllDay, s.summary(o, nil))
			}
			continue
		}
		a, b := maxTime(o.Start, start), minTime(o.End, end)
		if !b.After(a) {
			continue
		}
		if n := len(spans); n > 0 && !a.After(spans[n-1].b) {
			spans[n-1].b = maxTime(spans[n-1].b, b)
			spans[n-1].titles = append(spans[n-1].titles, o.row.Title)
			continue
		}
		spans = append(spans, span{a: a, b: b, titles: []string{o.row.Title}})
	}
	cursor := start
	for _, sp := range spans {
		if sp.a.After(cursor) {
			res.Free = append(res.Free, Interval{Start: cursor.In(s.zone).Format(time.RFC3339), End: sp.a.In(s.zone).Format(time.RFC3339)})
		}
		res.Busy = append(res.Busy, Interval{Start: sp.a.In(s.zone).Format(time.RFC3339), End: sp.b.In(s.zone).Format(time.RFC3339), Events: sp.titles})
		cursor = maxTime(cursor, sp.b)
	}
	if end.After(cursor) {
		res.Free = append(res.Free, Interval{Start: cursor.In(s.zone).Format(time.RFC3339), End: end.In(s.zone).Format(time.RFC3339)})
	}
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
