package calendar

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool"
)

const serverInstructions = `Access to the user's calendars, from Steward's local index of Apple Calendar and iCalendar sources.
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
	return newMCPServer(open, nil, version)
}

// NewWritableMCPServer adds the write tools create_event, update_event and
// delete_event, served by the Writer write returns; each is gated by the
// host with a preflight that validates the proposal against the live
// calendar before the approval card shows it.
func NewWritableMCPServer(open func(context.Context) (*Service, error), write func(context.Context) (*Writer, error), version string) *mcp.Server {
	return newMCPServer(open, write, version)
}

func newMCPServer(open func(context.Context) (*Service, error), write func(context.Context) (*Writer, error), version string) *mcp.Server {
	instructions := serverInstructions
	if write != nil {
		instructions += "\n" + writeInstructions
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-calendar", Title: "Steward calendar", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
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
	if write != nil {
		addWriteTools(s, write)
	}
	return s
}

// Prepare warms the index for the host's start-up preparation: a keyword
// lookup and one vector KNN, without returning content.
func (svc *Service) Prepare(ctx context.Context) (mcptool.PrepareResult, error) {
	return mcptool.WarmIndex(ctx, svc.idx.db, "events_fts", "events_vec")
}

const writeInstructions = `create_event, update_event and delete_event change a calendar after the user approves the exact change.
Name calendars by calendarId from list_calendars (a title only works when exactly one calendar has it).
For a recurring event pass occurrenceStart from search_events and scope thisEvent or futureEvents.
Every write is journaled and confirmed by a later sync; never repeat a write whose result is uncertain.`

// addWriteTools registers the gated write tools.
func addWriteTools(s *mcp.Server, write func(context.Context) (*Writer, error)) {
	w := &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: new(bool)}
	destructive := true
	d := &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: new(bool)}
	mcptool.AddGated(s, &mcp.Tool{
		Name: "create_event",
		Description: "Create a calendar event (needs the user's approval). calendarId (from list_calendars) is preferred; a calendar title " +
			"is accepted only when exactly one calendar has it. start/end are RFC 3339 with offset, or dates with allDay. " +
			"recurrence is an RRULE; alarms are minutes before the start.",
		Annotations: w,
	}, write, (*Writer).PreflightCreate, (*Writer).CreateEvent)
	mcptool.AddGated(s, &mcp.Tool{
		Name: "update_event",
		Description: "Change an event (needs the user's approval): only the fields given change. For a recurring event pass occurrenceStart " +
			"and scope thisEvent (that occurrence) or futureEvents (it and every later one). A one-sided time change keeps the other boundary.",
		Annotations: w,
	}, write, (*Writer).PreflightUpdate, (*Writer).UpdateEvent)
	mcptool.AddGated(s, &mcp.Tool{
		Name: "delete_event",
		Description: "Delete an event (needs the user's approval). For a recurring event pass occurrenceStart and scope thisEvent " +
			"(that occurrence) or futureEvents (it and every later one; the first occurrence deletes the series).",
		Annotations: d,
	}, write, (*Writer).PreflightDelete, (*Writer).DeleteEvent)
}

// OpenService returns an opener for NewMCPServer that opens the index at
// path read-only on first use and keeps it; until the first sync has
// created the index every call reports ErrNoIndex. close releases it.
func OpenService(path string, opts ServiceOptions) (open func(context.Context) (*Service, error), close func() error) {
	return mcptool.OnIndex(func(ctx context.Context) (*Index, error) { return OpenIndexReadOnly(ctx, path) },
		func(ctx context.Context, idx *Index) *Service { return NewService(ctx, idx, opts) },
		func(svc *Service) error { return svc.idx.Close() })
}
