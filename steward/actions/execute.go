package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/audit"
)

// ExecuteToolName is the host-native tool that runs a proposed step.
const ExecuteToolName = "execute_action_step"

// ExecuteRequest is execute_action_step's input.
type ExecuteRequest struct {
	ID          int64 `json:"id"`
	Alternative int   `json:"alternative"`
	Step        int   `json:"step"`
}

// Dispatcher calls a tool through the running turn's policy wrapper
// (policy.CallWrapped): a gated tool shows its approval card there.
type Dispatcher func(ctx context.Context, tool string, args json.RawMessage) (res agent.ToolResult, found bool, err error)

// ExecuteOptions configures ExecuteTool.
type ExecuteOptions struct {
	Open     func(ctx context.Context) (*Store, error)
	Dispatch Dispatcher
	// Record receives one tool-ledger row per direct step execution.
	Record func(ctx context.Context, tool string, d time.Duration, ok bool, errText string)
}

var executeSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"id":{"type":"integer","description":"the item id from list_actions"},` +
	`"alternative":{"type":"integer","minimum":0,"description":"index of the proposal alternative (default 0)"},` +
	`"step":{"type":"integer","minimum":0,"description":"index of the tool step within the alternative (default 0)"}},` +
	`"required":["id"],"additionalProperties":false}`)

// ExecuteTool returns execute_action_step: it runs one tool step of an
// item's proposal through the normal policy, so a prepared reply is still a
// gated mail write with its own approval card, and records the outcome in
// the item's diagnostics (the item is marked done when its last step ran).
// Policy allows the tool itself: the decision belongs to the step's tool.
func ExecuteTool(opts ExecuteOptions) agent.Tool {
	return &agent.ToolFunc{
		ToolSpec: agent.ToolSpec{Name: ExecuteToolName, Parameters: executeSchema,
			Description: "Run one tool step of an Action Center proposal (read_action shows them). The step's tool goes through the normal policy: " +
				"writes show the user an approval card with the exact arguments and run only if approved."},
		Fn: func(ctx context.Context, raw json.RawMessage) (agent.ToolResult, error) {
			var req ExecuteRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				return agent.ToolResult{Content: "invalid arguments: " + err.Error(), IsError: true}, nil
			}
			s, err := opts.Open(ctx)
			if err != nil {
				return agent.ToolResult{}, err
			}
			it, err := s.Get(ctx, req.ID)
			if err != nil {
				return agent.ToolResult{Content: notFoundHint(err).Error(), IsError: true}, nil
			}
			step, last, err := pickStep(it, req)
			if err != nil {
				return agent.ToolResult{Content: err.Error(), IsError: true}, nil
			}
			start := time.Now()
			res, found, err := opts.Dispatch(ctx, step.Tool, step.Args)
			if err != nil {
				return res, err
			}
			if !found {
				res = agent.ToolResult{Content: fmt.Sprintf("NOT DONE: the step's tool %s is not available in this session.", step.Tool), IsError: true}
			}
			if opts.Record != nil {
				opts.Record(ctx, step.Tool, time.Since(start), !res.IsError, clipText(res.Content, 200))
			}
			outcome := "ran"
			if res.IsError {
				outcome = "not done"
			}
			note := fmt.Sprintf("%s step %d.%d %s (%s): %s", time.Now().Format(time.RFC3339), req.Alternative, req.Step, step.Tool, outcome, clipText(res.Content, 240))
			if err := s.AddDiagnostic(ctx, it.ID, note); err != nil {
				return agent.ToolResult{}, err
			}
			s.audit(ctx, "action.executed", fmt.Sprintf("Action %d step %s %s", it.ID, step.Tool, outcome), audit.RiskMedium,
				map[string]any{"id": it.ID, "alternative": req.Alternative, "step": req.Step, "tool": step.Tool, "ok": !res.IsError})
			if !res.IsError && last {
				if err := s.SetStatus(ctx, it.ID, StatusDone); err != nil {
					return agent.ToolResult{}, err
				}
				res.Content += "\n(That was the proposal's last step: the Action Center item is marked done.)"
			}
			return res, nil
		},
	}
}

func pickStep(it *Item, req ExecuteRequest) (Step, bool, error) {
	if req.Alternative < 0 || req.Alternative >= len(it.Proposal) {
		return Step{}, false, fmt.Errorf("action %d has %d alternatives; alternative %d does not exist", it.ID, len(it.Proposal), req.Alternative)
	}
	alt := it.Proposal[req.Alternative]
	if req.Step < 0 || req.Step >= len(alt.Steps) {
		return Step{}, false, fmt.Errorf("alternative %d of action %d has %d steps; step %d does not exist", req.Alternative, it.ID, len(alt.Steps), req.Step)
	}
	st := alt.Steps[req.Step]
	if st.Type != "tool" || st.Tool == "" {
		return Step{}, false, fmt.Errorf("step %d is a manual step (%s): the user does it; nothing to execute", req.Step, st.Label)
	}
	if st.Tool == ExecuteToolName {
		return Step{}, false, fmt.Errorf("step %d names %s itself; refused", req.Step, ExecuteToolName)
	}
	return st, req.Step == len(alt.Steps)-1, nil
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// AddDiagnostic appends a line to an item's diagnostics.
func (s *Store) AddDiagnostic(ctx context.Context, id int64, line string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE items SET diagnostics = json_insert(diagnostics, '$[#]', ?), updated_at = ? WHERE id = ?`,
		line, s.opts.Now().UnixMilli(), id); err != nil {
		return fmt.Errorf("record diagnostics of action %d: %w", id, err)
	}
	return nil
}
