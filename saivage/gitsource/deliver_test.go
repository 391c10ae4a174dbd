package gitsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// work enters card (from parent), writes files and checkpoints; it returns
// the checkpoint's tip (what the Reviewer approves).
func work(t testing.TB, r *Repo, dir, card, parent string, files map[string]string) OID {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Enter(ctx, EnterOptions{Card: card, Parent: parent}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, files)
	cp, err := r.Checkpoint(ctx, CheckpointOptions{Card: card})
	if err != nil {
		t.Fatal(err)
	}
	return cp.After.Commit
}

func TestThreeCardsDeliverReviewedChanges(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"README": "project\n", ".gitignore": "*.log\n"})
	r, root := commission(t, dir, func(o *Options) { o.Namespace = "refs/saivage/p" })
	cards := []struct{ id, title, file string }{{"c1", "Add parser", "parser.go"}, {"c2", "Add lexer", "lexer.go"}, {"c3", "Add docs", "docs/guide.md"}}
	for _, c := range cards {
		reviewed := work(t, r, dir, c.id, "root", map[string]string{c.file: "// " + c.id + "\n", "build.log": "ignored"})
		d, err := r.DeliverToParent(ctx, DeliverOptions{Child: c.id, Parent: "root", Reviewed: reviewed, Title: c.title})
		if err != nil {
			t.Fatal(err)
		}
		if d.Commit == "" || d.Parent.Commit != d.Commit {
			t.Fatalf("delivery %+v", d)
		}
		if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"Add docs (card c3)", "Add lexer (card c2)", "Add parser (card c1)", "initial"}
	if got := subjects(t, dir, "main"); !slices.Equal(got, want) {
		t.Fatalf("main history %v, want %v", got, want)
	}
	files := treeFiles(t, dir, "main")
	if len(files) != 5 || files["parser.go"] != "100644 // c1" || files["docs/guide.md"] != "100644 // c3" {
		t.Fatalf("main tree %v", files)
	}
	// Nothing uncommitted for a third-party reader; HEAD on main; the
	// ignored build log is neither delivered nor lost.
	if s := porcelain(t, dir); s != "" {
		t.Fatalf("git status: %q", s)
	}
	if gitT(t, dir, "symbolic-ref", "HEAD") != "refs/heads/main" {
		t.Fatal("HEAD not on main")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "build.log")); string(b) != "ignored" {
		t.Fatal("ignored file lost")
	}
	wantRefs := []string{"refs/heads/main", "refs/saivage/p/cards/c1", "refs/saivage/p/cards/c2", "refs/saivage/p/cards/c3", "refs/saivage/p/cards/root"}
	if got := refs(t, dir); !slices.Equal(got, wantRefs) {
		t.Fatalf("refs %v", got)
	}
	// Each child started from the parent's exact tuple at its entry.
	if gitT(t, dir, "rev-parse", "refs/saivage/p/cards/c1^") != string(root.Commit) {
		t.Fatal("c1 did not start from the root's tuple")
	}
	if gitT(t, dir, "rev-parse", "refs/saivage/p/cards/c2^") != gitT(t, dir, "rev-parse", "main~2") {
		t.Fatal("c2 did not start from the root's tuple after c1's delivery")
	}
	body := gitT(t, dir, "log", "-1", "--format=%B", "main")
	if !strings.Contains(body, "Saivage-Card: c3") || !strings.Contains(body, "Saivage-Reviewed: "+gitT(t, dir, "rev-parse", "refs/saivage/p/cards/c3")) {
		t.Fatalf("squash message %q", body)
	}
}

