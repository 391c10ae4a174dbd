package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrMaintenanceHold refuses Run, Resume and Analyst ingress while work
// garbage collection holds the runtime.
var ErrMaintenanceHold = errors.New("work garbage collection holds the runtime; try again when it has finished")

// Restorations of a maintenance hold.
const (
	RestorationNotAcquired = "not_acquired" // the hold paused nothing
	RestorationResumed     = "resumed"      // the hold's own pause was lifted
	RestorationNotResumed  = "not_resumed"  // Stop, a Pause or the Run's end defeated it
)

// MaintenanceHold is the private Supervisor hold of work GC: it is no
// public runtime status. While held, Run, Resume and new Analyst
// submissions are refused; a running Run is paused by the hold and resumed
// at release unless an ordinary Pause, Stop or the Run's end intervened.
type MaintenanceHold struct {
	rt        *Runtime
	runID     string
	acquired  bool // the hold paused the Run itself
	withdrawn bool // an ordinary Pause took the pause over
}

// Hold takes the maintenance hold and waits until nothing autonomous is in
// flight: the Pause gate parked, no Analyst turn and no external operation
// running. Only one hold exists at a time. When ctx ends first the hold is
// released again and ctx's error returned.
func (rt *Runtime) Hold(ctx context.Context) (*MaintenanceHold, error) {
	rt.mu.Lock()
	if rt.hold != nil {
		rt.mu.Unlock()
		return nil, ErrMaintenanceHold
	}
	h := &MaintenanceHold{rt: rt, runID: rt.runID}
	switch rt.status {
	case StatusStopped, StatusPaused, StatusPausing:
	case StatusRunning:
		rt.paused, h.acquired = true, true
		if rt.inflight == 0 {
			rt.setStatusLocked(StatusPaused)
		} else {
			rt.setStatusLocked(StatusPausing)
		}
	default:
		st := rt.status
		rt.mu.Unlock()
		return nil, fmt.Errorf("the runtime is %s", st)
	}
	rt.hold = h
	rt.mu.Unlock()
	for !rt.settledForMaintenance() {
		select {
		case <-ctx.Done():
			h.Release()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return h, nil
}

// settledForMaintenance reports whether the gate parked (or no Run
// exists) and no Analyst turn or external operation runs.
func (rt *Runtime) settledForMaintenance() bool {
	rt.mu.Lock()
	st := rt.status
	rt.mu.Unlock()
	if st != StatusPaused && st != StatusStopped {
		return false
	}
	return !rt.analyst.Info().Busy && rt.ops.running() == 0
}

// Release ends the hold and says what became of its pause.
func (h *MaintenanceHold) Release() string {
	rt := h.rt
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.hold == h {
		rt.hold = nil
	}
	switch {
	case !h.acquired:
		return RestorationNotAcquired
	case h.withdrawn || rt.runID != h.runID || (rt.status != StatusPaused && rt.status != StatusPausing):
		return RestorationNotResumed
	}
	rt.paused = false
	close(rt.resume)
	rt.resume = make(chan struct{})
	rt.setStatusLocked(StatusRunning)
	return RestorationResumed
}

// heldLocked reports whether a maintenance hold is active (rt.mu held).
func (rt *Runtime) heldLocked() bool { return rt.hold != nil }
