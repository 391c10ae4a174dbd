package calendar

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/search/vecindex/vecindextest"
	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
)

// concepts are the topics of the stand-in for local-embed, so that
// "certification" lands near "ISO audit" without sharing a word with it.
var concepts = [][]string{
	{"certification", "certified", "iso", "audit", "accreditation", "27001"},
	{"lunch", "dinner", "trattoria", "restaurant", "food"},
	{"piano", "yoga", "music", "lesson"},
}

// fixtureEnv builds an index from a generated Apple store and a vdir.
func fixtureEnv(t *testing.T, emb Embedder) *testEnv {
	t.Helper()
	rome := mustLoad(t, "Europe/Rome")
	a := newAppleDB(t)
	standup := a.event(appleEvent{Summary: "Standup", TZ: "Europe/Rome", UID: "standup@x", Location: "Room 4",
		Start: time.Date(2026, 3, 23, 9, 30, 0, 0, rome), End: time.Date(2026, 3, 23, 10, 0, 0, 0, rome)})
	a.recurrence(standup, 2, 1, 0, time.Time{}, "D=0MO,0WE")
	a.exec(`INSERT INTO ExceptionDate (owner_id, date) VALUES (?, ?)`, standup, appleSec(time.Date(2026, 3, 25, 9, 30, 0, 0, rome)))
	a.exec(`INSERT INTO Alarm (owner_id, trigger_interval) VALUES (?, -900)`, standup)
	a.event(appleEvent{Summary: "Standup (moved)", TZ: "Europe/Rome", OrigItem: standup, OrigDate: time.Date(2026, 3, 30, 9, 30, 0, 0, rome),
		Start: time.Date(2026, 3, 30, 11, 0, 0, 0, rome), End: time.Date(2026, 3, 30, 11, 30, 0, 0, rome)})
	bday := a.event(appleEvent{Summary: "Anna's birthday", TZ: "_float", UID: "bday@x", AllDay: true, Availability: 1,
		Start: time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 29, 23, 59, 59, 0, time.UTC)})
	a.recurrence(bday, 4, 1, 0, time.Time{}, "")

	env := newTestEnv(t, SourceConfig{Name: "mac", Kind: KindApple, Path: a.Path}, SourceConfig{Name: "dav", Kind: KindICS, Account: "me@dav"})
	vdir := filepath.Join(env.root, "vdir")
	env.cfg.Sources[1].Path = vdir
	work := filepath.Join(vdir, "work")
	files := map[string]string{
		"lunch.ics":  vevent("lunch@x", "Lunch with Marco", "20260504T120000", "20260504T130000", "LOCATION:Trattoria da Gino"),
		"kick.ics":   vevent("kick@x", "Certification kickoff", "20260415T100000", "20260415T110000", "DESCRIPTION:ISO 27001 project"),
		"audit.ics":  vevent("audit@x", "ISO audit preparation", "20260420T140000", "20260420T150000"),
		"far.ics":    vevent("far@x", "Far future", "20260801T100000", "20260801T110000"),
		"old.ics":    vevent("old@x", "Old event", "20260101T100000", "20260101T110000"),
		"citta.ics":  vevent("citta@x", "Riunione in Città", "20260325T150000", "20260325T160000"),
		"ai.ics":     vevent("ai@x", "AI review", "20260326T100000", "20260326T110000"),
		"edgea.ics":  vevent("edgea@x", "Edge A", "20260331T230000", "20260401T000000"),
		"edgeb.ics":  vevent("edgeb@x", "Edge B", "20260402T000000", "20260402T010000"),
		"span.ics":   vevent("span@x", "Offsite", "20260331T200000", "20260402T100000"),
		"design.ics": vevent("design@x", "Design review", "20260323T094500", "20260323T110000"),
		"focus.ics":  vevent("focus@x", "Focus time", "20260323T140000", "20260323T150000", "TRANSP:TRANSPARENT"),
		"call.ics":   vevent("call@x", "Cancelled call", "20260323T160000", "20260323T170000", "STATUS:CANCELLED"),
		"weird.ics":  vevent("weird@x", "Weird rule", "20260601T090000", "20260601T100000", "RRULE:FREQ=DAILY;BYHOUR=9,17"),
	}
	for name, ev := range files {
		localsourcetest.WriteFile(t, filepath.Join(work, name), vcalendar(ev))
	}
	localsourcetest.WriteFile(t, filepath.Join(vdir, "home", "yoga.ics"), vcalendar(vevent("yoga@x", "Yoga", "20260324T180000", "20260324T190000", "RRULE:FREQ=WEEKLY")))
	rep := env.sync(SyncOptions{Embedder: emb})
	if !rep.Complete || rep.Added != 18 {
		t.Fatalf("fixture sync: %+v", rep)
	}
	if emb != nil && (rep.Embedded != 18 || rep.EmbedError != "") {
		t.Fatalf("fixture embeddings: %+v", rep)
	}
	return env
}

