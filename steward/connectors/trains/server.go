package trains

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FindInput is find_next_train's arguments.
type FindInput struct {
	From           string `json:"from" jsonschema:"departure station exactly as the user said it (dictated forms and missing accents are fine)"`
	To             string `json:"to" jsonschema:"destination station exactly as the user said it"`
	DepartureAfter string `json:"departureAfter,omitempty" jsonschema:"ISO 8601 time to search from, e.g. 2026-11-30T17:00:00+01:00 (a time without offset is Italian local time); default now"`
}

// StatusInput is train_status's arguments.
type StatusInput struct {
	TrainRef string `json:"trainRef" jsonschema:"the opaque vt1_… trainRef returned by find_next_train"`
}

// ParseDepartureAfter reads an ISO 8601 instant; a value without an offset
// is Italian local time.
func ParseDepartureAfter(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, v, rome); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("departureAfter %q is not an ISO 8601 time such as 2026-11-30T17:00:00+01:00", v)
}

// NewServer returns the trains MCP server with find_next_train and
// train_status, both read-only.
func NewServer(svc *Service, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "steward-trains", Title: "Steward trains", Version: version},
		&mcp.ServerOptions{Instructions: "Live Italian trains from ViaggiaTreno. A platform with platformStatus " +
			"\"scheduled\" is only programmed: never present it as confirmed. This is a direct-train lookup, not a journey planner."})
	open := true
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &open}
	mcp.AddTool(s, &mcp.Tool{
		Name: "find_next_train",
		Description: "Find the next DIRECT train between two Italian stations in the current departure board, with an opaque " +
			"trainRef for train_status and watches, route stops, scheduled/estimated times, delay, cancellation and departure " +
			"platform (platformStatus confirmed/scheduled/unknown). Station names may be dictated; an ambiguous name returns " +
			"status ambiguous_station with candidates to ask the user about. No direct train is reported as no_direct_train.",
		Annotations: ro,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in FindInput) (*mcp.CallToolResult, *FindResult, error) {
		after, err := ParseDepartureAfter(in.DepartureAfter)
		if err != nil {
			return nil, nil, err
		}
		res, err := svc.FindNextTrain(ctx, in.From, in.To, after)
		if res != nil {
			res.Kind = "train"
		}
		return nil, res, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name: "train_status",
		Description: "Refresh a train found by find_next_train through its trainRef: live times, delay, platform and confidence, " +
			"cancellation, departed/arrived and every stop with its position relative to the requested destination.",
		Annotations: ro,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, *Snapshot, error) {
		snap, err := svc.Status(ctx, in.TrainRef)
		return nil, snap, err
	})
	return s
}
