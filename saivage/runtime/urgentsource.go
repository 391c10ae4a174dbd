package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentstack/agentstack/saivage/cards"
)

// sourceOps orders the Git workflow's source operations (entry,
// checkpoint_source, settlement and urgent return) with urgent claims: an
// operation holds it for its whole duration and a claim waits for it, so
// a claim never cancels a capture, checkpoint or delivery halfway. The
// project has one checkout, so one gate serves every card.
type sourceOps struct {
	once sync.Once
	ch   chan struct{}
}

// acquire waits until no source operation is in flight, or ctx ends.
func (o *sourceOps) acquire(ctx context.Context, what string) (release func(), err error) {
	o.once.Do(func() { o.ch = make(chan struct{}, 1) })
	select {
	case o.ch <- struct{}{}:
		return func() { <-o.ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: waiting for the source operation in flight to settle: %w", what, context.Cause(ctx))
	}
}

// awaitSettled is an urgent claim's wait for source settlement: the
// claim runs under the returned release, after every source operation in
// flight has finished. It is a no-op when git_workflow is off.
func (rt *Runtime) awaitSettled(ctx context.Context, card string) (release func(), err error) {
	if rt.src == nil {
		return func() {}, nil
	}
	return rt.src.ops.acquire(ctx, "urgent notification for "+card)
}

// urgentReturn settles the source of a card stopped by an urgent claim
// before its owner continues: its unfinished work is kept on its private
// ref and the checkout returns to the parent's exact tuple (the root must
// be clean at its own tuple, which its replacement enters). It returns
// the held reason when the source cannot be settled that way; the claim's
// continuation must then be refused.
func (s *source) urgentReturn(ctx context.Context, id string) (held string, err error) {
	release, err := s.ops.acquire(ctx, "return the source of "+id)
	if err != nil {
		return "", err
	}
	defer release()
	c, err := s.rt.p.Cards.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if id == cards.RootID {
		t, obs, err := s.observe(ctx, id)
		if err != nil {
			return "", fmt.Errorf("check the source of %s: %w", id, err)
		}
		if !obs.Clean() {
			held = fmt.Sprintf("the checkout differs from card %s's checkpoint %s (%s)", id, short(t.Commit), describe(obs))
			s.rt.logEvent("source_held", map[string]any{"card": id, "reason": held})
			if err := s.publish(ctx, id, func(f *cards.SourceFacts) { f.Held = held }); err != nil {
				return "", err
			}
		}
		return held, nil
	}
	if err := s.returnToParent(ctx, &activation{card: c}); err != nil {
		return "", fmt.Errorf("return the source of %s: %w", id, err)
	}
	if c, err = s.rt.p.Cards.Get(ctx, id); err != nil {
		return "", err
	}
	if c.Git != nil {
		held = c.Git.Held
	}
	return held, nil
}

// refuseContinuation halts the Run because an urgently stopped card's
// source is held: its owner must not continue over it. The halt is
// requested, not awaited, since it joins the activation calling this.
func (rt *Runtime) refuseContinuation(card, held string) string {
	reason := fmt.Sprintf("source held on card %s: %s; the urgent continuation was refused and the Run is stopping", card, held)
	rt.logEvent("urgent_continuation_refused", map[string]any{"card": card, "reason": held})
	rt.mu.Lock()
	cancel := rt.runCancel
	rt.mu.Unlock()
	if cancel != nil {
		cancel(fmt.Errorf("%w: %s", errHalt, reason))
	}
	go func() {
		if err := rt.Stop(context.Background()); err != nil {
			rt.logEvent("urgent_continuation_refused", map[string]any{"card": card, "stop_error": err.Error()})
		}
	}()
	return reason
}
