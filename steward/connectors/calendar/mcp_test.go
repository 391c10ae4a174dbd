package calendar

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/localsource/localsourcetest"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

func TestMCPServerTools(t *testing.T) {
	env := fixtureEnv(t, nil)
	svc := env.service(nil)
	cs := mcptooltest.Connect(t, NewMCPServer(func(context.Context) (*Service, error) { return svc, nil }, "test"))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s is not marked read-only", tool.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"check_availability", "list_calendars", "read_event", "search_events"}) {
		t.Fatalf("tools %v", names)
	}

	res, _ := mcptooltest.Call[SearchResult](t, cs, "search_events", map[string]any{
		"start": "2026-03-30T00:00:00+02:00", "end": "2026-04-02T00:00:00+02:00", "account": "iCloud"})
	if got := titles(&res); !slices.Equal(got, []string{"Standup (moved)", "Standup"}) || res.Events[1].OccurrenceStart != "2026-04-01T09:30:00+02:00" ||
		res.Kind != "search_results" || res.Events[0].Kind != "event" {
		t.Errorf("search_events over MCP: %v %+v", got, res.Events)
	}
	ev, _ := mcptooltest.Call[Event](t, cs, "read_event", map[string]any{"uid": "standup@x", "occurrenceStart": res.Events[1].OccurrenceStart})
	if ev.Kind != "event" || ev.Title != "Standup" || ev.Start != "2026-04-01T09:30:00+02:00" || ev.Location != "Room 4" {
		t.Errorf("read_event over MCP: %+v", ev)
	}
	list, _ := mcptooltest.Call[CalendarList](t, cs, "list_calendars", map[string]any{})
	if len(list.Calendars) != 3 {
		t.Errorf("list_calendars: %+v", list)
	}
	av, _ := mcptooltest.Call[Availability](t, cs, "check_availability", map[string]any{"start": "2026-03-23T08:00:00+01:00", "end": "2026-03-23T18:00:00+01:00"})
	if len(av.Busy) != 1 || len(av.Free) != 2 {
		t.Errorf("check_availability: %+v", av)
	}

	// Tool errors come back as results the model can read, not protocol failures.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_event", map[string]any{"uid": "nobody"}, "no event"},
		{"search_events", map[string]any{"start": "2026-01-01T00:00:00Z", "end": "2027-06-01T00:00:00Z"}, "366"},
		{"check_availability", map[string]any{"start": "tomorrow", "end": "2026-01-01T00:00:00Z"}, "RFC 3339"},
	} {
		_, r := mcptooltest.Call[map[string]any](t, cs, c.tool, c.args)
		if !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, c.want) {
			t.Errorf("%s %v: error result %+v, want it to mention %q", c.tool, c.args, r.Content, c.want)
		}
	}
}

func TestMCPServerBeforeFirstSync(t *testing.T) {
	mustLoad(t, "Europe/Rome")
	path := filepath.Join(t.TempDir(), "calendar-index.sqlitedb")
	open, closeIdx := OpenService(path, ServiceOptions{})
	defer closeIdx()
	cs := mcptooltest.Connect(t, NewMCPServer(open, "test"))
	_, res := mcptooltest.Call[SearchResult](t, cs, "search_events", map[string]any{})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "steward calendar sync") {
		t.Fatalf("before the first sync: %+v", res.Content)
	}
	idx, err := OpenIndex(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ics := filepath.Join(t.TempDir(), "cal.ics")
	localsourcetest.WriteFile(t, ics, vcalendar(vevent("a", "Alpha", "20260401T090000", "20260401T100000")))
	if _, err := idx.Sync(context.Background(), &Config{Timezone: "Europe/Rome", Sources: []SourceConfig{{Name: "f", Kind: KindICS, Path: ics, Account: "f"}}}, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	idx.Close()
	out, res := mcptooltest.Call[SearchResult](t, cs, "search_events", map[string]any{"query": "alpha"})
	if res.IsError || len(out.Events) != 1 {
		t.Errorf("after the first sync: %+v %+v", res.Content, out)
	}
}
