package project_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestResetCommissionedProject: a reset of a project with git_workflow on
// preflights, read-only, that the delivery branch is selected and clean and
// that no private ref holds undelivered source, refusing with the state,
// the paths or the refs before anything is deleted; with the operator's
// consent it removes the generated roots and every private ref, keeps the
// delivery branch and its delivered commit, and commissions the fresh root
// again at the branch's tip.
func TestResetCommissionedProject(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "initial")
	opts := project.Options{Root: dir, LookupEnv: func(string) (string, bool) { return "", false },
		Publisher: state.New(state.Options{Fatal: func(err error) { t.Fatalf("fatal: %v", err) }})}
	p, _, err := project.Init(ctx, project.InitOptions{Options: opts, Template: "classic-git"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := p.Cards.Create(ctx, cards.CreateInput{Parent: cards.RootID, Type: "goal", Title: "Goal", Author: "test", Bootstrap: map[string]string{"brief": "b"}}); err != nil || c.ID != "project.a" {
		t.Fatalf("create the goal: %+v %v", c.ID, err)
	}
	repo, err := project.OpenSource(ctx, dir, p.Workflows.Git(), project.SourceOptions{QueryDeadline: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// A goal delivers one task to main; a second task's checkpoint is not
	// delivered.
	step := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	initial := gitIn(t, dir, "rev-parse", "main")
	step(repo.Enter(ctx, gitsource.EnterOptions{Card: "project.a", Parent: "project"}))
	step(repo.Enter(ctx, gitsource.EnterOptions{Card: "project.a.a", Parent: "project.a"}))
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\n"), 0o644)
	cp, err := repo.Checkpoint(ctx, gitsource.CheckpointOptions{Card: "project.a.a"})
	step(cp, err)
	step(repo.DeliverToParent(ctx, gitsource.DeliverOptions{Child: "project.a.a", Parent: "project.a", Reviewed: cp.After.Commit, Title: "Hello"}))
	step(repo.AdvanceParent(ctx, gitsource.AdvanceOptions{Child: "project.a", Parent: "project", Base: gitsource.OID(initial)}))
	step(repo.DeliverToBranch(ctx, "project"))
	delivered := gitIn(t, dir, "rev-parse", "main")
	step(repo.Enter(ctx, gitsource.EnterOptions{Card: "project.a.b", Parent: "project.a"}))
	os.WriteFile(filepath.Join(dir, "pending.txt"), []byte("pending\n"), 0o644)
	step(repo.Checkpoint(ctx, gitsource.CheckpointOptions{Card: "project.a.b"}))
	step(repo.Enter(ctx, gitsource.EnterOptions{Card: "project", Parent: ""}))
	refsBefore := gitIn(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/saivage/")
	if strings.Count(refsBefore, "\n") != 3 {
		t.Fatalf("private refs before the reset:\n%s", refsBefore)
	}

	goalHead := filepath.Join(p.Cards.CardDir("project.a"), "head.json")
	if _, err := os.Stat(goalHead); err != nil {
		t.Fatal(err)
	}
	reset := func(discard bool) error {
		_, err := project.Reset(ctx, project.ResetOptions{InitOptions: project.InitOptions{Options: opts}, DiscardSource: discard})
		return err
	}
	untouched := func(what string) {
		t.Helper()
		if _, err := os.Stat(goalHead); err != nil {
			t.Errorf("%s: the generated cards were deleted: %v", what, err)
		}
		if got := gitIn(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/saivage/"); got != refsBefore {
			t.Errorf("%s: private refs changed:\n%s", what, got)
		}
		if got := gitIn(t, dir, "rev-parse", "main"); got != delivered {
			t.Errorf("%s: main moved to %s", what, got)
		}
	}
	// HEAD detached at the root's tip (a stopped Run leaves the checkout on
	// a card): refused, nothing deleted.
	if err := reset(true); err == nil || !strings.Contains(err.Error(), "detached HEAD") || !strings.Contains(err.Error(), "refused before deleting anything") {
		t.Fatalf("reset on a detached HEAD = %v", err)
	}
	untouched("detached HEAD")
	gitIn(t, dir, "switch", "-q", "main")
	// A native rebase stopped on a conflict: refused, saying what to do.
	gitIn(t, dir, "switch", "-q", "-c", "side", initial)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("other\n"), 0o644)
	gitIn(t, dir, "add", "hello.txt")
	gitIn(t, dir, "commit", "-q", "-m", "side")
	if out, err := exec.Command("git", "-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "main").CombinedOutput(); err == nil {
		t.Fatalf("the rebase did not stop: %s", out)
	}
	if err := reset(true); err == nil || !strings.Contains(err.Error(), "git rebase is stopped") || !strings.Contains(err.Error(), "git rebase --abort") {
		t.Fatalf("reset during a stopped rebase = %v", err)
	}
	untouched("stopped rebase")
	gitIn(t, dir, "rebase", "--abort")
	gitIn(t, dir, "switch", "-q", "main")
	gitIn(t, dir, "branch", "-q", "-D", "side")
	// Dirty checkout: refused naming the paths, nothing deleted.
	os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# edited\n"), 0o644)
	if err := reset(true); err == nil || !strings.Contains(err.Error(), "README.md, stray.txt") {
		t.Fatalf("reset on a dirty checkout = %v", err)
	}
	untouched("dirty checkout")
	os.Remove(filepath.Join(dir, "stray.txt"))
	gitIn(t, dir, "checkout", "-q", "--", "README.md")
	// Undelivered source on a private ref: refused naming exactly that ref.
	err = reset(false)
	var und *project.UndeliveredError
	if !errors.As(err, &und) || len(und.Refs) != 1 || und.Refs[0] != "refs/saivage/cards/project.a.b" || !strings.Contains(err.Error(), "--discard-source") {
		t.Fatalf("reset with an undelivered ref = %v", err)
	}
	untouched("undelivered ref")
	plan, err := project.PlanSourceReset(ctx, opts, true)
	if err != nil || plan.Commit != delivered || len(plan.Refs) != 4 || len(plan.Discarded) != 1 {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	untouched("plan")

	// Consent given: reset.
	if err := reset(true); err != nil {
		t.Fatal(err)
	}
	if got := gitIn(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/saivage/"); got != "refs/saivage/cards/project "+delivered {
		t.Errorf("private refs after the reset = %q, want only the recommissioned root at %s", got, delivered)
	}
	if got := gitIn(t, dir, "rev-parse", "main", "main~1"); got != delivered+"\n"+initial {
		t.Errorf("main after the reset = %q", got)
	}
	if got := gitIn(t, dir, "show", "main:hello.txt"); got != "hello" {
		t.Errorf("the delivered change is gone: %q", got)
	}
	if st := gitIn(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" || gitIn(t, dir, "symbolic-ref", "HEAD") != "refs/heads/main" {
		t.Errorf("checkout after the reset: %q", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "pending.txt")); err == nil {
		t.Error("the discarded checkpoint's file is in the checkout")
	}
	p, err = project.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.Cards.Get(ctx, cards.RootID)
	if err != nil || root.Git == nil || root.Git.Tip != delivered || root.Git.Base != delivered || root.Git.PolicyDigest != p.Workflows.Git().Digest {
		t.Fatalf("root after the reset = %+v, %v", root.Git, err)
	}
	if err := p.CheckSourcePolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cards.Get(ctx, "project.a"); err == nil {
		t.Error("the old goal survived the reset")
	}
	// The fresh root's children start from the delivered tip.
	if tup, err := repo.Enter(ctx, gitsource.EnterOptions{Card: "project.a", Parent: "project"}); err != nil || string(tup.Commit) != delivered {
		t.Fatalf("enter after the reset = %+v, %v", tup, err)
	}
}
