package actions

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListRequest is list_actions' input.
type ListRequest struct {
	Status         string `json:"status,omitempty" jsonschema:"only this status: new, read, done or dismissed"`
	IncludeHandled bool   `json:"includeHandled,omitempty" jsonschema:"also list done and dismissed items (default: open items only)"`
	HideExpired    bool   `json:"hideExpired,omitempty" jsonschema:"leave out items whose due date has passed (undated items stay)"`
	Limit          int    `json:"limit,omitempty" jsonschema:"at most this many, most recently updated first (default 20)"`
	IncludePayload bool   `json:"includePayload,omitempty" jsonschema:"include proposals, diagnostics and context snapshots (large); read_action gives one item in full"`
}

// IDRequest names one item.
type IDRequest struct {
	ID int64 `json:"id" jsonschema:"the item id from list_actions"`
}

// StatusRequest is update_action_status' input.
type StatusRequest struct {
	ID     int64  `json:"id" jsonschema:"the item id from list_actions"`
	Status string `json:"status" jsonschema:"new, read, done or dismissed"`
}

// ReviseRequest is revise_action's input.
type ReviseRequest struct {
	ID          int64  `json:"id" jsonschema:"the item id from list_actions"`
	Instruction string `json:"instruction" jsonschema:"what to change in the proposal, in the user's words"`
}

// FlowRequest is create_flow's input (the approval card lets the user edit each field).
type FlowRequest struct {
	Name       string `json:"name" jsonschema:"short name of the procedure"`
	Trigger    string `json:"trigger" jsonschema:"the situation that triggers it, e.g. a purchase confirmation from a shop"`
	Guidance   string `json:"guidance" jsonschema:"what Steward should propose when it applies"`
	Exclusions string `json:"exclusions,omitempty" jsonschema:"when it must not apply"`
}

// FlowUpdateRequest is update_flow's input; absent fields keep their value.
type FlowUpdateRequest struct {
	ID         int64   `json:"id" jsonschema:"the flow id from list_flows"`
	Name       *string `json:"name,omitempty"`
	Trigger    *string `json:"trigger,omitempty"`
	Guidance   *string `json:"guidance,omitempty"`
	Exclusions *string `json:"exclusions,omitempty"`
	Enabled    *bool   `json:"enabled,omitempty" jsonschema:"false disables the flow without deleting it"`
}

// SearchFlowsRequest is search_flows' input.
type SearchFlowsRequest struct {
	Query string `json:"query" jsonschema:"the situation to match against the flows' triggers"`
}

// FlowList is list_flows' and search_flows' output.
type FlowList struct {
	Flows []Flow `json:"flows"`
}

// Changed is the output of the tools that only change state.
type Changed struct {
	OK bool   `json:"ok"`
	ID int64  `json:"id"`
	To string `json:"status,omitempty"`
}

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Open opens the store; it is retried on each call until it succeeds.
	Open func(ctx context.Context) (*Store, error)
	// Planner revises proposals; nil makes revise_action report that no
	// model is configured.
	Planner *Planner
	// Flows embeds flows for search_flows; nil ranks lexically.
	Flows   FlowEmbedder
	Version string
}

// ListSchema is list_actions' input schema: limit is declared 1–100, so an
// MCP client's limit of 1000 is rejected before the store (which clamps
// direct callers on its own) is reached.
func ListSchema() *jsonschema.Schema {
	s, err := jsonschema.For[ListRequest](nil)
	if err != nil {
		panic(err) // a static type: cannot fail at run time
	}
	lo, hi := 1.0, float64(MaxListLimit)
	s.Properties["limit"].Minimum, s.Properties["limit"].Maximum = &lo, &hi
	s.Properties["status"].Enum = []any{"new", "read", "done", "dismissed"}
	return s
}

