package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// ErrBusy is returned when a submission arrives while an Analyst turn runs;
// there is no queue.
var ErrBusy = errors.New("the Analyst is busy with another turn")

// MaxChatMessage bounds one submission.
const MaxChatMessage = 64 << 10

// TurnResult is how an Analyst turn ended.
type TurnResult struct {
	ID      string    `json:"id"`
	Text    string    `json:"text"`
	Error   string    `json:"error,omitempty"`
	EndedAt time.Time `json:"ended_at"`
	// sessionErr is set when the turn's own session could not be read or
	// written (not an attempt failure such as the provider's or a tool's).
	sessionErr error
}

// AnalystInfo is the Analyst's identity and availability.
type AnalystInfo struct {
	Agent   string      `json:"agent"`
	Session string      `json:"session"`
	Busy    bool        `json:"busy"`
	TurnID  string      `json:"turn_id,omitempty"`
	Last    *TurnResult `json:"last,omitempty"`
}

// Analyst is the one serial global session of the configured Analyst.
type Analyst struct {
	rt     *Runtime
	mu     sync.Mutex
	busy   bool
	turnID string
	done   chan struct{}
	last   *TurnResult
	closed bool
	cancel context.CancelFunc
}

func newAnalyst(rt *Runtime) *Analyst { return &Analyst{rt: rt} }

// Info returns the Analyst's identity and availability.
func (a *Analyst) Info() AnalystInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	name := a.rt.p.Workflows.Analyst()
	info := AnalystInfo{Agent: name, Session: a.rt.globalSession(name).id, Busy: a.busy, Last: a.last}
	if a.busy {
		info.TurnID = a.turnID
	}
	return info
}

// Submit accepts one operator message and starts a turn. The message is
// appended to the session before Submit returns; the turn runs in the
// background. done is closed when the turn has ended.
func (a *Analyst) Submit(ctx context.Context, text string) (id string, done <-chan struct{}, err error) {
	if !a.rt.AnalystMode().Internal() {
		return "", nil, ErrInternalDisabled
	}
	if strings.TrimSpace(text) == "" {
		return "", nil, errors.New("the message is empty")
	}
	if len(text) > MaxChatMessage {
		return "", nil, fmt.Errorf("the message is %d bytes; the limit is %d", len(text), MaxChatMessage)
	}
	a.rt.mu.Lock()
	held := a.rt.heldLocked()
	a.rt.mu.Unlock()
	if held {
		return "", nil, ErrMaintenanceHold
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return "", nil, errors.New("the server is shutting down")
	case a.busy:
		return "", nil, ErrBusy
	}
	name := a.rt.p.Workflows.Analyst()
	ag, ok := a.rt.p.Workflows.Agent(name)
	if !ok {
		return "", nil, fmt.Errorf("analyst agent %q is not configured", name)
	}
	route, ok := a.rt.models.Route(ag.ModelRoute)
	if !ok {
		return "", nil, fmt.Errorf("analyst route %q is not bound", ag.ModelRoute)
	}
	sess := a.rt.globalSession(name)
	if _, err := sess.settle(false); err != nil {
		return "", nil, err
	}
	id = state.NewUUID()
	if err := sess.append(markerRow(id, markerTurn, map[string]any{"submission": id}), userRow(id, "", text)); err != nil {
		return "", nil, err
	}
	turnCtx, cancel := context.WithCancel(context.Background())
	a.busy, a.turnID, a.cancel = true, id, cancel
	ch := make(chan struct{})
	a.done = ch
	a.rt.hint("analyst", "")
	go a.turn(turnCtx, id, sess, route, ag.BoundTools(), ch)
	return id, ch, nil
}

// Wait waits for the current turn (if any) and returns the latest result.
func (a *Analyst) Wait(ctx context.Context) (*TurnResult, error) {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, nil
}

func (a *Analyst) turn(ctx context.Context, id string, sess *session, route RouteBinding, names []string, done chan struct{}) {
	rt := a.rt
	env, _ := rt.analystEnv("")
	bound, buildErr := tools.Build(names, env)
	out := rt.globalTurn(ctx, sess, id, route, bound, buildErr, "Records are read and written through record paths "+
		"(record:CARD/NAME, record:CARD/NAME@N for an exact version). Card maintenance needs the runtime stopped or paused.")
	rt.logEvent("analyst_turn", map[string]any{"turn": id, "error": out.Error})
	a.mu.Lock()
	a.busy, a.last, a.cancel = false, out, nil
	a.mu.Unlock()
	close(done)
	rt.hint("analyst", "")
}

// globalTurn runs one turn of a global session (the Analyst, an Oversight
// check) over the session's current rows, whose last rows are the turn's
// marker and input. A failed turn leaves a notice for the next one; tools
// that could not be built (buildErr) fail the turn before any model call.
func (rt *Runtime) globalTurn(ctx context.Context, sess *session, id string, route RouteBinding, bound []agent.Tool, buildErr error, guidance string) *TurnResult {
	ag, _ := rt.p.Workflows.Agent(sess.agent)
	iv := &invoker{rt: rt, route: route, sess: sess, system: func() string {
		var b strings.Builder
		if ag.Prompt != nil {
			b.WriteString(strings.TrimSpace(ag.Prompt.Text) + "\n\n")
		}
		fmt.Fprintf(&b, "You are the %s of the Saivage project in %s. %s", sess.agent, rt.root(), guidance)
		return b.String()
	}, tail: func(ctx context.Context) stateSnapshot {
		st := rt.Status()
		root, err := rt.p.Cards.Get(ctx, cards.RootID)
		if err != nil {
			return stateSnapshot{}
		}
		return stateSnapshot{text: fmt.Sprintf("Runtime status: %s. Root card %s is %s. Active cards: %v.", st.Status, root.ID, root.Status, st.Activations)}
	}}
	cur, err := sess.current()
	sessionErr := err
	if err == nil {
		err = buildErr
	}
	var res *agent.RunResult
	var runErr error
	rec := newRecorder(sess, id, func() bool { return ctx.Err() != nil }, func(error) {})
	if err == nil {
		res, runErr = agent.Run(ctx, agent.RunOptions{Model: iv, ModelName: route.Public, Messages: rowsToMessages(cur.Rows),
			Tools: bound, MaxSteps: rt.opts.MaxNodeSteps, OnEvent: rec.on})
	}
	out := &TurnResult{ID: id, EndedAt: time.Now().UTC(), sessionErr: sessionErr}
	switch {
	case err != nil:
		out.Error = err.Error()
	case rec.err != nil:
		out.Error = rec.err.Error()
		out.sessionErr = rec.err
	case runErr != nil:
		out.Error = rt.redact(runErr.Error())
	}
	if res != nil {
		out.Text = res.Text
	}
	if out.Error != "" && ctx.Err() == nil {
		_ = sess.append(noticeRow("turn-"+state.NewUUID(), "The previous turn ended with an error: "+out.Error))
	}
	return out
}

// refuse refuses new submissions; a running turn goes on.
func (a *Analyst) refuse() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
}

// close refuses new submissions and cancels a running turn.
func (a *Analyst) close() {
	a.mu.Lock()
	a.closed = true
	cancel, done := a.cancel, a.done
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