func TestDeliveryRefusals(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*Repo, string, OID) {
		dir := newCheckout(t, map[string]string{"a.txt": "a\n"})
		r, _ := commission(t, dir)
		return r, dir, work(t, r, dir, "c1", "root", map[string]string{"a.txt": "reviewed\n"})
	}
	t.Run("no-change squash leaves the parent commit unchanged", func(t *testing.T) {
		dir := newCheckout(t, map[string]string{"a.txt": "a\n"})
		r, root := commission(t, dir)
		tip := work(t, r, dir, "c1", "root", map[string]string{"a.txt": "changed\n"})
		write(t, dir, map[string]string{"a.txt": "a\n"}) // reverted
		cp, err := r.Checkpoint(ctx, CheckpointOptions{Card: "c1"})
		if err != nil || !cp.Changed || cp.Before.Commit != tip {
			t.Fatalf("checkpoint %+v %v", cp, err)
		}
		d, err := r.DeliverToParent(ctx, DeliverOptions{Child: "c1", Parent: "root", Reviewed: cp.After.Commit})
		if err != nil {
			t.Fatal(err)
		}
		if d.Commit != "" || d.Parent.Commit != root.Commit || gitT(t, dir, "rev-parse", "refs/saivage/cards/root") != string(root.Commit) {
			t.Fatalf("no-change squash moved the parent: %+v", d)
		}
		// And an unchanged checkpoint writes nothing.
		again, err := r.Enter(ctx, EnterOptions{Card: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		cp, err = r.Checkpoint(ctx, CheckpointOptions{Card: "c1"})
		if err != nil || cp.Changed || cp.After != again {
			t.Fatalf("empty checkpoint %+v %v", cp, err)
		}
	})
	t.Run("rejected review leaves the parent untouched", func(t *testing.T) {
		r, dir, reviewed := setup(t)
		root0 := gitT(t, dir, "rev-parse", "refs/saivage/cards/root")
		write(t, dir, map[string]string{"a.txt": "unreviewed correction\n"})
		cp, err := r.Checkpoint(ctx, CheckpointOptions{Card: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.DeliverToParent(ctx, DeliverOptions{Child: "c1", Parent: "root", Reviewed: reviewed})
		var ue *UnreviewedError
		if !errors.As(err, &ue) || ue.Tip != cp.After.Commit {
			t.Fatalf("err = %v", err)
		}
		if gitT(t, dir, "rev-parse", "refs/saivage/cards/root") != root0 {
			t.Fatal("parent moved")
		}
	})
	t.Run("later dirt refuses", func(t *testing.T) {
		r, dir, reviewed := setup(t)
		root0 := gitT(t, dir, "rev-parse", "refs/saivage/cards/root")
		write(t, dir, map[string]string{"a.txt": "edited after approval\n", "stray.txt": "s"})
		_, err := r.DeliverToParent(ctx, DeliverOptions{Child: "c1", Parent: "root", Reviewed: reviewed})
		var de *DirtyError
		if !errors.As(err, &de) || !slices.Equal(de.Paths(), []string{"a.txt", "stray.txt"}) {
			t.Fatalf("err = %v", err)
		}
		if gitT(t, dir, "rev-parse", "refs/saivage/cards/root") != root0 {
			t.Fatal("parent moved")
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "edited after approval\n" {
			t.Fatal("the refusal lost the edit")
		}
	})
	t.Run("delivery branch moved outside", func(t *testing.T) {
		r, dir, reviewed := setup(t)
		if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "c1", Parent: "root", Reviewed: reviewed}); err != nil {
			t.Fatal(err)
		}
		other := gitT(t, dir, "commit-tree", "-m", "outside", "-p", "main", "main^{tree}")
		gitT(t, dir, "update-ref", "refs/heads/main", other)
		if _, err := r.DeliverToBranch(ctx, "root"); err == nil || !strings.Contains(err.Error(), "moved outside") {
			t.Fatalf("err = %v", err)
		}
		if gitT(t, dir, "rev-parse", "main") != other {
			t.Fatal("main was overwritten")
		}
	})
}

func TestSiblingConflictPreservedAndCorrected(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"shared.txt": "line1\nline2\nline3\n", "other.txt": "o\n"})
	r, _ := commission(t, dir)
	// Both siblings start from the same root tuple and edit the same line.
	reviewedA := work(t, r, dir, "a", "root", map[string]string{"shared.txt": "line1\nA\nline3\n"})
	reviewedB := work(t, r, dir, "b", "root", map[string]string{"shared.txt": "line1\nB\nline3\n", "b-only.txt": "b\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "a", Parent: "root", Reviewed: reviewedA}); err != nil {
		t.Fatal(err)
	}
	rootAfterA := gitT(t, dir, "rev-parse", "refs/saivage/cards/root")
	_, err := r.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: reviewedB})
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(ce.Paths, []string{"shared.txt"}) || ce.Original != reviewedB || ce.Tip != reviewedB || string(ce.Current) != rootAfterA {
		t.Fatalf("conflict %+v", ce)
	}
	if gitT(t, dir, "rev-parse", "refs/saivage/cards/root") != rootAfterA {
		t.Fatal("parent moved on conflict")
	}
	if !strings.Contains(gitT(t, dir, "ls-files", "-u"), "shared.txt") {
		t.Fatal("no native conflict stages")
	}
	// Invocation 1: the snapshot does not touch the real index.
	index0, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	snap, err := r.SnapshotRebase(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	index1, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if string(index0) != string(index1) {
		t.Fatal("snapshot changed the real index")
	}
	if gitT(t, dir, "rev-parse", snap.Ref) != string(snap.Commit) || snap.Detached != ce.Detached || snap.Native != ce.Native {
		t.Fatalf("snapshot %+v", snap)
	}
	files := treeFiles(t, dir, string(snap.Commit))
	if !strings.Contains(files["shared.txt"], "<<<<<<<") || files["b-only.txt"] != "100644 b" {
		t.Fatalf("snapshot tree %v", files)
	}
	// Invocation 2: abort once, restore, return onto the current parent.
	back, err := r.ReturnSnapshot(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if r.rebaseInProgress() || gitT(t, dir, "rev-parse", string(back.Commit)+"^") != rootAfterA {
		t.Fatal("not returned onto the current parent")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.txt")); !strings.Contains(string(b), "<<<<<<<") {
		t.Fatalf("conflict markers not restored: %q", b)
	}
	// The correction resolves and is reviewed; a sibling edits the same
	// line again meanwhile: the second interruption keeps the original.
	reviewedC := work(t, r, dir, "c", "root", map[string]string{"shared.txt": "line1\nC\nline3\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "c", Parent: "root", Reviewed: reviewedC}); err != nil {
		t.Fatal(err)
	}
	fixed := work(t, r, dir, "b", "", map[string]string{"shared.txt": "line1\nA+B\nline3\n"})
	_, err = r.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: fixed})
	if !errors.As(err, &ce) {
		t.Fatalf("second delivery: %v", err)
	}
	if ce.Original != reviewedB || ce.Tip != fixed || ce.Original == ce.Tip || ce.Current == snap.Current {
		t.Fatalf("second conflict %+v (first original %s)", ce, reviewedB)
	}
	snap2, err := r.SnapshotRebase(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	rootAfterC := OID(gitT(t, dir, "rev-parse", "refs/saivage/cards/root"))
	// Each selection keeps its own value: the first interruption's
	// original, this replay's tip, the parent it replays onto, the HEAD
	// before the native rebase and the HEAD the stopped rebase left.
	if snap2.Original != reviewedB || snap2.Tip != fixed || snap2.Current != rootAfterC || snap2.Native != fixed ||
		snap2.Detached != ce.Detached || snap2.Detached != OID(gitT(t, dir, "rev-parse", "HEAD")) {
		t.Fatalf("second snapshot %+v", snap2)
	}
	if _, err := r.ReturnSnapshot(ctx, snap2); err != nil {
		t.Fatal(err)
	}
	final := work(t, r, dir, "b", "", map[string]string{"shared.txt": "line1\nA+B+C\nline3\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "b", Parent: "root", Reviewed: final, Title: "Merge A and B"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	got := treeFiles(t, dir, "main")
	if got["shared.txt"] != "100644 line1\nA+B+C\nline3" || got["b-only.txt"] != "100644 b" {
		t.Fatalf("main tree %v", got)
	}
	if s := subjects(t, dir, "main"); !slices.Equal(s, []string{"Merge A and B (card b)", "card c (card c)", "card a (card a)", "initial"}) {
		t.Fatalf("main history %v", s)
	}
	if porcelain(t, dir) != "" {
		t.Fatal("uncommitted state left")
	}
}

func TestHookEffectsSeenAtNextCheck(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"a.txt": "a\n"})
	r, _ := commission(t, dir)
	// A pre-commit hook that rewrites the (private) index entry of a.txt.
	hook := "#!/bin/sh\nblob=$(printf 'hooked\\n' | git hash-object -w --stdin)\ngit update-index --cacheinfo 100644,$blob,a.txt\n"
	write(t, dir, map[string]string{".git/hooks/pre-commit": hook})
	_ = os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit"), 0o755)
	if _, err := r.Enter(ctx, EnterOptions{Card: "c1", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a.txt": "agent\n"})
	cp, err := r.Checkpoint(ctx, CheckpointOptions{Card: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if treeFiles(t, dir, string(cp.After.Commit))["a.txt"] != "100644 hooked" {
		t.Fatal("the hook's index effect is not in the checkpoint")
	}
	obs, err := r.Check(ctx, cp.After)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(obs.WorktreeMismatch, []string{"a.txt"}) || obs.Clean() {
		t.Fatalf("next check did not see the hook's rewrite: %+v", obs)
	}
	_, err = r.DeliverToParent(ctx, DeliverOptions{Child: "c1", Parent: "root", Reviewed: cp.After.Commit})
	var de *DirtyError
	if !errors.As(err, &de) {
		t.Fatalf("delivery over a hook-rewritten index: %v", err)
	}
}

func TestHookSurvivingChildIsContainment(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"a.txt": "a\n"})
	r, root := commission(t, dir)
	pidFile := filepath.Join(t.TempDir(), "pid")
	hook := "#!/bin/sh\nsleep 60 </dev/null >/dev/null 2>&1 &\necho $! > " + pidFile + "\nexit 0\n"
	write(t, dir, map[string]string{".git/hooks/pre-commit": hook})
	_ = os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit"), 0o755)
	if _, err := r.Enter(ctx, EnterOptions{Card: "c1", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a.txt": "b\n"})
	_, err := r.Checkpoint(ctx, CheckpointOptions{Card: "c1"})
	var ce *CommandError
	if !errors.As(err, &ce) || !ce.Contained || ce.ExitCode != 0 {
		t.Fatalf("err = %v", err)
	}
	if gitT(t, dir, "rev-parse", "refs/saivage/cards/c1") != string(root.Commit) {
		t.Fatal("a contained hook produced a checkpoint")
	}
	b, _ := os.ReadFile(pidFile)
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b)) + "/cmdline"); err == nil {
		st, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		if !strings.Contains(string(st), ") Z") {
			t.Fatalf("hook child %s survived", b)
		}
	}
}

// TestAdvanceParent passes a goal's source (one reviewed task squash) up
// to the root unchanged: the root's ref fast-forwards to the goal's tip
// and is selected; a rerun only selects; a root that moved since the goal
// started, or a base the goal does not descend from, is refused with a
// *NotFastForwardError and nothing moves.
func TestAdvanceParent(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r, root := commission(t, dir)
	// goal g holds task t's reviewed squash.
	if _, err := r.Enter(ctx, EnterOptions{Card: "g", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	reviewed := work(t, r, dir, "t", "g", map[string]string{"a.txt": "A\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "t", Parent: "g", Reviewed: reviewed, Title: "Task"}); err != nil {
		t.Fatal(err)
	}
	g, err := r.Lookup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	// goal h started at the same root tip and delivered its own task.
	if _, err := r.Enter(ctx, EnterOptions{Card: "h", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	reviewedU := work(t, r, dir, "u", "h", map[string]string{"b.txt": "B\n"})
	if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: "u", Parent: "h", Reviewed: reviewedU, Title: "Other"}); err != nil {
		t.Fatal(err)
	}

	var nf *NotFastForwardError
	if _, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: g.Commit}); !errors.As(err, &nf) || nf.ParentTip != root.Commit {
		t.Fatalf("advance from a base the root is not at = %v, want a NotFastForwardError", err)
	}
	var steps []Step
	r = openRepo(t, dir, func(o *Options) { o.AfterStep = func(s Step) { steps = append(steps, s) } })
	d, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: root.Commit})
	if err != nil {
		t.Fatal(err)
	}
	if d.Commit != g.Commit || d.Parent.Commit != g.Commit || d.Resumed || !slices.Contains(steps, StepAdvanceParent) {
		t.Fatalf("advance = %+v (steps %v), want the root at %s", d, steps, g.Commit)
	}
	if got := gitT(t, dir, "rev-parse", "refs/saivage/cards/root", "HEAD"); got != string(g.Commit)+"\n"+string(g.Commit) {
		t.Fatalf("root ref and HEAD = %q, want both %s", got, g.Commit)
	}
	if s := subjects(t, dir, "refs/saivage/cards/root"); !slices.Equal(s, []string{"Task (card t)", "initial"}) {
		t.Fatalf("root history %v", s)
	}
	if s := porcelain(t, dir); s != "" {
		t.Fatalf("uncommitted after advance: %q", s)
	}
	// A rerun (after a crash past the ref move) only selects the root.
	if d, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: root.Commit}); err != nil || d.Commit != "" || !d.Resumed {
		t.Fatalf("rerun = %+v, %v", d, err)
	}
	// h started at the old root tip: the root moved, h is refused.
	h, _ := r.Lookup(ctx, "h")
	_, err = r.AdvanceParent(ctx, AdvanceOptions{Child: "h", Parent: "root", Base: root.Commit})
	if !errors.As(err, &nf) || nf.Base != root.Commit || nf.ParentTip != g.Commit || nf.ChildTip != h.Commit {
		t.Fatalf("advance over a moved root = %v, want a NotFastForwardError", err)
	}
	if !strings.Contains(err.Error(), "moved from") {
		t.Fatalf("refusal does not say the parent moved: %v", err)
	}
	if got := gitT(t, dir, "rev-parse", "refs/saivage/cards/root"); got != string(g.Commit) {
		t.Fatalf("refused advance moved the root to %s", got)
	}
	// A card whose tip does not descend from the base it names is refused.
	orphan := gitT(t, dir, "commit-tree", "-m", "unrelated", gitT(t, dir, "rev-parse", "HEAD^{tree}"))
	gitT(t, dir, "update-ref", "refs/saivage/cards/x", orphan)
	_, err = r.AdvanceParent(ctx, AdvanceOptions{Child: "x", Parent: "root", Base: g.Commit})
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "does not descend") {
		t.Fatalf("advance to an unrelated tip = %v, want a NotFastForwardError", err)
	}
	if got := gitT(t, dir, "rev-parse", "refs/saivage/cards/root"); got != string(g.Commit) {
		t.Fatalf("refused advance moved the root to %s", got)
	}
	// And the delivery branch gets one commit per delivered task.
	if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if s := subjects(t, dir, "main"); !slices.Equal(s, []string{"Task (card t)", "initial"}) {
		t.Fatalf("main history %v", s)
	}
}

