package cards_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
)

// Source facts go through the strict runtime path: validated, a card's ref
// and the root's commissioning facts immutable, never cleared, no-ops
// publish nothing, and read models redact the ref text.
func TestPublishSourceFactsIsStrict(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	goal := f.create(t, "project", "goal")
	if goal.Git != nil {
		t.Fatalf("a new card's facts = %+v, want null", goal.Git)
	}
	raw, _ := json.Marshal(goal)
	if !strings.Contains(string(raw), `"git":null`) {
		t.Fatalf("document without a null git field: %s", raw)
	}
	oid := func(c string) string { return strings.Repeat(c, 40) }
	ok := cards.SourceFacts{Ref: "refs/saivage/cards/" + goal.ID, Base: oid("a"), Tip: oid("b"), Tree: oid("c")}
	c, err := f.s.PublishSourceFacts(ctx, goal.ID, &ok)
	if err != nil || c.Git == nil || c.Git.Tip != oid("b") || c.Version != goal.Version+1 {
		t.Fatalf("publish = %+v, %v", c, err)
	}
	same, err := f.s.PublishSourceFacts(ctx, goal.ID, &ok)
	if err != nil || same.Version != c.Version {
		t.Fatalf("unchanged facts published version %d (was %d): %v", same.Version, c.Version, err)
	}
	bad := []struct {
		name string
		id   string
		f    *cards.SourceFacts
	}{
		{"short oid", goal.ID, &cards.SourceFacts{Ref: ok.Ref, Base: "abc", Tip: oid("b"), Tree: oid("c")}},
		{"upper-case oid", goal.ID, &cards.SourceFacts{Ref: ok.Ref, Base: strings.Repeat("A", 40), Tip: oid("b"), Tree: oid("c")}},
		{"not a ref", goal.ID, &cards.SourceFacts{Ref: "main", Base: oid("a"), Tip: oid("b"), Tree: oid("c")}},
		{"ref changes", goal.ID, &cards.SourceFacts{Ref: "refs/saivage/cards/other", Base: oid("a"), Tip: oid("b"), Tree: oid("c")}},
		{"cleared", goal.ID, nil},
		{"child with root facts", goal.ID, &cards.SourceFacts{Ref: ok.Ref, Base: oid("a"), Tip: oid("b"), Tree: oid("c"), DeliveryBranch: "main", PolicyDigest: "sha256:x"}},
		{"root without commissioning", "project", &cards.SourceFacts{Ref: "refs/saivage/cards/project", Base: oid("a"), Tip: oid("a"), Tree: oid("c")}},
	}
	for _, tt := range bad {
		if _, err := f.s.PublishSourceFacts(ctx, tt.id, tt.f); !errors.Is(err, cards.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tt.name, err)
		}
	}
	root := cards.SourceFacts{Ref: "refs/saivage/cards/project", Base: oid("a"), Tip: oid("a"), Tree: oid("c"), DeliveryBranch: "main", PolicyDigest: "sha256:1"}
	if _, err := f.s.PublishSourceFacts(ctx, "project", &root); err != nil {
		t.Fatal(err)
	}
	moved := root
	moved.DeliveryBranch = "trunk"
	if _, err := f.s.PublishSourceFacts(ctx, "project", &moved); !errors.Is(err, cards.ErrInvalid) {
		t.Errorf("root branch changed: %v", err)
	}
	got, err := f.store(t).Get(ctx, goal.ID)
	if err != nil || got.Git == nil || *got.Git != ok {
		t.Fatalf("re-read facts = %+v, %v", got.Git, err)
	}
	if v := got.ReadModel(); v.Git.Ref != cards.RedactedRef || v.Git.Tip != ok.Tip || got.Git.Ref != ok.Ref {
		t.Errorf("read model = %+v (stored %+v)", v.Git, got.Git)
	}
}
