package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// Principals of the Analyst operation surface: the label names the
// credential that was used (the operator token, the external MCP token),
// not a verified client identity.
const (
	PrincipalOperator = "operator"
	PrincipalExternal = "external:mcp"
)

// ErrUnknownOperation says that the configured Analyst does not hold the
// named tool; a caller cannot borrow a tool the Analyst was not given.
var ErrUnknownOperation = errors.New("not one of the configured Analyst's tools")

// ErrInternalDisabled refuses internal Analyst submissions in external-only
// mode, before anything is appended or any provider is called.
var ErrInternalDisabled = errors.New("the internal Analyst is disabled (analyst mode external): drive the project through the external MCP endpoint or restart with --analyst-mode internal|both")

// operations owns the Analyst operations invoked outside a model turn:
// they run under an app-lifetime context, so a caller that goes away
// neither cancels nor repeats them, and Close joins them.
type operations struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	n      int // operations running
}

// running returns how many operations run.
func (o *operations) running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

func newOperations() *operations {
	ctx, cancel := context.WithCancel(context.Background())
	return &operations{ctx: ctx, cancel: cancel}
}

// close refuses new operations, cancels running ones and joins them.
func (o *operations) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}

// AnalystMode returns the mode frozen at start.
func (rt *Runtime) AnalystMode() config.AnalystMode {
	if rt.opts.AnalystMode == "" {
		return config.AnalystInternal
	}
	return rt.opts.AnalystMode
}

// analystEnv binds the configured Analyst's tool environment; principal is
// "" for the Analyst model itself.
func (rt *Runtime) analystEnv(principal string) (*tools.Env, []string) {
	name := rt.p.Workflows.Analyst()
	ag, _ := rt.p.Workflows.Agent(name)
	return rt.toolEnv(tools.Caller{Agent: name, RecordWrites: ag.MayWrite, Tools: ag.Tools, Principal: principal}), ag.Tools
}

// AnalystTools returns the specs of the configured Analyst's tools this
// build implements: the operation surface shared by operator commands and
// the external MCP endpoint.
func (rt *Runtime) AnalystTools() []agent.ToolSpec {
	env, names := rt.analystEnv(PrincipalOperator)
	bound, _ := tools.Build(names, env)
	out := make([]agent.ToolSpec, 0, len(bound))
	for _, t := range bound {
		out = append(out, t.Spec())
	}
	return out
}

// OperationReceipt is the body-free record of one settled operation: no
// arguments, no result content.
type OperationReceipt struct {
	ID        string    `json:"call_id"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"`
	OK        bool      `json:"ok"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// Operate invokes one of the configured Analyst's tools for principal with
// the same policy as the Analyst model's calls (the tools check intervention
// readiness and record authority themselves). The operation runs under the
// runtime's lifetime: when ctx ends first, Operate returns ctx's error
// while the operation continues and settles on its own. Each settled
// operation is audited: a control_action for the operator, a body-free
// external_tool_call receipt for external callers.
func (rt *Runtime) Operate(ctx context.Context, principal, name string, args json.RawMessage) (agent.ToolResult, error) {
	env, names := rt.analystEnv(principal)
	if !slices.Contains(names, name) {
		return agent.ToolResult{}, fmt.Errorf("%s: %w", name, ErrUnknownOperation)
	}
	bound, _ := tools.Build([]string{name}, env)
	if len(bound) == 0 {
		return agent.ToolResult{}, fmt.Errorf("%s is configured for the Analyst but not implemented in this build: %w", name, ErrUnknownOperation)
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	rt.mu.Lock()
	held := rt.heldLocked()
	rt.mu.Unlock()
	if held {
		return agent.ToolResult{}, ErrMaintenanceHold
	}
	o := rt.ops
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return agent.ToolResult{}, errors.New("the server is shutting down")
	}
	o.wg.Add(1)
	o.n++
	o.mu.Unlock()
	type outcome struct {
		res agent.ToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			o.mu.Lock()
			o.n--
			o.mu.Unlock()
			o.wg.Done()
		}()
		rc := OperationReceipt{ID: state.NewUUID(), Tool: name, Principal: principal, StartedAt: time.Now().UTC()}
		res, err := bound[0].Call(o.ctx, args)
		rc.EndedAt, rc.OK = time.Now().UTC(), err == nil && !res.IsError
		if principal == PrincipalOperator {
			rt.logEvent("control_action", map[string]any{"action": name, "author": principal, "ok": rc.OK})
		} else {
			rt.logEvent("external_tool_call", map[string]any{"call_id": rc.ID, "tool": name, "principal": principal, "ok": rc.OK,
				"started_at": rc.StartedAt, "ended_at": rc.EndedAt, "duration_ms": rc.EndedAt.Sub(rc.StartedAt).Milliseconds()})
		}
		if err != nil {
			err = errors.New(rt.redact(err.Error()))
		}
		res.Content = rt.redact(res.Content)
		done <- outcome{res, err}
	}()
	select {
	case out := <-done:
		return out.res, out.err
	case <-ctx.Done():
		return agent.ToolResult{}, ctx.Err()
	}
}
