package runtime

import (
	"context"
	"fmt"

	"github.com/agentstack/agentstack/saivage/cards"
)

// runningChain returns the committed running cards, root first. They must
// form one unbroken chain from the root: a running card's parent runs too
// and no two siblings run.
func (rt *Runtime) runningChain(ctx context.Context) ([]string, error) {
	var chain []string
	id := cards.RootID
	for id != "" {
		c, err := rt.p.Cards.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if c.Status != cards.Running {
			if len(chain) > 0 {
				return nil, fmt.Errorf("recovery: %s is running but its child %s is %s (discontinuous running chain)", chain[len(chain)-1], id, c.Status)
			}
			// Nothing runs at the root: any running card below is detached.
			return nil, rt.noDetachedRunning(ctx, c)
		}
		chain = append(chain, id)
		next := ""
		for _, k := range c.Children {
			kc, err := rt.p.Cards.Get(ctx, k)
			if err != nil {
				return nil, err
			}
			if kc.Tombstoned() || kc.Status != cards.Running {
				if !kc.Tombstoned() {
					if err := rt.noDetachedRunning(ctx, kc); err != nil {
						return nil, err
					}
				}
				continue
			}
			if next != "" {
				return nil, fmt.Errorf("recovery: both %s and %s are running under %s (branching running chain)", next, k, id)
			}
			next = k
		}
		id = next
	}
	return chain, nil
}

// noDetachedRunning fails when a running card sits below a card that does
// not run.
func (rt *Runtime) noDetachedRunning(ctx context.Context, c cards.Card) error {
	for _, k := range c.Children {
		kc, err := rt.p.Cards.Get(ctx, k)
		if err != nil {
			return err
		}
		if kc.Tombstoned() {
			continue
		}
		if kc.Status == cards.Running {
			return fmt.Errorf("recovery: %s is running but its parent %s is %s (discontinuous running chain)", k, c.ID, c.Status)
		}
		if err := rt.noDetachedRunning(ctx, kc); err != nil {
			return err
		}
	}
	return nil
}

// recoverChain settles the sessions of every card left running and
// publishes it stopped, leaf to root. The first failure ends the loop; a
// stopped prefix of descendants stays valid for a later attempt.
func (rt *Runtime) recoverChain(ctx context.Context) error {
	chain, err := rt.runningChain(ctx)
	if err != nil {
		return err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := rt.recoverCard(ctx, chain[i]); err != nil {
			return err
		}
	}
	return nil
}

func (rt *Runtime) recoverCard(ctx context.Context, id string) error {
	c, err := rt.p.Cards.Get(ctx, id)
	if err != nil {
		return err
	}
	tbl, _ := rt.p.Workflows.Table(c.Type)
	settled := map[string]string{}
	for _, agent := range tbl.SessionAgents() {
		did, err := rt.cardSession(id, agent).settle(true)
		if err != nil {
			return fmt.Errorf("recover %s: %w", id, err)
		}
		if did != "" {
			settled[agent] = did
		}
	}
	if _, err := rt.p.Cards.Stop(ctx, id); err != nil {
		return fmt.Errorf("recover %s: %w", id, err)
	}
	rt.hint("card", id)
	rt.logEvent("card_recovered", map[string]any{"card": id, "status": "stopped", "sessions": settled})
	return nil
}

// RunningCard returns a card published running (the first one found from
// the root), or "" when none is.
func (rt *Runtime) RunningCard(ctx context.Context) (string, error) {
	queue := []string{cards.RootID}
	for len(queue) > 0 {
		c, err := rt.p.Cards.Get(ctx, queue[0])
		if err != nil {
			return "", err
		}
		queue = queue[1:]
		if c.Tombstoned() {
			continue
		}
		if c.Status == cards.Running {
			return c.ID, nil
		}
		queue = append(queue, c.Children...)
	}
	return "", nil
}
