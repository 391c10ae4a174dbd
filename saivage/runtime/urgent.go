package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/tools"
)

// errUrgent is the cancellation cause of an activation claimed by an urgent
// notification.
var errUrgent = errors.New("interrupted by an urgent notification")

// UrgentResult says what an urgent notification did.
type UrgentResult struct {
	// Queued lists the cards that got a message: the target first, then
	// ancestor notes bottom-up.
	Queued []string `json:"queued"`
	// Owner is the nearest live ancestor whose work was interrupted ("" when
	// nothing was interrupted).
	Owner string `json:"owner,omitempty"`
	// Stopped is the claimed active suffix, root first.
	Stopped []string `json:"stopped,omitempty"`
	// Suppressed explains why no interruption happened.
	Suppressed string `json:"suppressed,omitempty"`
}

// activations maps the active cards to the cancel functions of their
// activations, so an urgent claim can interrupt an exact active suffix.
type activations struct {
	mu sync.Mutex
	m  map[string]context.CancelCauseFunc
}

func (a *activations) set(id string, cancel context.CancelCauseFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]context.CancelCauseFunc{}
	}
	a.m[id] = cancel
}

func (a *activations) clear(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, id)
}

func (a *activations) cancel(id string, cause error) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.m[id]
	if ok {
		c(cause)
	}
	return ok
}

// UrgentNotify queues text for card (its designated recipient reads it) and
// interrupts the work standing between it and the nearest live owner: notes
// are queued bottom-up on the ancestors up to that owner (terminal and
// blocked ancestors are skipped), then the owner's active child and
// everything below it are stopped leaf to root, so the owner's Planner gets
// control back at once (activate_card returns the child as stopped). When
// the card is the running root itself, the root is stopped and replaced by
// a STOPPED activation in the same Run. A Pause before the claim, a Stop or
// no live owner leave the messages queued without interrupting anything.
func (rt *Runtime) UrgentNotify(ctx context.Context, card, author, text string) (UrgentResult, error) {
	res := UrgentResult{Queued: []string{}}
	if err := rt.notificationEligible(ctx, card); err != nil {
		return res, err
	}
	if _, err := rt.p.Cards.Enqueue(ctx, card, author, text); err != nil {
		return res, err
	}
	res.Queued = append(res.Queued, card)
	rt.hint("card", card)
	rt.mu.Lock()
	stack := slices.Clone(rt.stack)
	rt.mu.Unlock()
	owner := ""
	if len(stack) > 0 && stack[0] == card && card == cards.RootID {
		owner = card
	}
	child := card
	for id := cards.ParentOf(card); id != "" && owner == ""; child, id = id, cards.ParentOf(id) {
		c, err := rt.p.Cards.Get(ctx, id)
		if err != nil {
			return res, err
		}
		if c.Status == cards.Done || c.Status == cards.Failed || c.Status == cards.Cancelled || c.Status == cards.Blocked || c.Tombstoned() {
			continue
		}
		if rt.notificationEligible(ctx, id) != nil {
			continue
		}
		note := fmt.Sprintf("Urgent notification for descendant %s (through your child %s): %s", card, child, clip(text, 1000))
		if _, err := rt.p.Cards.Enqueue(ctx, id, author, note); err != nil {
			return res, err
		}
		res.Queued = append(res.Queued, id)
		rt.hint("card", id)
		if slices.Contains(stack, id) {
			owner = id
		}
	}
	defer func() {
		rt.logEvent("urgent_notification", map[string]any{"card": card, "author": author, "queued": res.Queued, "owner": res.Owner,
			"stopped": res.Stopped, "suppressed": res.Suppressed})
	}()
	if owner == "" {
		res.Suppressed = "no live owner: the messages wait for their recipients"
		return res, nil
	}
	// Under the Git workflow the claim waits for source settlement: no
	// entry, checkpoint or delivery is cancelled halfway.
	release, err := rt.awaitSettled(ctx, card)
	if err != nil {
		return res, err
	}
	defer release()
	// Claim: the exact active suffix below the owner (the root itself for a
	// root replacement), decided under the Supervisor lock.
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.paused && (rt.status == StatusPausing || rt.status == StatusPaused):
		res.Suppressed = "paused before the claim; no interruption"
		return res, nil
	case rt.status != StatusRunning:
		res.Suppressed = "the runtime is " + string(rt.status) + "; no interruption"
		return res, nil
	}
	i := slices.Index(rt.stack, owner)
	if i < 0 {
		res.Suppressed = owner + " is no longer active"
		return res, nil
	}
	from := i + 1
	if owner == card && card == cards.RootID {
		from = i // root replacement
	}
	if from >= len(rt.stack) {
		res.Suppressed = owner + " has no active descendant to interrupt; its recipient reads the message before finishing"
		return res, nil
	}
	res.Owner, res.Stopped = owner, slices.Clone(rt.stack[from:])
	rt.acts.cancel(rt.stack[from], fmt.Errorf("%w for %s", errUrgent, card))
	return res, nil
}

// urgentStop settles an activation claimed by an urgent notification: its
// source returns to the parent (Git workflow), its sessions are settled
// and the card is published stopped (descendants already were:
// activations unwind leaf to root). Held source refuses the continuation;
// once the Run halts, the source stays as the halt leaves it.
func (rt *Runtime) urgentStop(ctx context.Context, id string, cause error) (tools.ChildOutcome, error) {
	halting := errors.Is(context.Cause(ctx), errHalt) // e.g. a continuation already refused below
	ctx = context.WithoutCancel(ctx)
	held := ""
	if rt.src != nil && !halting {
		var err error
		if held, err = rt.src.urgentReturn(ctx, id); err != nil {
			return tools.ChildOutcome{}, err
		}
	}
	if err := rt.recoverCard(ctx, id); err != nil {
		return tools.ChildOutcome{}, err
	}
	reason := cause.Error() + "; read your notifications, then decide how to continue"
	if held != "" {
		reason = rt.refuseContinuation(id, held)
	}
	return tools.ChildOutcome{Card: id, Status: string(cards.Stopped), Reason: reason}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
