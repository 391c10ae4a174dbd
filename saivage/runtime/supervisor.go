package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// Status is the Supervisor's runtime status.
type Status string

// Runtime statuses.
const (
	StatusUninitialized Status = "uninitialized"
	StatusStarting      Status = "starting"
	StatusRunning       Status = "running"
	StatusPausing       Status = "pausing"
	StatusPaused        Status = "paused"
	StatusStopped       Status = "stopped"
	StatusClosing       Status = "closing"
	StatusError         Status = "error"
)

// StatusView is the public runtime observation.
type StatusView struct {
	Status Status `json:"status"`
	// RunID identifies the current Run (empty when none is active).
	RunID string `json:"run_id,omitempty"`
	// Activations is the chain of cards being executed, root first.
	Activations []string `json:"activations"`
	// ModelCallsInFlight counts autonomous model calls admitted through
	// the gate and not yet finished.
	ModelCallsInFlight int `json:"model_calls_in_flight"`
	// Error explains StatusError.
	Error string `json:"error,omitempty"`
	// LastRun describes the most recent settled Run.
	LastRun *RunSummary `json:"last_run,omitempty"`
}

// RunSummary is how a Run ended.
type RunSummary struct {
	RunID    string    `json:"run_id"`
	Outcome  string    `json:"outcome"` // done, failed, blocked, stopped, error
	EndedAt  time.Time `json:"ended_at"`
	RootCard string    `json:"root_status,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// Errors of control operations.
var (
	ErrNotAdmitted = errors.New("not admitted in the current runtime status")
	// errHalt is the cancellation cause of a Stop or close.
	errHalt = errors.New("the runtime was stopped")
)

// Status returns the current observation.
func (rt *Runtime) Status() StatusView {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	v := StatusView{Status: rt.status, RunID: rt.runID, Activations: slices.Clone(rt.stack), ModelCallsInFlight: rt.inflight, LastRun: rt.lastRun}
	if v.Activations == nil {
		v.Activations = []string{}
	}
	if rt.status == StatusError && rt.runErr != nil {
		v.Error = rt.runErr.Error()
	}
	return v
}

func (rt *Runtime) setStatusLocked(s Status) {
	if rt.status == s {
		return
	}
	rt.status = s
	rt.oversight.statusChanged(s)
	rt.observe(Observation{Kind: ObsStatus, Status: s})
	rt.hint("runtime", "")
}

// InterventionAllowed admits operator and Analyst card maintenance only
// when the runtime is stopped or fully paused.
func (rt *Runtime) InterventionAllowed() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch rt.status {
	case StatusStopped, StatusPaused:
		return nil
	}
	return fmt.Errorf("the runtime is %s; card maintenance needs it stopped or paused (pause_runtime first)", rt.status)
}

// Run starts a Run: recovery of cards left running, then activation of the
// root card. It returns once the Run is launched.
func (rt *Runtime) Run(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.heldLocked() {
		return fmt.Errorf("run: %w", ErrMaintenanceHold)
	}
	if err := rt.Failure(); err != nil {
		return fmt.Errorf("run: the server is closing after an unexpected owner failure (%v): %w", err, ErrNotAdmitted)
	}
	switch rt.status {
	case StatusStopped:
	case StatusError:
		return fmt.Errorf("run: the runtime is in error (%v); restart the server", rt.runErr)
	default:
		return fmt.Errorf("run: the runtime is %s: %w", rt.status, ErrNotAdmitted)
	}
	root, err := rt.p.Cards.Get(ctx, cards.RootID)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if root.Status != cards.Running && !root.Status.AdmitsActivation() {
		return fmt.Errorf("run: the root card is %s; reopen it (or a card below it) before a new Run", root.Status)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	rt.runID = state.NewUUID()
	rt.runCancel = cancel
	rt.paused = false
	rt.resume = make(chan struct{})
	rt.runDone = make(chan struct{})
	rt.setStatusLocked(StatusRunning)
	runID := rt.runID
	rt.logEvent("run_started", map[string]any{"run_id": runID})
	go rt.runLoop(runCtx, runID, rt.runDone)
	return nil
}

// runLoop recovers and executes the root; it settles the Run's status.
func (rt *Runtime) runLoop(ctx context.Context, runID string, done chan struct{}) {
	defer close(done)
	var out tools.ChildOutcome
	err := rt.recoverChain(ctx)
	if err == nil {
		out, err = rt.executeCard(ctx, cards.RootID)
		// An urgent root replacement: the root was stopped; one STOPPED
		// activation replaces it in the same Run.
		for err == nil && out.Status == string(cards.Stopped) && ctx.Err() == nil {
			rt.logEvent("root_replaced", map[string]any{"run_id": runID, "reason": out.Reason})
			out, err = rt.executeCard(ctx, cards.RootID)
		}
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	sum := &RunSummary{RunID: runID, EndedAt: time.Now().UTC(), RootCard: out.Status}
	switch {
	case errors.Is(context.Cause(ctx), errHalt):
		sum.Outcome = "stopped"
		if c := context.Cause(ctx); c != errHalt {
			sum.Reason = c.Error() // a halt with a reason (a refused urgent continuation)
		}
		// Stop settles the status after joining.
	case err != nil:
		sum.Outcome, sum.Reason = "error", err.Error()
		rt.runErr = err
		rt.setStatusLocked(StatusError)
	default:
		sum.Outcome, sum.Reason = out.Status, out.Reason
		rt.setStatusLocked(StatusStopped)
	}
	rt.lastRun = sum
	rt.runID, rt.runCancel = "", nil
	rt.paused = false
	rt.logEvent("run_ended", map[string]any{"run_id": runID, "outcome": sum.Outcome, "reason": sum.Reason})
}

// Pause blocks new autonomous model calls; running tools and processes
// finish. The status is pausing until no admitted model call is in flight.
func (rt *Runtime) Pause(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch rt.status {
	case StatusPausing, StatusPaused:
		if rt.hold != nil {
			rt.hold.withdrawn = true // an ordinary Pause takes the hold's pause over
		}
		return nil
	case StatusRunning:
	default:
		return fmt.Errorf("pause: the runtime is %s: %w", rt.status, ErrNotAdmitted)
	}
	rt.paused = true
	if rt.inflight == 0 {
		rt.setStatusLocked(StatusPaused)
	} else {
		rt.setStatusLocked(StatusPausing)
	}
	rt.logEvent("run_paused", map[string]any{"run_id": rt.runID})
	return nil
}

// Resume reopens the gate of the same Run.
func (rt *Runtime) Resume(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.heldLocked() {
		return fmt.Errorf("resume: %w", ErrMaintenanceHold)
	}
	if err := rt.Failure(); err != nil {
		return fmt.Errorf("resume: the server is closing after an unexpected owner failure (%v): %w", err, ErrNotAdmitted)
	}
	switch rt.status {
	case StatusPausing, StatusPaused:
	case StatusRunning:
		return nil
	default:
		return fmt.Errorf("resume: the runtime is %s: %w", rt.status, ErrNotAdmitted)
	}
	rt.paused = false
	close(rt.resume)
	rt.resume = make(chan struct{})
	rt.setStatusLocked(StatusRunning)
	rt.logEvent("run_resumed", map[string]any{"run_id": rt.runID})
	return nil
}

// Stop halts the Run: it cancels every activation, kills card processes
// and joins. No card outcome is written; cards left running are recovered
// by the next Run. Stopping a stopped runtime does nothing.
func (rt *Runtime) Stop(ctx context.Context) error {
	rt.mu.Lock()
	switch rt.status {
	case StatusStopped:
		rt.mu.Unlock()
		return nil
	case StatusRunning, StatusPausing, StatusPaused:
	default:
		st := rt.status
		rt.mu.Unlock()
		return fmt.Errorf("stop: the runtime is %s: %w", st, ErrNotAdmitted)
	}
	return rt.haltLocked(ctx, StatusStopped)
}

// haltLocked cancels the Run, joins it and settles to final. rt.mu is held
// on entry and released.
func (rt *Runtime) haltLocked(ctx context.Context, final Status) error {
	cancel, done, runID := rt.runCancel, rt.runDone, rt.runID
	rt.setStatusLocked(StatusClosing)
	rt.mu.Unlock()
	if cancel != nil {
		cancel(errHalt)
	}
	rt.procs.KillWhere(tools.IsCardScope) // card command groups are contained first
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("stop: waiting for the Run to halt: %w", ctx.Err())
		}
	}
	rt.mu.Lock()
	rt.stack = nil
	rt.setStatusLocked(final)
	rt.mu.Unlock()
	rt.logEvent("run_stopped", map[string]any{"run_id": runID})
	return nil
}

// acquireGate waits until autonomous model calls are admitted and counts
// the call in flight; release must be called when the call ends.
func (rt *Runtime) acquireGate(ctx context.Context, sessionID string) (release func(), err error) {
	for {
		rt.mu.Lock()
		if !rt.paused {
			rt.inflight++
			rt.mu.Unlock()
			return func() {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				rt.inflight--
				if rt.inflight == 0 && rt.status == StatusPausing {
					rt.setStatusLocked(StatusPaused)
				}
			}, nil
		}
		wait := rt.resume
		rt.mu.Unlock()
		rt.observe(Observation{Kind: ObsGateParked, Session: sessionID})
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func (rt *Runtime) pushActivation(id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.stack = append(rt.stack, id)
	rt.hint("runtime", "")
}

func (rt *Runtime) popActivation(id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if i := slices.Index(rt.stack, id); i >= 0 {
		rt.stack = rt.stack[:i]
	}
	rt.hint("runtime", "")
}
