package cards_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
)

var propertySteps = flag.Int("saivage.steps", 2000, "steps of TestPropertyRandomOperations")

type modelCard struct {
	typ, title string
	status     cards.Status
	children   []string
	deps       []string
	deleted    bool
	records    map[string]int
}

// TestPropertyRandomOperations applies random creations, edits, reorders,
// status changes, cancellations, deletions and record edits, reloading the
// store and strictly re-admitting the whole graph after every step. The
// admitted graph must equal a simple model of the successful operations.
func TestPropertyRandomOperations(t *testing.T) {
	steps := *propertySteps
	if testing.Short() {
		steps = 300
	}
	ctx := context.Background()
	f := newFixture(t, true)
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]*modelCard{"project": {typ: "project", title: "Root", status: cards.Backlog, records: map[string]int{"objective": 1}}}
	childType := map[string]string{"project": "goal", "goal": "task", "task": "task"}
	recordNames := map[string][]string{"project": {"objective", "plan", "assessment"}, "goal": {"brief", "plan", "summary"}, "task": {"brief", "work", "summary", "review"}}
	reachable := func() []string {
		var out []string
		var walk func(string)
		walk = func(id string) {
			out = append(out, id)
			if model[id].deleted {
				return
			}
			for _, k := range model[id].children {
				walk(k)
			}
		}
		walk("project")
		return out
	}
	pick := func(ids []string) string { return ids[rng.IntN(len(ids))] }
	activeIDs := func() []string {
		return slices.DeleteFunc(reachable(), func(id string) bool { return model[id].deleted })
	}
	counts := map[string]int{}
	for step := 0; step < steps; step++ {
		ids := activeIDs()
		id := pick(ids)
		m := model[id]
		var op string
		var err error
		switch r := rng.IntN(100); {
		case r < 22:
			op = "create"
			typ := childType[m.typ]
			var deps []string
			for _, k := range m.children {
				if !model[k].deleted && rng.IntN(4) == 0 {
					deps = append(deps, k)
				}
			}
			var c cards.Card
			c, err = f.s.Create(ctx, cards.CreateInput{Parent: id, Type: typ, Title: fmt.Sprintf("card %d", step), Author: "agent:planner", Dependencies: deps})
			if err == nil {
				model[c.ID] = &modelCard{typ: typ, title: c.Title, status: cards.Backlog, deps: deps, records: map[string]int{}}
				m.children = append(m.children, c.ID)
			}
		case r < 30:
			op = "edit"
			title := fmt.Sprintf("edited %d", step)
			_, _, err = f.s.Edit(ctx, id, cards.EditInput{Title: &title})
			if err == nil {
				m.title = title
			}
		case r < 36:
			op = "deps"
			if id == "project" {
				continue
			}
			var deps []string
			for _, k := range model[cards.ParentOf(id)].children {
				if k != id && !model[k].deleted && rng.IntN(3) == 0 {
					deps = append(deps, k)
				}
			}
			_, _, err = f.s.Edit(ctx, id, cards.EditInput{Dependencies: &deps})
			if err == nil {
				m.deps = deps
			}
		case r < 44:
			op = "reorder"
			if id == "project" {
				continue
			}
			p := model[cards.ParentOf(id)]
			to := rng.IntN(len(p.children))
			_, err = f.s.Reorder(ctx, id, to)
			if err == nil {
				at := slices.Index(p.children, id)
				p.children = slices.Insert(slices.Delete(p.children, at, at+1), to, id)
			}
		case r < 58:
			op = "activate"
			_, err = f.s.Activate(ctx, id)
			if err == nil {
				m.status = cards.Running
			}
		case r < 68:
			op = "finish"
			outcome := []cards.Status{cards.Done, cards.Done, cards.Failed, cards.Blocked}[rng.IntN(4)]
			_, err = f.s.Finish(ctx, id, outcome)
			if err == nil {
				m.status = outcome
			}
		case r < 72:
			op = "stop"
			_, err = f.s.Stop(ctx, id)
			if err == nil {
				m.status = cards.Stopped
			}
		case r < 77:
			op = "reopen"
			_, err = f.s.Reopen(ctx, id)
			if err == nil {
				m.status = cards.Changed
			}
		case r < 81:
			op = "cancel"
			if id == "project" {
				continue // keep the tree alive; subtree cancels are exercised below it
			}
			var cancelled []string
			cancelled, err = f.s.Cancel(ctx, id)
			for _, c := range cancelled {
				model[c].status = cards.Cancelled
			}
		case r < 86:
			op = "delete"
			_, err = f.s.Delete(ctx, id)
			if err == nil {
				m.deleted = true
			}
		default:
			op = "record"
			name := pick(recordNames[m.typ])
			_, err = f.s.EditRecord(ctx, id, name, fmt.Sprintf("content %d", step), "operator")
			if err == nil {
				m.records[name]++
				if m.status.AdmitsReopen() {
					m.status = cards.Changed
				}
			}
		}
		if err == nil {
			counts[op]++
		} else {
			counts[op+" refused"]++
		}
		checkAgainstModel(t, f, model, reachable(), step, op)
	}
	t.Logf("steps=%d cards=%d outcomes=%v", steps, len(model), counts)
	if counts["create"] < steps/10 || counts["delete"] == 0 || counts["cancel"] == 0 || counts["reorder"] == 0 || counts["record"] == 0 {
		t.Fatalf("operation mix too thin: %v", counts)
	}
}

func checkAgainstModel(t *testing.T, f *fixture, model map[string]*modelCard, reachable []string, step int, op string) {
	t.Helper()
	g, err := f.store(t).Admit(context.Background())
	if err != nil {
		t.Fatalf("step %d (%s): admission failed: %v", step, op, err)
	}
	if len(g.Cards) != len(reachable) {
		t.Fatalf("step %d (%s): admitted %d cards, model reaches %d", step, op, len(g.Cards), len(reachable))
	}
	for _, id := range reachable {
		n, ok := g.Cards[id]
		m := model[id]
		if !ok {
			t.Fatalf("step %d (%s): %s not admitted", step, op, id)
		}
		c := n.Card
		if c.Tombstoned() != m.deleted || c.Title != m.title || c.Type != m.typ ||
			(!m.deleted && (c.Status != m.status || !slices.Equal(c.Children, m.children) || !slices.Equal(c.Dependencies, m.deps))) {
			t.Fatalf("step %d (%s): %s = %+v, model %+v", step, op, id, c, *m)
		}
		if c.Depth > cards.MaxDepth || (c.Depth == cards.MaxDepth && len(c.Children) > 0) {
			t.Fatalf("step %d: depth invariant broken at %s", step, id)
		}
		for _, k := range c.Children {
			if cards.ParentOf(k) != id {
				t.Fatalf("step %d: child %s not derived from %s", step, k, id)
			}
		}
	}
	total := 0
	for _, id := range reachable {
		if !model[id].deleted {
			for _, v := range model[id].records {
				total += v
			}
		}
	}
	if g.RecordVersions != total {
		t.Fatalf("step %d (%s): %d record versions admitted, model has %d", step, op, g.RecordVersions, total)
	}
}