// NewServer returns the Action Center's MCP server (steward mcp actions):
// list_actions and read_action (reads), update_action_status and
// revise_action, and the flow tools list_flows, search_flows, read_flow,
// create_flow, update_flow and delete_flow. execute_action_step is the
// host's (ExecuteTool): it must run the step through the host's policy.
func NewServer(opts ServerOptions) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "steward-actions", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "Steward's Action Center: background items of work that may need the user, with proposed steps. " +
			"list_actions gives compact summaries; read_action one item in full. Run a proposed step with execute_action_step, " +
			"which goes through the normal approval for every write. Flows are the user's saved procedures."})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	local := &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	open := func(ctx context.Context) (*Store, error) { return opts.Open(ctx) }

	// Items are returned as any: step arguments are JSON of no fixed schema,
	// which an inferred output schema would reject.
	mcp.AddTool(srv, &mcp.Tool{Name: "list_actions", Annotations: ro, InputSchema: ListSchema(),
		Description: "List Action Center items (open ones by default), most recently updated first, with total and visible counts per status. " +
			"Compact summaries unless includePayload is true; limit 1–100."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req ListRequest) (*mcp.CallToolResult, any, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			res, err := s.List(ctx, ListOptions{Status: Status(req.Status), IncludeHandled: req.IncludeHandled, HideExpired: req.HideExpired,
				Limit: req.Limit, IncludePayload: req.IncludePayload})
			if err != nil {
				return nil, nil, err
			}
			return nil, res, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_action", Annotations: ro,
		Description: "Read one Action Center item in full: proposal alternatives with their steps, diagnostics and the context snapshot it was planned from."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req IDRequest) (*mcp.CallToolResult, any, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			it, err := s.Get(ctx, req.ID)
			if err != nil {
				return nil, nil, notFoundHint(err)
			}
			return nil, it, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "update_action_status", Annotations: local,
		Description: "Mark an Action Center item new, read, done or dismissed. Done and dismissed items stay closed until newer mail arrives on their thread."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req StatusRequest) (*mcp.CallToolResult, *Changed, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			if err := s.SetStatus(ctx, req.ID, Status(req.Status)); err != nil {
				return nil, nil, notFoundHint(err)
			}
			return nil, &Changed{OK: true, ID: req.ID, To: req.Status}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "revise_action", Annotations: local,
		Description: "Produce a corrected proposal for an item from the user's instruction; the item's original trigger and context stay as recorded."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req ReviseRequest) (*mcp.CallToolResult, any, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			if req.Instruction == "" {
				return nil, nil, errors.New("instruction is required: say what to change")
			}
			it, err := s.Get(ctx, req.ID)
			if err != nil {
				return nil, nil, notFoundHint(err)
			}
			st, err := s.Settings(ctx)
			if err != nil {
				return nil, nil, err
			}
			summary, alts, err := opts.Planner.Revise(ctx, it, req.Instruction, st.TextLanguage)
			if err != nil {
				return nil, nil, err
			}
			if len(alts) == 0 {
				return nil, nil, errors.New("the revision produced no executable alternative; the proposal is unchanged")
			}
			if it, err = s.Revise(ctx, req.ID, summary, req.Instruction, alts); err != nil {
				return nil, nil, err
			}
			return nil, it, nil
		})

	mcp.AddTool(srv, &mcp.Tool{Name: "list_flows", Annotations: ro, Description: "List the user's saved flows (reusable procedures), enabled or not."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *FlowList, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			fl, err := s.Flows(ctx, false)
			return nil, &FlowList{Flows: fl}, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "search_flows", Annotations: ro, Description: "Find at most two enabled flows whose triggering situation may match a description."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req SearchFlowsRequest) (*mcp.CallToolResult, *FlowList, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			fl, err := s.RetrieveFlows(ctx, req.Query, opts.Flows)
			if fl == nil {
				fl = []Flow{}
			}
			return nil, &FlowList{Flows: fl}, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_flow", Annotations: ro, Description: "Read one flow's current version."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req IDRequest) (*mcp.CallToolResult, *Flow, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			f, err := s.Flow(ctx, req.ID)
			return nil, f, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "create_flow", Annotations: local,
		Description: "Save a reusable procedure the user described (name, triggering situation, guidance, exclusions). The user reviews and may edit every field on the approval card. Flows guide proposals; they never run writes by themselves."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req FlowRequest) (*mcp.CallToolResult, *Flow, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			f, err := s.CreateFlow(ctx, FlowFromRequest(req))
			return nil, f, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "update_flow", Annotations: local,
		Description: "Change a flow (a new version; items keep the version they applied) or enable/disable it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req FlowUpdateRequest) (*mcp.CallToolResult, *Flow, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			f, err := s.UpdateFlow(ctx, req.ID, FlowUpdate{Name: req.Name, Trigger: req.Trigger, Guidance: req.Guidance, Exclusions: req.Exclusions, Enabled: req.Enabled})
			return nil, f, err
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_flow", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		Description: "Delete a flow. Items that applied it keep its recorded name and version."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req IDRequest) (*mcp.CallToolResult, *Changed, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, nil, err
			}
			if err := s.DeleteFlow(ctx, req.ID); err != nil {
				return nil, nil, err
			}
			return nil, &Changed{OK: true, ID: req.ID}, nil
		})
	return srv
}

// FlowFromRequest converts create_flow's input.
func FlowFromRequest(r FlowRequest) Flow {
	return Flow{Name: r.Name, Trigger: r.Trigger, Guidance: r.Guidance, Exclusions: r.Exclusions}
}

func notFoundHint(err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w; list_actions shows the ids", err)
	}
	return err
}

func ptr[T any](v T) *T { return &v }
