package writeops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListRequest is list_write_operations' input.
type ListRequest struct {
	State  string `json:"state,omitempty" jsonschema:"only this state: scheduled, started, script_returned, unknown, failed, confirmed, needs_review, retry_exhausted"`
	Domain string `json:"domain,omitempty" jsonschema:"only mail, calendar or contacts"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20, at most 50)"`
}

// Summary is one bounded review line.
type Summary struct {
	ID              string `json:"operationId"`
	Kind            Kind   `json:"kind"`
	State           State  `json:"state"`
	Summary         string `json:"summary"`
	CreatedAt       string `json:"createdAt"`
	ScheduledFor    string `json:"scheduledFor,omitempty"`
	AttemptedAt     string `json:"attemptedAt,omitempty"`
	ConfirmAttempts int    `json:"confirmAttempts"`
	Error           string `json:"error,omitempty"`
	Note            string `json:"note,omitempty"`
}

// ListResult is list_write_operations' output.
type ListResult struct {
	Operations []Summary        `json:"operations"`
	Counts     map[State]int    `json:"counts"`
	Meaning    map[State]string `json:"meaning"`
}

// ReadRequest is read_write_operation's input.
type ReadRequest struct {
	OperationID string `json:"operationId" jsonschema:"id from list_write_operations or a write tool's result"`
}

// StateMeaning explains each state to the agent and the user.
var StateMeaning = map[State]string{
	StateScheduled:      "waiting for its send time; nothing sent yet",
	StateStarted:        "handed to the backend; outcome not recorded yet",
	StateReturned:       "the backend accepted it; waiting for evidence",
	StateUnknown:        "unclear whether it happened; only evidence is sought, it is never repeated automatically",
	StateFailed:         "the backend refused it; evidence is still checked",
	StateConfirmed:      "observed in the mirror or index",
	StateNeedsReview:    "no evidence after the confirmation limit: check the Sent folder; a new send needs an explicit request",
	StateRetryExhausted: "not confirmed after the limit (not rolled back): check the calendar or address book",
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}

// Summarize returns op's bounded review line.
func Summarize(op Operation) Summary {
	return Summary{ID: op.ID, Kind: op.Kind, State: op.State, Summary: clip(op.Summary, 160), CreatedAt: stamp(op.CreatedAt),
		ScheduledFor: stamp(op.ScheduledFor), AttemptedAt: stamp(op.AttemptedAt), ConfirmAttempts: op.ConfirmAttempts,
		Error: clip(op.Error, 240), Note: clip(op.Note, 240)}
}

// NewServer returns the read-only MCP server of the journal review tools
// (steward mcp writeops): list_write_operations and read_write_operation.
func NewServer(s *Store, version string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "steward-writeops", Version: version}, &mcp.ServerOptions{
		Instructions: "Review Steward's write journal: what was sent or changed, and whether it was confirmed. Read-only."})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}
	mcp.AddTool(srv, &mcp.Tool{Name: "list_write_operations", Annotations: ro, Description: "List journaled writes (mail sends, " +
		"calendar and contact changes) newest first with their state; needs_review and retry_exhausted rows need the user's attention."},
		func(ctx context.Context, _ *mcp.CallToolRequest, req ListRequest) (*mcp.CallToolResult, *ListResult, error) {
			f := Filter{Domain: Domain(req.Domain), Limit: req.Limit}
			if f.Limit <= 0 {
				f.Limit = 20
			}
			f.Limit = min(f.Limit, 50)
			if req.State != "" {
				if _, ok := StateMeaning[State(req.State)]; !ok {
					return nil, nil, fmt.Errorf("unknown state %q", req.State)
				}
				f.States = []State{State(req.State)}
			}
			ops, err := s.List(ctx, f)
			if err != nil {
				return nil, nil, err
			}
			counts, err := s.Stats(ctx)
			if err != nil {
				return nil, nil, err
			}
			out := &ListResult{Operations: []Summary{}, Counts: counts, Meaning: StateMeaning}
			for _, op := range ops {
				out.Operations = append(out.Operations, Summarize(op))
			}
			return nil, out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_write_operation", Annotations: ro, Description: "Read one journaled write: its full input, " +
		"backend result, error, confirmation attempts and the stored evidence."},
		// The output is declared as any: the stored JSON values (input,
		// evidence) have no fixed schema.
		func(ctx context.Context, _ *mcp.CallToolRequest, req ReadRequest) (*mcp.CallToolResult, any, error) {
			op, err := s.Get(ctx, req.OperationID)
			if errors.Is(err, ErrNotFound) {
				return nil, nil, fmt.Errorf("no write operation %q; list_write_operations shows the ids", req.OperationID)
			}
			if err != nil {
				return nil, nil, err
			}
			return nil, op, nil
		})
	return srv
}

func boolPtr(b bool) *bool { return &b }

// Handler serves the journal to the web app, with the same content as the
// review tools: GET /writeops (list_write_operations; ?state, ?domain,
// ?limit) and GET /writeops/{id} (read_write_operation).
func Handler(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		if id := r.PathValue("id"); id != "" {
			op, err := s.Get(r.Context(), id)
			if errors.Is(err, ErrNotFound) {
				w.WriteHeader(http.StatusNotFound)
				enc.Encode(map[string]string{"error": "no write operation " + id})
				return
			}
			if err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				enc.Encode(map[string]string{"error": "the write journal could not be read"})
				return
			}
			enc.Encode(struct {
				Operation
				Meaning string `json:"meaning"`
			}{op, StateMeaning[op.State]})
			return
		}
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		f := Filter{Domain: Domain(q.Get("domain")), Limit: max(1, min(limit, 200))}
		if limit == 0 {
			f.Limit = 50
		}
		if st := q.Get("state"); st != "" {
			f.States = []State{State(st)}
		}
		ops, err := s.List(r.Context(), f)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			enc.Encode(map[string]string{"error": "the write journal could not be read"})
			return
		}
		out := ListResult{Operations: []Summary{}, Meaning: StateMeaning}
		out.Counts, _ = s.Stats(r.Context())
		for _, op := range ops {
			out.Operations = append(out.Operations, Summarize(op))
		}
		enc.Encode(out)
	})
}