func titles(res *SearchResult) []string {
	var out []string
	for _, e := range res.Events {
		out = append(out, e.Title)
	}
	return out
}

func TestSearchDefaultWindowAndOverlap(t *testing.T) {
	env := fixtureEnv(t, nil)
	svc := env.service(nil)
	ctx := context.Background()
	all, err := svc.SearchEvents(ctx, SearchParams{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	res := &SearchResult{Events: all.Events}
	for next := all.NextOffset; next != nil; {
		page, err := svc.SearchEvents(ctx, SearchParams{Limit: 50, Offset: *next})
		if err != nil {
			t.Fatal(err)
		}
		res.Events = append(res.Events, page.Events...)
		next = page.NextOffset
	}
	got := titles(res)
	res.Mode, res.Ranking, res.WindowStart, res.WindowEnd, res.Warnings = all.Mode, all.Ranking, all.WindowStart, all.WindowEnd, all.Warnings
	if res.Mode != "window" || res.Ranking != "chronological" || res.WindowStart != "2026-02-18T13:00:00+01:00" || res.WindowEnd != "2026-06-18T14:00:00+02:00" {
		t.Errorf("default window: %s %s %s–%s", res.Mode, res.Ranking, res.WindowStart, res.WindowEnd)
	}
	for _, want := range []string{"Lunch with Marco", "Standup", "Anna's birthday", "Riunione in Città"} {
		if !slices.Contains(got, want) {
			t.Errorf("default window lacks %q", want)
		}
	}
	for _, not := range []string{"Far future", "Old event"} {
		if slices.Contains(got, not) {
			t.Errorf("default window (30 days back, 90 ahead) includes %q", not)
		}
	}
	if len(res.Events) != all.Total || all.Total < 40 {
		t.Errorf("paging collected %d of %d", len(res.Events), all.Total)
	}
	page, _ := svc.SearchEvents(ctx, SearchParams{Limit: 7, Offset: 7})
	if page.NextOffset == nil || *page.NextOffset != 14 || page.Events[0] != res.Events[7] {
		t.Errorf("second page of 7: next %v first %+v", page.NextOffset, page.Events[0])
	}
	for i := 1; i < len(res.Events); i++ {
		if res.Events[i].Start < res.Events[i-1].Start && res.Events[i].Start[19:] == res.Events[i-1].Start[19:] {
			t.Fatalf("not chronological at %d: %v", i, got)
		}
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "Weird rule") {
		t.Errorf("unexpandable series must be reported, got %v", res.Warnings)
	}

	// Half-open overlap: an event ending at the window start or starting
	// at its end is outside; one spanning the window is inside.
	res, err = svc.SearchEvents(ctx, SearchParams{Start: "2026-04-01T00:00:00+02:00", End: "2026-04-02T00:00:00+02:00", Calendar: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if got := titles(res); !slices.Equal(got, []string{"Offsite"}) {
		t.Errorf("overlap window: %v, want only Offsite", got)
	}
	res, _ = svc.SearchEvents(ctx, SearchParams{Start: "2026-04-01T00:00:00+02:00", End: "2026-04-02T00:00:00+02:00", Account: "me@dav", Calendar: "nope"})
	if res.Total != 0 {
		t.Errorf("unknown calendar filter returned %v", titles(res))
	}
}

func TestSearchExpandsRecurrenceAcrossDSTWithExceptions(t *testing.T) {
	env := fixtureEnv(t, nil)
	res, err := env.service(nil).SearchEvents(context.Background(), SearchParams{
		Start: "2026-03-23T00:00:00+01:00", End: "2026-04-06T00:00:00+02:00", Account: "iCloud"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ title, start, occ string }
	var got []row
	for _, e := range res.Events {
		got = append(got, row{e.Title, e.Start, e.OccurrenceStart})
	}
	want := []row{
		{"Standup", "2026-03-23T09:30:00+01:00", "2026-03-23T09:30:00+01:00"},
		// 25 March is excluded (EXDATE).
		{"Anna's birthday", "2026-03-29T00:00:00+01:00", "2026-03-29T00:00:00+01:00"},
		// 30 March was moved to 11:00 by a detached occurrence.
		{"Standup (moved)", "2026-03-30T11:00:00+02:00", "2026-03-30T09:30:00+02:00"},
		// After the spring-forward the standup stays at 09:30 local.
		{"Standup", "2026-04-01T09:30:00+02:00", "2026-04-01T09:30:00+02:00"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("occurrences:\n got %v\nwant %v", got, want)
	}
	if res.Events[1].StartDate != "2026-03-29" || res.Events[1].EndDate != "2026-03-30" || !res.Events[1].Free {
		t.Errorf("all-day occurrence %+v", res.Events[1])
	}
}

func TestSearchLimits(t *testing.T) {
	env := newTestEnv(t, SourceConfig{Name: "file", Kind: KindICS})
	file := filepath.Join(env.root, "cal.ics")
	env.cfg.Sources[0].Path = file
	localsourcetest.WriteFile(t, file, vcalendar(
		vevent("d1", "Pills", "20260101T080000", "20260101T080500", "RRULE:FREQ=DAILY"),
		vevent("d2", "Walk", "20260101T120000", "20260101T130000", "RRULE:FREQ=DAILY"),
		vevent("d3", "Read", "20260101T210000", "20260101T220000", "RRULE:FREQ=DAILY")))
	env.sync(SyncOptions{})
	svc := env.service(nil)
	ctx := context.Background()
	_, err := svc.SearchEvents(ctx, SearchParams{Start: "2026-01-01T00:00:00Z", End: "2027-01-03T00:00:00Z"})
	if !errors.Is(err, ErrWindowTooLarge) || !strings.Contains(err.Error(), "366") {
		t.Errorf("367-day window: %v", err)
	}
	_, err = svc.SearchEvents(ctx, SearchParams{Start: "2026-01-01T00:00:00Z", End: "2027-01-01T00:00:00Z"})
	if !errors.Is(err, ErrTooManyOccurrences) {
		t.Errorf("3 daily series over a year (1,095 occurrences): %v", err)
	}
	res, err := svc.SearchEvents(ctx, SearchParams{Start: "2026-01-01T00:00:00Z", End: "2026-12-31T00:00:00Z", Calendar: "cal", Query: "walk"})
	if err != nil || res.Total != 364 || len(res.Events) != 10 {
		t.Errorf("filtered yearly series: %v total %d", err, res.Total)
	}
	res, _ = svc.SearchEvents(ctx, SearchParams{Start: "2026-01-01T00:00:00Z", End: "2026-02-01T00:00:00Z", Limit: 500, Offset: 90})
	if res.Limit != 50 || len(res.Events) != 3 || res.NextOffset != nil {
		t.Errorf("limit clamp/offset: limit %d events %d next %v", res.Limit, len(res.Events), res.NextOffset)
	}
	for _, p := range []SearchParams{
		{Start: "yesterday"}, {Start: "2026-01-02T00:00:00Z", End: "2026-01-01T00:00:00Z"}, {Offset: -1}, {Limit: -3},
	} {
		if _, err := svc.SearchEvents(ctx, p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if _, err := svc.CheckAvailability(ctx, AvailabilityParams{Start: "2026-01-01T00:00:00Z", End: "2027-06-01T00:00:00Z"}); !errors.Is(err, ErrWindowTooLarge) {
		t.Errorf("availability window limit: %v", err)
	}
}

func TestSearchTextEntityAndHybrid(t *testing.T) {
	emb := &vecindextest.Topics{Topics: concepts}
	env := fixtureEnv(t, emb)
	ctx := context.Background()

	lexical := env.service(nil)
	res, err := lexical.SearchEvents(ctx, SearchParams{Query: "certification"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "entity" || res.Ranking != "lexical" || !slices.Equal(titles(res), []string{"Certification kickoff"}) {
		t.Errorf("lexical entity search: %s %s %v", res.Mode, res.Ranking, titles(res))
	}
	for q, want := range map[string]string{"marco": "Lunch with Marco", "citta": "Riunione in Città", "AI": "AI review", "trattoria gino": "Lunch with Marco"} {
		res, err := lexical.SearchEvents(ctx, SearchParams{Query: q})
		if err != nil || !slices.Equal(titles(res), []string{want}) {
			t.Errorf("query %q: %v %v, want [%s]", q, titles(res), err, want)
		}
	}
	if res, _ := lexical.SearchEvents(ctx, SearchParams{Query: `"); DROP TABLE events; --`}); res.Total != 0 {
		t.Errorf("hostile query matched %v", titles(res))
	}

	hybrid := env.service(emb)
	res, err = hybrid.SearchEvents(ctx, SearchParams{Query: "certification"})
	if err != nil {
		t.Fatal(err)
	}
	got := titles(res)
	if res.Ranking != "hybrid" || len(got) < 2 || got[0] != "Certification kickoff" || got[1] != "ISO audit preparation" {
		t.Errorf("hybrid: %s %v", res.Ranking, got)
	}
	// Constrained to a window: only occurrences inside it, by relevance.
	res, _ = hybrid.SearchEvents(ctx, SearchParams{Query: "certification", Start: "2026-04-16T00:00:00+02:00", End: "2026-04-30T00:00:00+02:00"})
	if res.Mode != "window" || len(res.Events) == 0 || res.Events[0].Title != "ISO audit preparation" || slices.Contains(titles(res), "Certification kickoff") {
		t.Errorf("hybrid in window: %v", titles(res))
	}

	// A pure time range never embeds.
	before := emb.Calls.Load()
	hybrid.SearchEvents(ctx, SearchParams{})
	hybrid.SearchEvents(ctx, SearchParams{Start: "2026-04-01T00:00:00Z", End: "2026-04-08T00:00:00Z"})
	hybrid.CheckAvailability(ctx, AvailabilityParams{Start: "2026-04-01T00:00:00Z", End: "2026-04-02T00:00:00Z"})
	if n := emb.Calls.Load() - before; n != 0 {
		t.Errorf("time-range reads made %d embedding calls", n)
	}

	// The gateway going away degrades to keyword results with a warning.
	emb.Fail.Store(true)
	res, err = hybrid.SearchEvents(ctx, SearchParams{Query: "certification"})
	if err != nil || res.Ranking != "lexical" || len(res.Warnings) == 0 || !slices.Equal(titles(res), []string{"Certification kickoff"}) {
		t.Errorf("embedding failure: %v %s %v %v", err, res.Ranking, res.Warnings, titles(res))
	}
}

func TestReadEvent(t *testing.T) {
	env := fixtureEnv(t, nil)
	svc := env.service(nil)
	ctx := context.Background()
	ev, err := svc.ReadEvent(ctx, ReadParams{UID: "standup@x"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Recurrence == nil || ev.Recurrence.Canonical != "FREQ=WEEKLY;BYDAY=MO,WE" || !ev.Recurrence.Representable ||
		len(ev.Recurrence.ExDates) != 1 || len(ev.Alarms) != 1 || *ev.Alarms[0].OffsetMinutes != -15 || ev.TimeZone != "Europe/Rome" {
		t.Errorf("master: %+v rec %+v alarms %+v", ev, ev.Recurrence, ev.Alarms)
	}
	occ, err := svc.ReadEvent(ctx, ReadParams{UID: "standup@x", OccurrenceStart: "2026-04-01T07:30:00Z"})
	if err != nil || occ.Start != "2026-04-01T09:30:00+02:00" || occ.End != "2026-04-01T10:00:00+02:00" || occ.OccurrenceStart != "2026-04-01T09:30:00+02:00" {
		t.Errorf("occurrence: %+v %v", occ, err)
	}
	moved, err := svc.ReadEvent(ctx, ReadParams{UID: "standup@x", OccurrenceStart: "2026-03-30T09:30:00+02:00"})
	if err != nil || moved.Title != "Standup (moved)" || moved.Start != "2026-03-30T11:00:00+02:00" {
		t.Errorf("detached occurrence: %+v %v", moved, err)
	}
	bday, err := svc.ReadEvent(ctx, ReadParams{UID: "bday@x", OccurrenceStart: "2027-03-29"})
	if err != nil || bday.StartDate != "2027-03-29" {
		t.Errorf("all-day occurrence by date: %+v %v", bday, err)
	}
	for _, p := range []ReadParams{
		{UID: "standup@x", OccurrenceStart: "2026-03-25T09:30:00+01:00"}, // excluded
		{UID: "standup@x", OccurrenceStart: "2026-03-24T09:30:00+01:00"}, // not an occurrence
		{UID: "lunch@x", OccurrenceStart: "2026-05-04T12:00:00+02:00"},   // not recurring
		{UID: "nobody@x"},
	} {
		if _, err := svc.ReadEvent(ctx, p); !errors.Is(err, ErrNotFound) {
			t.Errorf("%+v: %v, want ErrNotFound", p, err)
		}
	}
	if _, err := svc.ReadEvent(ctx, ReadParams{UID: "standup@x", OccurrenceStart: "soon"}); err == nil {
		t.Error("malformed occurrenceStart accepted")
	}
	weird, err := svc.ReadEvent(ctx, ReadParams{UID: "weird@x"})
	if err != nil || weird.Recurrence.Representable || !strings.Contains(weird.Recurrence.Problem, "BYHOUR") {
		t.Errorf("unrepresentable rule: %+v %v", weird.Recurrence, err)
	}
}

func TestListCalendarsAndAvailability(t *testing.T) {
	env := fixtureEnv(t, nil)
	svc := env.service(nil)
	ctx := context.Background()
	list, err := svc.ListCalendars(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Calendars {
		names = append(names, c.Account+"/"+c.Calendar)
	}
	if !slices.Equal(names, []string{"iCloud/Home", "me@dav/home", "me@dav/work"}) || !list.SyncComplete || list.TimeZone != "Europe/Rome" {
		t.Errorf("calendars %v %+v", names, list)
	}
	av, err := svc.CheckAvailability(ctx, AvailabilityParams{Start: "2026-03-23T08:00:00+01:00", End: "2026-03-23T18:00:00+01:00"})
	if err != nil {
		t.Fatal(err)
	}
	busy := []Interval{{Start: "2026-03-23T09:30:00+01:00", End: "2026-03-23T11:00:00+01:00", Events: []string{"Standup", "Design review"}}}
	free := []Interval{{Start: "2026-03-23T08:00:00+01:00", End: "2026-03-23T09:30:00+01:00"}, {Start: "2026-03-23T11:00:00+01:00", End: "2026-03-23T18:00:00+01:00"}}
	if !equalIntervals(av.Busy, busy) || !equalIntervals(av.Free, free) {
		t.Errorf("availability:\nbusy %+v\nfree %+v", av.Busy, av.Free)
	}
	av, err = svc.CheckAvailability(ctx, AvailabilityParams{Start: "2026-03-29T00:00:00+01:00", End: "2026-03-30T00:00:00+02:00"})
	if err != nil || len(av.Busy) != 0 || len(av.AllDay) != 1 || av.AllDay[0].Title != "Anna's birthday" {
		t.Errorf("all-day events are listed apart: %+v %v", av, err)
	}
	if _, err := svc.CheckAvailability(ctx, AvailabilityParams{Start: "2026-06-02T00:00:00+02:00", End: "2026-06-03T00:00:00+02:00"}); err == nil ||
		!strings.Contains(err.Error(), "Weird rule") {
		t.Errorf("an unexpandable series in the window must fail availability: %v", err)
	}
}

func equalIntervals(a, b []Interval) bool {
	return slices.EqualFunc(a, b, func(x, y Interval) bool {
		return x.Start == y.Start && x.End == y.End && slices.Equal(x.Events, y.Events)
	})
}
