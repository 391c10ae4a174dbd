package cards_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/records"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// compileClassic compiles the classic template, optionally letting tasks
// nest (to reach the depth limit).
func compileClassic(t testing.TB, nestTasks bool) *workflow.Set {
	t.Helper()
	tpl, err := templates.Lookup("classic")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tpl.Config()
	if err != nil {
		t.Fatal(err)
	}
	if nestTasks {
		x := cfg.CardTypes["task"]
		x.PermittedChildTypes = []string{"task"}
		cfg.CardTypes["task"] = x
	}
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: tpl.Files()})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

type fixture struct {
	stateDir string
	set      *workflow.Set
	s        *cards.Store
}

func newFixture(t testing.TB, nestTasks bool) *fixture {
	t.Helper()
	f := &fixture{stateDir: t.TempDir(), set: compileClassic(t, nestTasks)}
	f.s = f.store(t)
	if _, err := f.s.Create(context.Background(), cards.CreateInput{Type: config.RootCardType, Title: "Root", Author: "runtime:bootstrap",
		Bootstrap: map[string]string{"objective": "ship it"}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) store(t testing.TB) *cards.Store {
	return cards.New(cards.Options{StateDir: f.stateDir, Workflows: f.set,
		Publisher: state.New(state.Options{Fatal: func(err error) { t.Fatalf("fatal: %v", err) }})})
}

func (f *fixture) create(t testing.TB, parent, typ string, deps ...string) cards.Card {
	t.Helper()
	c, err := f.s.Create(context.Background(), cards.CreateInput{Parent: parent, Type: typ, Title: typ + " card", Author: "agent:planner", Dependencies: deps})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fixture) status(t testing.TB, id string) cards.Status {
	t.Helper()
	c, err := f.s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Status
}

func mustAdmit(t testing.TB, f *fixture) *cards.Graph {
	t.Helper()
	g, err := f.store(t).Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSegment(t *testing.T) {
	for n, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 701: "zz", 702: "aaa"} {
		if got := cards.Segment(n); got != want {
			t.Errorf("Segment(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCreateAllocatesMonotonicIDs(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	a := f.create(t, "project", "goal")
	b := f.create(t, "project", "goal")
	if a.ID != "project.a" || b.ID != "project.b" || a.Depth != 1 || a.Parent != "project" {
		t.Fatalf("ids = %s %s", a.ID, b.ID)
	}
	// A claimed but never published namespace (crash after mkdir) stays
	// consumed and ignored: the next child skips it.
	if err := os.Mkdir(f.s.CardDir("project.c"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := f.create(t, "project", "goal")
	if d.ID != "project.d" {
		t.Fatalf("after claimed c: %s", d.ID)
	}
	// Deleting does not free an identifier.
	if _, err := f.s.Delete(ctx, "project.b"); err != nil {
		t.Fatal(err)
	}
	if e := f.create(t, "project", "goal"); e.ID != "project.e" {
		t.Fatalf("after delete: %s", e.ID)
	}
	root, _ := f.s.Get(ctx, "project")
	if !slices.Equal(root.Children, []string{"project.a", "project.b", "project.d", "project.e"}) {
		t.Fatalf("children = %v", root.Children)
	}
	g := mustAdmit(t, f)
	if g.Active != 4 || g.Tombstones != 1 {
		t.Fatalf("admitted %d active, %d tombstones", g.Active, g.Tombstones)
	}
	// Each new card has every declared record at baseline and its sessions.
	ref := records.Ref{CardDir: f.s.CardDir("project.a"), Card: "project.a", Name: "plan"}
	if h, err := f.s.Records().ReadHead(ref); err != nil || h.Selection != records.SelBaseline || h.Revision != 0 {
		t.Fatalf("plan head = %+v %v", h, err)
	}
	for _, agent := range []string{"planner", "reviewer"} {
		if _, err := os.Stat(filepath.Join(f.s.SessionDir("project.a", agent), "index.json")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateRules(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	goal := f.create(t, "project", "goal")
	task := f.create(t, goal.ID, "task")
	tests := []struct {
		name string
		in   cards.CreateInput
		want error
	}{
		{"type not permitted", cards.CreateInput{Parent: "project", Type: "task", Title: "t", Author: "a"}, cards.ErrChildType},
		{"unknown type", cards.CreateInput{Parent: "project", Type: "epic", Title: "t", Author: "a"}, cards.ErrChildType},
		{"leaf type has no children", cards.CreateInput{Parent: task.ID, Type: "task", Title: "t", Author: "a"}, cards.ErrChildType},
		{"missing parent", cards.CreateInput{Parent: "project.z", Type: "goal", Title: "t", Author: "a"}, cards.ErrNotFound},
		{"empty title", cards.CreateInput{Parent: "project", Type: "goal", Title: " ", Author: "a"}, cards.ErrInvalid},
		{"multi-line title", cards.CreateInput{Parent: "project", Type: "goal", Title: "a\nb", Author: "a"}, cards.ErrInvalid},
		{"not a bootstrap record", cards.CreateInput{Parent: "project", Type: "goal", Title: "t", Author: "a", Bootstrap: map[string]string{"plan": "x"}}, cards.ErrInvalid},
		{"dependency not a sibling", cards.CreateInput{Parent: goal.ID, Type: "task", Title: "t", Author: "a", Dependencies: []string{"project"}}, cards.ErrDependency},
		{"duplicate dependency", cards.CreateInput{Parent: goal.ID, Type: "task", Title: "t", Author: "a", Dependencies: []string{task.ID, task.ID}}, cards.ErrDependency},
		{"second root", cards.CreateInput{Type: "project", Title: "t", Author: "a"}, cards.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.s.Create(ctx, tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// Cancelled and done parents admit no children.
	if _, err := f.s.Cancel(ctx, goal.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Create(ctx, cards.CreateInput{Parent: goal.ID, Type: "task", Title: "t", Author: "a"}); !errors.Is(err, cards.ErrStatus) {
		t.Fatalf("create under cancelled: %v", err)
	}
	// Bootstrap content is accepted as version 1 by the creator.
	g2, err := f.s.Create(ctx, cards.CreateInput{Parent: "project", Type: "goal", Title: "g", Author: "agent:planner", Bootstrap: map[string]string{"brief": "do x"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.s.Records().Version(records.Ref{CardDir: f.s.CardDir(g2.ID), Card: g2.ID, Name: "brief"}, 1)
	if err != nil || a.Content != "do x" || a.Author != "agent:planner" {
		t.Fatalf("bootstrap record = %+v %v", a, err)
	}
}

func TestDepthLimit(t *testing.T) {
	f := newFixture(t, true)
	parent := f.create(t, "project", "goal").ID
	parent = f.create(t, parent, "task").ID
	for d := 3; d <= cards.MaxDepth; d++ {
		c := f.create(t, parent, "task")
		if c.Depth != d {
			t.Fatalf("depth = %d, want %d", c.Depth, d)
		}
		parent = c.ID
	}
	_, err := f.s.Create(context.Background(), cards.CreateInput{Parent: parent, Type: "task", Title: "too deep", Author: "a"})
	if !errors.Is(err, cards.ErrDepth) {
		t.Fatalf("depth 13: %v", err)
	}
	mustAdmit(t, f)
}

func TestStatusRules(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	goal := f.create(t, "project", "goal").ID
	t1 := f.create(t, goal, "task").ID
	t2 := f.create(t, goal, "task", t1).ID
	step := func(name string, op func() error, want error) {
		t.Helper()
		if err := op(); !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", name, err, want)
		}
	}
	act := func(id string) func() error { return func() error { _, err := f.s.Activate(ctx, id); return err } }
	fin := func(id string, s cards.Status) func() error {
		return func() error { _, err := f.s.Finish(ctx, id, s); return err }
	}
	step("child before parent runs", act(goal), cards.ErrStatus)
	step("activate root", act("project"), nil)
	step("activate running root", act("project"), cards.ErrStatus)
	step("activate goal", act(goal), nil)
	step("dependency not done", act(t2), cards.ErrNotCompleted)
	step("finish not running", fin(t1, cards.Done), cards.ErrStatus)
	step("activate t1", act(t1), nil)
	step("finish with bad outcome", fin(t1, cards.Cancelled), cards.ErrInvalid)
	step("finish t1", fin(t1, cards.Done), nil)
	step("activate t2", act(t2), nil)
	step("goal done with running child", fin(goal, cards.Done), cards.ErrNotCompleted)
	step("stop t2", func() error { _, err := f.s.Stop(ctx, t2); return err }, nil)
	step("reopen stopped", func() error { _, err := f.s.Reopen(ctx, t2); return err }, cards.ErrStatus)
	step("resume t2 from STOPPED", act(t2), nil)
	step("block t2", fin(t2, cards.Blocked), nil)
	step("reopen blocked", func() error { _, err := f.s.Reopen(ctx, t2); return err }, nil)
	if got := f.status(t, t2); got != cards.Changed {
		t.Fatalf("reopened status = %s", got)
	}
	// Cancelling the goal cancels changed t2 deepest first and keeps done t1.
	cancelled, err := f.s.Cancel(ctx, goal)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cancelled, []string{t2, goal}) || f.status(t, t1) != cards.Done {
		t.Fatalf("cancelled %v; t1 %s", cancelled, f.status(t, t1))
	}
	step("cancel cancelled", func() error { _, err := f.s.Cancel(ctx, goal); return err }, cards.ErrStatus)
	step("cancel done", func() error { _, err := f.s.Cancel(ctx, t1); return err }, cards.ErrStatus)
	step("notify cancelled", func() error { _, err := f.s.Enqueue(ctx, goal, "oversight", "hi"); return err }, cards.ErrStatus)
	step("edit cancelled", func() error { x := "x"; _, _, err := f.s.Edit(ctx, goal, cards.EditInput{Title: &x}); return err }, cards.ErrStatus)
	step("record edit on cancelled", func() error { _, err := f.s.EditRecord(ctx, goal, "plan", "p", "operator"); return err }, cards.ErrStatus)
	// Record edits reopen done cards and keep running ones.
	if _, err := f.s.EditRecord(ctx, t1, "summary", "done well", "operator"); err != nil {
		t.Fatal(err)
	}
	if got := f.status(t, t1); got != cards.Changed {
		t.Fatalf("record edit on done card: %s", got)
	}
	if _, err := f.s.EditRecord(ctx, "project", "plan", "p1", "operator"); err != nil || f.status(t, "project") != cards.Running {
		t.Fatalf("record edit on running root: %v %s", err, f.status(t, "project"))
	}
	step("undeclared record", func() error { _, err := f.s.EditRecord(ctx, "project", "summary", "x", "operator"); return err }, cards.ErrInvalid)
	// The predicates themselves.
	for _, st := range cards.Statuses {
		if st.CompletesDependency() != (st == cards.Done) || st.CompletesDescendant() != (st == cards.Done || st == cards.Cancelled) {
			t.Fatalf("completion predicates wrong for %s", st)
		}
	}
}

func TestDependenciesAndDeletion(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	a := f.create(t, "project", "goal").ID
	b := f.create(t, "project", "goal", a).ID
	c := f.create(t, "project", "goal", b).ID
	kid := f.create(t, a, "task").ID
	deps := func(ids ...string) *[]string { return &ids }
	if _, _, err := f.s.Edit(ctx, a, cards.EditInput{Dependencies: deps(c)}); !errors.Is(err, cards.ErrCycle) {
		t.Fatalf("cycle: %v", err)
	}
	if _, _, err := f.s.Edit(ctx, a, cards.EditInput{Dependencies: deps(a)}); !errors.Is(err, cards.ErrDependency) {
		t.Fatalf("self: %v", err)
	}
	if _, _, err := f.s.Edit(ctx, a, cards.EditInput{Dependencies: deps(kid)}); !errors.Is(err, cards.ErrDependency) {
		t.Fatalf("non-sibling: %v", err)
	}
	if _, err := f.s.Delete(ctx, a); !errors.Is(err, cards.ErrDependedOn) {
		t.Fatalf("delete depended-on: %v", err)
	}
	if _, err := f.s.Delete(ctx, "project"); !errors.Is(err, cards.ErrRoot) {
		t.Fatalf("delete root: %v", err)
	}
	// No-op edits publish nothing.
	before, _ := f.s.Get(ctx, c)
	same := before.Title
	if _, changed, err := f.s.Edit(ctx, c, cards.EditInput{Title: &same, Dependencies: deps(b)}); err != nil || changed {
		t.Fatalf("no-op edit: changed=%v err=%v", changed, err)
	}
	if after, _ := f.s.Get(ctx, c); after.Version != before.Version {
		t.Fatal("no-op edit published a version")
	}
	if _, _, err := f.s.Edit(ctx, c, cards.EditInput{Dependencies: deps()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.s.Edit(ctx, b, cards.EditInput{Dependencies: deps()}); err != nil {
		t.Fatal(err)
	}
	// Deleting a keeps its place; its subtree is no longer traversed.
	if _, err := f.s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Create(ctx, cards.CreateInput{Parent: a, Type: "task", Title: "t", Author: "x"}); !errors.Is(err, cards.ErrTombstoned) {
		t.Fatalf("create under tombstone: %v", err)
	}
	if _, _, err := f.s.Edit(ctx, b, cards.EditInput{Dependencies: deps(a)}); !errors.Is(err, cards.ErrDependency) {
		t.Fatalf("depend on tombstone: %v", err)
	}
	g := mustAdmit(t, f)
	if _, ok := g.Cards[kid]; ok {
		t.Fatal("traversal passed a tombstone")
	}
	root, _ := f.s.Get(ctx, "project")
	if root.Children[0] != a {
		t.Fatalf("tombstone lost its position: %v", root.Children)
	}
	// Reorder: a real move publishes, a no-op does not.
	moved, err := f.s.Reorder(ctx, c, 0)
	if err != nil || !moved {
		t.Fatalf("reorder: %v %v", moved, err)
	}
	root, _ = f.s.Get(ctx, "project")
	if !slices.Equal(root.Children, []string{c, a, b}) {
		t.Fatalf("order = %v", root.Children)
	}
	if moved, err := f.s.Reorder(ctx, c, 0); err != nil || moved {
		t.Fatalf("no-op reorder: %v %v", moved, err)
	}
	if _, err := f.s.Reorder(ctx, c, 5); !errors.Is(err, cards.ErrInvalid) {
		t.Fatalf("reorder out of range: %v", err)
	}
	// Running cards and cards with running descendants are not deleted.
	if _, err := f.s.Activate(ctx, "project"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Activate(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(ctx, c); !errors.Is(err, cards.ErrStatus) {
		t.Fatalf("delete running: %v", err)
	}
}

func TestMailboxAdvancesRevisionOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	h0, c0, _ := f.s.GetHead(ctx, "project")
	m, err := f.s.Enqueue(ctx, "project", "oversight", "check the tests")
	if err != nil {
		t.Fatal(err)
	}
	h1, c1, _ := f.s.GetHead(ctx, "project")
	if c1.Version != c0.Version || h1.Revision != h0.Revision+1 || !slices.Equal(h1.Mailbox, []string{m.UUID}) || h1.HeadUUID == h0.HeadUUID {
		t.Fatalf("enqueue: %+v → %+v", h0, h1)
	}
	if _, err := f.s.Enqueue(ctx, "project", "x", strings.Repeat("x", cards.MaxMessage+1)); !errors.Is(err, cards.ErrInvalid) {
		t.Fatalf("oversized message: %v", err)
	}
	if err := f.s.Dequeue(ctx, "project", []string{m.UUID}); err != nil {
		t.Fatal(err)
	}
	h2, _, _ := f.s.GetHead(ctx, "project")
	if len(h2.Mailbox) != 0 || h2.Revision != h1.Revision+1 {
		t.Fatalf("dequeue: %+v", h2)
	}
	mustAdmit(t, f)
}

func TestHistory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	g := f.create(t, "project", "goal").ID
	title := "renamed"
	if _, _, err := f.s.Edit(ctx, g, cards.EditInput{Title: &title}); err != nil {
		t.Fatal(err)
	}
	hist, err := f.s.History(ctx, g)
	if err != nil || len(hist) != 2 || hist[0].Title != "goal card" || hist[1].Title != "renamed" || hist[1].Version != 2 {
		t.Fatalf("history = %+v %v", hist, err)
	}
}

// TestChildrenReadsTheCurrentDocuments checks the concurrent hierarchy read
// against one Get per child: after creations, edits, a reorder and a
// deletion, from the writing store and from a fresh store over the same
// files (a restart), and while a writer keeps adding children.
func TestChildrenReadsTheCurrentDocuments(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, false)
	var goals []string
	for range 20 {
		goals = append(goals, f.create(t, cards.RootID, "goal").ID)
	}
	retitled := "retitled goal"
	if _, _, err := f.s.Edit(ctx, goals[3], cards.EditInput{Title: &retitled}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Reorder(ctx, goals[7], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(ctx, goals[11]); err != nil {
		t.Fatal(err)
	}
	check := func(name string, s *cards.Store) {
		t.Helper()
		root, kids, err := s.Children(ctx, cards.RootID)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(kids) != len(root.Children) || len(kids) != 20 {
			t.Fatalf("%s: %d children for %d listed", name, len(kids), len(root.Children))
		}
		for i, k := range kids {
			want, err := s.Get(ctx, root.Children[i])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(k, want) {
				t.Fatalf("%s: child %d is %+v, Get says %+v", name, i, k, want)
			}
		}
		if kids[0].ID != goals[7] {
			t.Fatalf("%s: first child %s, want the reordered %s", name, kids[0].ID, goals[7])
		}
		byID := map[string]cards.Card{}
		for _, k := range kids {
			byID[k.ID] = k
		}
		if byID[goals[3]].Title != retitled || !byID[goals[11]].Tombstoned() {
			t.Fatalf("%s: edit or deletion not seen: %q, tombstone %v", name, byID[goals[3]].Title, byID[goals[11]].Tombstoned())
		}
	}
	check("writing store", f.s)
	check("after restart", f.store(t))

	if _, kids, err := f.s.Children(ctx, goals[11]); err != nil || kids != nil {
		t.Fatalf("tombstone children = %v, %v; want none", kids, err)
	}
	if _, _, err := f.s.Children(ctx, "project.zz"); !errors.Is(err, cards.ErrNotFound) {
		t.Fatalf("missing card: %v, want ErrNotFound", err)
	}

	// A writer adding children never shows a reader a half-done write.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 15 {
			if _, err := f.s.Create(ctx, cards.CreateInput{Parent: goals[0], Type: "task", Title: "task", Author: "agent:planner"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		g, kids, err := f.s.Children(ctx, goals[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != len(g.Children) {
			t.Fatalf("%d children read for %d listed", len(kids), len(g.Children))
		}
		for _, k := range kids {
			if k.Parent != goals[0] {
				t.Fatalf("child %s has parent %s", k.ID, k.Parent)
			}
		}
	}
	if _, kids, _ := f.s.Children(ctx, goals[0]); len(kids) != 15 {
		t.Fatalf("%d tasks after the writer, want 15", len(kids))
	}

	// A listed child whose head is gone is damage, not absence.
	if err := os.Remove(filepath.Join(f.s.CardDir(goals[5]), "head.json")); err != nil {
		t.Fatal(err)
	}
	var adm *cards.AdmissionError
	if _, _, err := f.s.Children(ctx, cards.RootID); !errors.As(err, &adm) || errors.Is(err, cards.ErrNotFound) {
		t.Fatalf("missing child head: %v, want an AdmissionError", err)
	}
}