// TestAdvanceParentSquashFallback: a goal whose parent moved while it
// worked is squashed onto the parent's new tip (one commit naming it, its
// changes and the parent's both kept); a rerun finds the squash; a goal
// whose changes conflict with the parent's new ones is refused with the
// paths and nothing moves (no rebase is started).
func TestAdvanceParentSquashFallback(t *testing.T) {
	ctx := context.Background()
	dir := newCheckout(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r, root := commission(t, dir)
	// Three goals start at the same root tip; each holds one task's squash.
	goal := func(g, task, file, content string) Tuple {
		if _, err := r.Enter(ctx, EnterOptions{Card: g, Parent: "root"}); err != nil {
			t.Fatal(err)
		}
		reviewed := work(t, r, dir, task, g, map[string]string{file: content})
		if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: task, Parent: g, Reviewed: reviewed, Title: "Task " + task}); err != nil {
			t.Fatal(err)
		}
		tip, err := r.Lookup(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		return tip
	}
	goal("g", "t", "a.txt", "A\n")
	h := goal("h", "u", "b.txt", "B\n")
	k := goal("k", "v", "a.txt", "K\n")
	if _, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "g", Parent: "root", Base: root.Commit, Squash: true}); err != nil {
		t.Fatal(err)
	}
	var steps []Step
	r = openRepo(t, dir, func(o *Options) { o.AfterStep = func(s Step) { steps = append(steps, s) } })
	d, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "h", Parent: "root", Base: root.Commit, Squash: true, Title: "Goal H"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Squashed || d.Resumed || d.Commit == "" || d.Parent.Commit != d.Commit || !slices.Contains(steps, StepSquashParent) {
		t.Fatalf("fallback = %+v (steps %v)", d, steps)
	}
	if s := subjects(t, dir, "refs/saivage/cards/root"); !slices.Equal(s, []string{"Goal H (card h)", "Task t (card t)", "initial"}) {
		t.Fatalf("root history %v", s)
	}
	if body := gitT(t, dir, "log", "-1", "--format=%B", string(d.Commit)); !strings.Contains(body, "Saivage-Card: h") || !strings.Contains(body, "Saivage-Reviewed: "+string(h.Commit)) {
		t.Fatalf("squash message %q", body)
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != string(d.Commit) || porcelain(t, dir) != "" {
		t.Fatalf("HEAD %s (want %s), status %q", got, d.Commit, porcelain(t, dir))
	}
	// A rerun (a crash after the squash) finds it and only selects.
	if again, err := r.AdvanceParent(ctx, AdvanceOptions{Child: "h", Parent: "root", Base: root.Commit, Squash: true}); err != nil ||
		again.Commit != d.Commit || !again.Resumed || !again.Squashed {
		t.Fatalf("rerun = %+v, %v", again, err)
	}
	// k's a.txt conflicts with g's: refused with the path, nothing moves.
	var sc *SquashConflictError
	_, err = r.AdvanceParent(ctx, AdvanceOptions{Child: "k", Parent: "root", Base: root.Commit, Squash: true})
	if !errors.As(err, &sc) || !slices.Equal(sc.Paths, []string{"a.txt"}) || sc.ParentTip != d.Commit || sc.ChildTip != k.Commit {
		t.Fatalf("conflicting fallback = %v, want a SquashConflictError on a.txt", err)
	}
	if got := gitT(t, dir, "rev-parse", "refs/saivage/cards/root", "refs/saivage/cards/k", "HEAD"); got != string(d.Commit)+"\n"+string(k.Commit)+"\n"+string(d.Commit) {
		t.Fatalf("refused fallback moved refs or HEAD: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "rebase-merge")); err == nil || porcelain(t, dir) != "" {
		t.Fatalf("refused fallback left a rebase or dirt: %q", porcelain(t, dir))
	}
	if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if s := subjects(t, dir, "main"); !slices.Equal(s, []string{"Goal H (card h)", "Task t (card t)", "initial"}) {
		t.Fatalf("main history %v", s)
	}
	for f, want := range map[string]string{"a.txt": "A", "b.txt": "B"} {
		if got := gitT(t, dir, "show", "main:"+f); got != want {
			t.Errorf("main:%s = %q, want %q", f, got, want)
		}
	}
}
