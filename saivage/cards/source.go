package cards

import (
	"context"
	"fmt"
	"reflect"
	"strings"
)

// SourceFacts are a card's native Git source facts, published only by the
// runtime (PublishSourceFacts). A card's Git field is null until its source
// exists: OFF projects, and ON cards before they first enter source. No
// source bytes, approval or helper phase is stored here: refs and commit
// ids only.
type SourceFacts struct {
	// Ref is the card's private ref (under the configured namespace).
	Ref string `json:"ref"`
	// Base is the commit of the parent's exact tuple the card started from
	// (the delivery branch commit for the root).
	Base string `json:"base"`
	// Tip is the card's current checkpoint commit; Tree its tree.
	Tip  string `json:"tip"`
	Tree string `json:"tree"`
	// Delivered is the commit that carries the card's reviewed change in
	// its parent ("" until delivered; the parent's unchanged commit for a
	// no-change squash).
	Delivered string `json:"delivered,omitempty"`
	// Branch is the delivery branch commit after the card's delivery
	// reached it.
	Branch string `json:"branch,omitempty"`
	// DeliveryBranch and PolicyDigest are the root's commissioning facts:
	// immutable once published.
	DeliveryBranch string `json:"delivery_branch,omitempty"`
	PolicyDigest   string `json:"policy_digest,omitempty"`
	// Held explains why the card's source blocks execution ("" when not).
	Held string `json:"held,omitempty"`
	// Correction is the retained provenance of a preserved failed rebase.
	Correction *SourceCorrection `json:"correction,omitempty"`
}

// SourceCorrection keeps a preserved failed rebase's selections distinct:
// Original (C) is the card tip first replayed, Current (O) the parent tip
// it was replayed onto, Native (N) the checkout's HEAD when the native
// rebase started, Detached (Q) the HEAD the stopped rebase left, Snapshot
// the preserved commit; Node is the task node to reenter after correction.
type SourceCorrection struct {
	Original string   `json:"original"`
	Current  string   `json:"current"`
	Native   string   `json:"native"`
	Detached string   `json:"detached"`
	Snapshot string   `json:"snapshot"`
	Paths    []string `json:"paths"`
	Node     string   `json:"node"`
	Reason   string   `json:"reason"`
}

// RedactedRef replaces private ref text in read models.
const RedactedRef = "[private ref]"

// ReadModel is the card as read models (operator API, cockpit, agent
// tools) show it: source commit ids as they are, the private ref text
// redacted.
func (c Card) ReadModel() Card {
	if c.Git != nil {
		g := *c.Git
		g.Ref = RedactedRef
		if g.Correction != nil {
			corr := *g.Correction
			g.Correction = &corr
		}
		c.Git = &g
	}
	return c
}

func validOID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// check validates facts for card id against its previous facts.
func (f *SourceFacts) check(id string, prev *SourceFacts) error {
	if f == nil {
		if prev != nil {
			return fmt.Errorf("%w: published source facts cannot be cleared", ErrInvalid)
		}
		return nil
	}
	switch {
	case !strings.HasPrefix(f.Ref, "refs/") || strings.ContainsAny(f.Ref, " \n"):
		return fmt.Errorf("%w: source ref %q is not a full ref name", ErrInvalid, f.Ref)
	case !validOID(f.Base) || !validOID(f.Tip) || !validOID(f.Tree):
		return fmt.Errorf("%w: source base, tip and tree must be 40-hex commit ids", ErrInvalid)
	case f.Delivered != "" && !validOID(f.Delivered), f.Branch != "" && !validOID(f.Branch):
		return fmt.Errorf("%w: delivered and branch must be 40-hex commit ids", ErrInvalid)
	case id != RootID && (f.DeliveryBranch != "" || f.PolicyDigest != ""):
		return fmt.Errorf("%w: only the root carries the delivery branch and policy digest", ErrInvalid)
	case id == RootID && (f.DeliveryBranch == "" || f.PolicyDigest == ""):
		return fmt.Errorf("%w: the root's source facts need the delivery branch and policy digest", ErrInvalid)
	}
	if prev != nil {
		switch {
		case prev.Ref != f.Ref:
			return fmt.Errorf("%w: a card's private ref never changes (%s)", ErrInvalid, prev.Ref)
		case prev.DeliveryBranch != f.DeliveryBranch || prev.PolicyDigest != f.PolicyDigest:
			return fmt.Errorf("%w: the root's delivery branch and source policy are fixed at commissioning", ErrInvalid)
		}
	}
	return nil
}

// PublishSourceFacts publishes a card's source facts as a new card
// version. It is the runtime's strict path: facts are validated, a card's
// ref and the root's commissioning facts are immutable, and published facts
// are never cleared. Unchanged facts publish nothing.
func (s *Store) PublishSourceFacts(ctx context.Context, id string, f *SourceFacts) (Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, c, err := s.read(id)
	if err != nil {
		return Card{}, err
	}
	if err := f.check(id, c.Git); err != nil {
		return Card{}, opErr("publish source facts", id, err)
	}
	if sameFacts(c.Git, f) {
		return c, nil
	}
	next := c
	if f != nil {
		cp := *f
		next.Git = &cp
	}
	_, c, err = s.publish(h, next, false)
	return c, err
}

func sameFacts(a, b *SourceFacts) bool { return reflect.DeepEqual(a, b) }
