package calendar

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool"
)

const serverInstructions = `Read-only access to the user's calendars, from Steward's local index of Apple Calendar and iCalendar sources.
search_events lists occurrences in a time window (default: 30 days back to 90 ahead) or, given only a query, finds stored events by relevance.
Recurring events appear once per occurrence with occurrenceStart; pass it to read_event for that occurrence.
Windows are limited to 366 days and 1,000 occurrences. Results reflect the last sync, not a reservation of time.`

// NewMCPServer returns the calendar connector's MCP server with the tools
// search_events, read_event, list_calendars and check_availability,
// plus the private steward/prepareSearch request.
//
// open is called by each tool call until it succeeds, so a connector started
// before the first sync serves as soon as the index exists.
func NewMCPServer(open func(context.Context) (*Service, error), version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-calendar", Title: "Steward calendar", Version: version},
		&mcp.ServerOptions{Instructions: serverInstructions})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(s, &mcp.Tool{
		Name: "search_events",
		Description: "Search calendar events. query, start/end (RFC 3339), account and calendar are ANDed. " +
			"With a window (or no query) returns occurrences chronologically, recurring events expanded; a query without dates " +
			"searches stored events by keyword and meaning. limit defaults to 10 (max 50); use nextOffset for the next page.",
		Annotations: ro,
	}, mcptool.Handler(open, func(svc *Service, ctx context.Context, p SearchParams) (*SearchResult, error) {
		r, err := svc.SearchEvents(ctx, p)
		if r != nil {
			r.Kind = "search_results"
			for i := range r.Events {
				r.Events[i].Kind = "event"
			}
		}
		return r, err
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name: "read_event",
		Description: "Read one event in full (notes, URL, recurrence, alarms, UID aliases) by UID, an earlier UID or ref. " +
			"For a recurring event pass occurrenceStart to read that occurrence.",
		Annotations: ro,
	}, mcptool.Handler(open, func(svc *Service, ctx context.Context, p ReadParams) (*Event, error) {
		e, err := svc.ReadEvent(ctx, p)
		if e != nil {
			e.Kind = "event"
		}
		return e, err
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list_calendars",
		Description: "List the indexed accounts and calendars with their event counts and the time of the last sync.",
		Annotations: ro,
	}, mcptool.Handler(open, func(svc *Service, ctx context.Context, _ struct{}) (*CalendarList, error) {
		return svc.ListCalendars(ctx)
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name: "check_availability",
		Description: "Free/busy for a window (RFC 3339 start/end, at most 366 days): merged busy intervals with event titles, " +
			"free gaps, and all-day events listed apart. Cancelled and free (transparent) events do not block time.",
		Annotations: ro,
	}, mcptool.Handler(open, (*Service).CheckAvailability))
	// The method name is a constant, so registration cannot fail.
	_ = mcptool.AddPrepareSearch(s, open, ErrNoIndex, (*Service).Prepare)
	return s
}

// Prepare warms the index for the host's start-up preparation: a keyword
// lookup and one vector KNN, without returning content.
func (svc *Service) Prepare(ctx context.Context) (mcptool.PrepareResult, error) {
	return mcptool.WarmIndex(ctx, svc.idx.db, "events_fts", "events_vec")
}

// OpenService returns an opener for NewMCPServer that opens the index at
// path read-only on first use and keeps it; until the first sync has
// created the index every call reports ErrNoIndex. close releases it.
func OpenService(path string, opts ServiceOptions) (open func(context.Context) (*Service, error), close func() error) {
	l := mcptool.NewLazy(func(ctx context.Context) (*Service, error) {
		idx, err := OpenIndexReadOnly(ctx, path)
		if err != nil {
			return nil, err
		}
		return NewService(ctx, idx, opts), nil
	}, func(svc *Service) error { return svc.idx.Close() })
	return l.Get, l.Close
}
