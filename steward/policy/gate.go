package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/agent"
)

// DefaultApprovalTimeout is APPROVAL_TIMEOUT_MS's default.
const DefaultApprovalTimeout = 5 * time.Minute

// Verdict is how an approval request ended.
type Verdict string

// Verdicts. Only VerdictDenied is described to the model as a user's refusal.
const (
	VerdictApproved  Verdict = "approved"
	VerdictDenied    Verdict = "denied"
	VerdictRevise    Verdict = "revise"
	VerdictTimeout   Verdict = "timeout"
	VerdictNoChannel Verdict = "no_channel"
)

// ApprovalRequest is what an approval card shows.
type ApprovalRequest struct {
	ID        string          `json:"approvalId"`
	CallID    string          `json:"callId"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	ExpiresAt time.Time       `json:"expiresAt"`
}

// ApprovalResponse is the user's answer.
type ApprovalResponse struct {
	Verdict Verdict
	// Args replaces the model's arguments when the user approved with edits.
	Args json.RawMessage
	Note string
}

// Approver asks the user. It returns when the user answered, when ctx ends
// (the gate then reports a timeout) or at once with VerdictNoChannel when no
// client can show the card.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (ApprovalResponse, error)
}

// Preflighter is implemented by tools that validate (and may normalise)
// their arguments before an approval card is shown.
type Preflighter interface {
	Preflight(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// Observer hears every decision and approval outcome (for the audit trail).
type Observer interface {
	Decided(ctx context.Context, tool string, d Decision, args json.RawMessage)
	Resolved(ctx context.Context, req ApprovalRequest, resp ApprovalResponse)
}

// WrapOptions configures Wrap.
type WrapOptions struct {
	Policy   *Policy
	Approver Approver
	Timeout  time.Duration // default DefaultApprovalTimeout
	Observer Observer      // optional
	NewID    func() string // approval ids
}

// Wrap returns the tools as the agent must see them: each call passes
// through the policy.
func Wrap(tools []agent.Tool, opts WrapOptions) []agent.Tool {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultApprovalTimeout
	}
	out := make([]agent.Tool, 0, len(tools))
	for _, t := range tools {
		out = append(out, &gated{inner: t, opts: opts, schema: &argSchema{raw: t.Spec().Parameters}})
	}
	return out
}

type gated struct {
	inner  agent.Tool
	opts   WrapOptions
	schema *argSchema
}

func (g *gated) Spec() agent.ToolSpec { return g.inner.Spec() }

// Blocked results, stable so the model and tests can recognise them.
const (
	BlockedByPolicy = "NOT DONE: this tool is blocked by Steward's policy; do not retry it."
	BlockedDenied   = "NOT DONE: denied by user."
	BlockedTimeout  = "NOT DONE: the approval request timed out, so the action was not performed."
	BlockedNoClient = "NOT DONE: no approval channel was available (no app connected), so the action was not performed."
	RevisionPrefix  = "NOT DONE: the user asked you to revise this proposal before it runs."
	// InvalidProposal starts the result of a call refused before any card
	// was shown: the model can correct the arguments and call again.
	InvalidProposal = "Invalid proposal, nothing was shown to the user: "
)

func (g *gated) Call(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
	spec := g.inner.Spec()
	d := g.opts.Policy.Decide(spec.Name)
	if g.opts.Observer != nil {
		g.opts.Observer.Decided(ctx, spec.Name, d, args)
	}
	switch d {
	case Allow:
		return g.inner.Call(ctx, args)
	case Deny:
		return agent.ToolResult{Content: BlockedByPolicy, IsError: true, Blocked: true}, nil
	}

	if err := g.schema.check(args); err != nil {
		return agent.ToolResult{Content: InvalidProposal + "the arguments do not match the tool's input schema: " + err.Error() +
			". Correct them and call the tool again.", IsError: true}, nil
	}
	pre, canPreflight := g.inner.(Preflighter)
	if canPreflight {
		norm, err := pre.Preflight(ctx, args)
		if err != nil {
			return agent.ToolResult{Content: InvalidProposal + err.Error(), IsError: true}, nil
		}
		args = norm
	}
	call, _ := agent.CallFrom(ctx)
	req := ApprovalRequest{CallID: call.CallID, Tool: spec.Name, Args: args, Schema: spec.Parameters,
		ExpiresAt: time.Now().Add(g.opts.Timeout)}
	if g.opts.NewID != nil {
		req.ID = g.opts.NewID()
	}
	actx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	resp, err := g.opts.Approver.Approve(actx, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return agent.ToolResult{}, ctx.Err() // the turn itself was aborted
		}
		if errors.Is(err, context.DeadlineExceeded) {
			resp = ApprovalResponse{Verdict: VerdictTimeout}
		} else {
			resp = ApprovalResponse{Verdict: VerdictNoChannel, Note: err.Error()}
		}
	}
	if g.opts.Observer != nil {
		g.opts.Observer.Resolved(ctx, req, resp)
	}
	switch resp.Verdict {
	case VerdictApproved:
	case VerdictDenied:
		return blocked(BlockedDenied, resp.Note), nil
	case VerdictRevise:
		return blocked(RevisionPrefix, resp.Note), nil
	case VerdictTimeout:
		return blocked(BlockedTimeout, ""), nil
	default:
		return blocked(BlockedNoClient, ""), nil
	}

	effective := args
	edited := len(resp.Args) > 0 && string(resp.Args) != "null"
	if edited {
		cleaned, err := dropAbsentOptionals(resp.Args, spec.Parameters)
		if err != nil {
			return blocked("NOT DONE: the edited arguments are not a JSON object", ""), nil
		}
		effective = cleaned
		if err := g.schema.check(effective); err != nil {
			return blocked("NOT DONE: the user's edited arguments do not match the tool's input schema: "+err.Error(), ""), nil
		}
		if canPreflight {
			if effective, err = pre.Preflight(ctx, effective); err != nil {
				return blocked("NOT DONE: the user's edited arguments are invalid: "+err.Error(), ""), nil
			}
		}
	}
	res, err := g.inner.Call(ctx, effective)
	if err != nil {
		return res, err
	}
	if edited && !agent.SameArgs(effective, args) {
		res.EffectiveArgs = effective
		res.Content = fmt.Sprintf("(The user edited the arguments before approving; it ran with %s.)\n%s", effective, res.Content)
	}
	return res, nil
}

func blocked(msg, note string) agent.ToolResult {
	if note != "" {
		msg += " The user's note: " + note
	}
	return agent.ToolResult{Content: msg, IsError: true, Blocked: true}
}

// dropAbsentOptionals removes null-valued fields the schema does not
// require: an optional field the user left empty stays absent instead of
// becoming an invented empty value.
func dropAbsentOptionals(args, schema json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return nil, errors.New("not an object")
	}
	var s struct {
		Required []string `json:"required"`
	}
	json.Unmarshal(schema, &s)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for k, v := range obj {
		if string(v) == "null" && !required[k] {
			delete(obj, k)
		}
	}
	return json.Marshal(obj)
}

type wrappedKey struct{}

// WithWrapped returns ctx carrying a turn's policy-wrapped tools, so that a
// host tool which runs another tool for the model (the Action Center's
// execute_action_step) reaches it through the same policy and approval card
// rather than around them.
func WithWrapped(ctx context.Context, tools []agent.Tool) context.Context {
	return context.WithValue(ctx, wrappedKey{}, tools)
}

// CallWrapped calls the tool named name among ctx's wrapped tools. found is
// false when the turn carries no wrapped tools or none of that name.
func CallWrapped(ctx context.Context, name string, args json.RawMessage) (res agent.ToolResult, found bool, err error) {
	tools, _ := ctx.Value(wrappedKey{}).([]agent.Tool)
	for _, t := range tools {
		if t.Spec().Name == name {
			res, err = t.Call(ctx, args)
			return res, true, err
		}
	}
	return agent.ToolResult{}, false, nil
}
