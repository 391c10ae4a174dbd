package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
	"github.com/agentstack/agentstack/saivage/state"
)

// git runs Debian's git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test",
		"GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitCheckout makes dir a clean checkout of main with one commit.
func gitCheckout(t *testing.T, files map[string]string) func(dir string) {
	return func(dir string) {
		git(t, dir, "init", "-q", "-b", "main")
		git(t, dir, "config", "user.name", "Test")
		git(t, dir, "config", "user.email", "test@example.com")
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "initial")
	}
}

func newGitEnv(t *testing.T) *env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	return newEnv(t, envOptions{template: "classic-git", prepare: gitCheckout(t, map[string]string{"README.md": "# demo\n", "shared.txt": "base\n"})})
}

// gitTask scripts a task: the Executor writes a file, checkpoints and
// reports done; the Reviewer reads it and approves.
func gitTask(s *runtimetest.Script, id, file, content string) {
	s.Add("executor@"+id,
		call("write", map[string]any{"path": file, "content": content}),
		call("checkpoint_source", map[string]any{"message": "write " + file}),
		call("write", map[string]any{"path": "record:summary", "content": "Wrote " + file + "."}),
		emit("done", "wrote "+file, nil),
	)
	gitApprove(s, id, file)
}

func gitApprove(s *runtimetest.Script, id, file string) {
	s.Add("reviewer@"+id,
		call("read", map[string]any{"path": file}),
		call("write", map[string]any{"path": "record:review", "content": "Approved: " + file + " is right."}),
		emit("done", "approved "+file, map[string]any{"verdict": "approved"}),
	)
}

// gitGoal scripts the project and the goal project.a whose Planner creates
// the tasks and activates each in order.
func gitGoal(s *runtimetest.Script, titles ...string) {
	s.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One goal."}),
		emit("done", "the goal is done", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		emit("done", "complete", map[string]any{"verdict": "complete"}),
	)
	var replies []llmtest.Reply
	for _, title := range titles {
		replies = append(replies, call("create_card", map[string]any{"title": title, "records": map[string]string{"brief": title}}))
	}
	for i := range titles {
		replies = append(replies, call("activate_card", map[string]any{"card_id": "project.a." + cards.Segment(i)}))
	}
	replies = append(replies, call("write", map[string]any{"path": "record:plan", "content": "Tasks."}), emit("done", "tasks done", nil))
	s.Add("planner@project.a", replies...)
	s.Add("reviewer@project.a", emit("done", "the goal is met", map[string]any{"verdict": "approved"}))
}

func (e *env) run() {
	e.t.Helper()
	if _, err := e.p.Cards.Create(context.Background(), cardsInput("project", "Files")); err != nil {
		e.t.Fatal(err)
	}
	if err := e.rt.Run(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) card(id string) cards.Card {
	e.t.Helper()
	c, err := e.p.Cards.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// The Done-when happy path: three tasks editing different files end with
// the delivery branch holding exactly the reviewed changes, one commit per
// delivered card naming it, nothing uncommitted, private refs in the
// configured namespace, and the facts projected on the cards.
func TestGitThreeTasksDeliverOneCommitEach(t *testing.T) {
	e := newGitEnv(t)
	initial := git(t, e.dir, "rev-parse", "main")
	root := e.card("project")
	if root.Git == nil || root.Git.Tip != initial || root.Git.DeliveryBranch != "main" || !strings.HasPrefix(root.Git.PolicyDigest, "sha256:") ||
		root.Git.Ref != "refs/saivage/cards/project" {
		t.Fatalf("root facts after commissioning = %+v", root.Git)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, ".git", "info", "exclude")); !strings.Contains(string(b), "/.saivage/") {
		t.Errorf(".saivage/ is not ignored: %q", b)
	}
	gitGoal(e.script, "Write hello", "Write world", "Write third")
	gitTask(e.script, "project.a.a", "hello.txt", "hello\n")
	gitTask(e.script, "project.a.b", "world.txt", "world\n")
	gitTask(e.script, "project.a.c", "third.txt", "third\n")
	e.run()
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	if left := e.script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed replies: %v", left)
	}
	if st := git(t, e.dir, "status", "--porcelain"); st != "" {
		t.Errorf("uncommitted after the Run:\n%s", st)
	}
	if head := git(t, e.dir, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
		t.Errorf("HEAD = %s", head)
	}
	subjects := strings.Split(git(t, e.dir, "log", "--format=%s", initial+"..main"), "\n")
	slices.Reverse(subjects)
	if len(subjects) != 3 {
		t.Fatalf("delivered commits = %q", subjects)
	}
	for i, id := range []string{"project.a.a", "project.a.b", "project.a.c"} {
		if !strings.Contains(subjects[i], id) {
			t.Errorf("commit %d %q does not name %s", i, subjects[i], id)
		}
		c := e.card(id)
		if c.Git == nil || c.Git.Delivered == "" || !strings.Contains(git(t, e.dir, "log", "-1", "--format=%B", c.Git.Delivered), id) {
			t.Errorf("%s facts = %+v", id, c.Git)
		}
	}
	if files := git(t, e.dir, "diff", "--name-only", initial, "main"); files != "hello.txt\nthird.txt\nworld.txt" {
		t.Errorf("delivered files = %q", files)
	}
	for f, want := range map[string]string{"hello.txt": "hello\n", "world.txt": "world\n", "third.txt": "third\n"} {
		if got := git(t, e.dir, "show", "main:"+f); got+"\n" != want {
			t.Errorf("main:%s = %q", f, got)
		}
	}
	refs := git(t, e.dir, "for-each-ref", "--format=%(refname)", "refs/saivage/cards")
	for _, id := range []string{"project", "project.a", "project.a.a", "project.a.b", "project.a.c"} {
		if !strings.Contains(refs, "refs/saivage/cards/"+id+"\n") && !strings.HasSuffix(refs, "refs/saivage/cards/"+id) {
			t.Errorf("private ref of %s missing: %s", id, refs)
		}
	}
	if all := git(t, e.dir, "for-each-ref", "--format=%(refname)"); strings.Contains(all, "refs/heads/saivage") {
		t.Errorf("private refs leaked into branches: %s", all)
	}
	if r := e.card("project"); r.Git.Branch != git(t, e.dir, "rev-parse", "main") {
		t.Errorf("root branch fact = %s", r.Git.Branch)
	}
	if v := e.card("project.a.a").ReadModel(); v.Git.Ref != cards.RedactedRef || v.Git.Tip == "" {
		t.Errorf("read model = %+v", v.Git)
	}
}

// sessionResults returns the tool results a card agent's session holds.
func (e *env) sessionResults(card, agentName, tool string) []string {
	e.t.Helper()
	cur, err := e.p.Sessions.LoadCurrent(e.p.Cards.SessionDir(card, agentName), conversations.SessionID(agentName, card), state.TailFail)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range cur.Rows {
		if r.Kind == "tool_result" && r.Name == tool {
			out = append(out, string(r.Content))
		}
	}
	return out
}

// A rejected review leaves the parent untouched; the Executor reruns and
// only the approved rework is delivered.
func TestGitRejectedReviewLeavesParentUntouched(t *testing.T) {
	e := newGitEnv(t)
	initial := git(t, e.dir, "rev-parse", "main")
	gitGoal(e.script, "Write hello")
	e.script.Add("executor@project.a.a",
		call("write", map[string]any{"path": "hello.txt", "content": "helo\n"}),
		call("checkpoint_source", map[string]any{}),
		call("write", map[string]any{"path": "record:summary", "content": "Wrote hello.txt."}),
		emit("done", "wrote hello.txt", nil),
		// The rework: the goal's ref is still where the task started.
		call("run_command", map[string]any{"command": "git rev-parse refs/saivage/cards/project.a"}),
		call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
		call("checkpoint_source", map[string]any{"message": "fix the typo"}),
		call("write", map[string]any{"path": "record:summary", "content": "Fixed the typo in hello.txt."}),
		emit("done", "fixed hello.txt", nil),
	)
	e.script.Add("reviewer@project.a.a",
		call("write", map[string]any{"path": "record:review", "content": "Typo: helo."}),
		emit("done", "changes requested", map[string]any{"verdict": "changes_requested"}),
	)
	gitApprove(e.script, "project.a.a", "hello.txt")
	e.run()
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	runs := e.sessionResults("project.a.a", "executor", "run_command")
	if len(runs) != 1 || !strings.Contains(runs[0], initial) {
		t.Fatalf("the goal's ref moved before approval: %v (initial %s)", runs, initial)
	}
	if n := git(t, e.dir, "rev-list", "--count", initial+"..main"); n != "1" {
		t.Errorf("%s commits delivered, want 1", n)
	}
	if got := git(t, e.dir, "show", "main:hello.txt"); got != "hello" {
		t.Errorf("delivered hello.txt = %q, want the approved rework", got)
	}
	if evs := e.events("source_delivered"); len(evs) != 3 { // task to goal, goal to project, project to main
		t.Errorf("deliveries = %d", len(evs))
	}
}

// Two siblings editing the same file: the second delivery's rebase stops on
// the conflict, is preserved and reported, the correction resolves it, the
// review runs again and the resolution is delivered.
func TestGitSiblingConflictIsPreservedThenCorrected(t *testing.T) {
	e := newGitEnv(t)
	initial := git(t, e.dir, "rev-parse", "main")
	e.script.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One goal."}),
		emit("done", "the goal is done", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		emit("done", "complete", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Shared first", "records": map[string]string{"brief": "a"}}),
		call("create_card", map[string]any{"title": "Shared second", "records": map[string]string{"brief": "b"}}),
		call("activate_card", map[string]any{"card_id": "project.a.b"}), // starts from the initial tuple, then blocks
		call("activate_card", map[string]any{"card_id": "project.a.a"}), // delivered: the goal advances
		call("activate_card", map[string]any{"card_id": "project.a.b"}), // conflicts on delivery
		call("write", map[string]any{"path": "record:plan", "content": "Both."}),
		emit("done", "both done", nil),
	)
	e.script.Add("reviewer@project.a", emit("done", "met", map[string]any{"verdict": "approved"}))
	e.script.Add("executor@project.a.b",
		call("write", map[string]any{"path": "shared.txt", "content": "second\n"}),
		call("checkpoint_source", map[string]any{}),
		emit("blocked", "waiting for the first task", nil),
		// Reentry from BLOCKED: the work is on the card's ref.
		call("write", map[string]any{"path": "record:summary", "content": "shared.txt says second."}),
		emit("done", "second written", nil),
		// The correction participant: resolve the preserved conflict.
		call("read", map[string]any{"path": "shared.txt"}),
		emit("done", "premature", nil), // refused: markers remain
		call("write", map[string]any{"path": "shared.txt", "content": "first\nsecond\n"}),
		call("checkpoint_source", map[string]any{"message": "resolve"}),
		emit("done", "resolved the conflict", nil),
	)
	gitTask(e.script, "project.a.a", "shared.txt", "first\n")
	gitApprove(e.script, "project.a.b", "shared.txt")
	gitApprove(e.script, "project.a.b", "shared.txt")
	e.run()
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	pres := e.events("source_conflict_preserved")
	if len(pres) != 1 || !strings.Contains(fmtData(pres[0].Data), "shared.txt") {
		t.Fatalf("preserved = %+v", pres)
	}
	reads := e.sessionResults("project.a.b", "executor", "read")
	if len(reads) != 1 || !strings.Contains(reads[0], `\u003c\u003c\u003c\u003c\u003c\u003c\u003c`) || !strings.Contains(reads[0], "=======") || !strings.Contains(reads[0], "first") || !strings.Contains(reads[0], "second") {
		t.Fatalf("the correction did not see the preserved conflict: %v", reads)
	}
	var refused bool
	for _, ev := range e.events("correction") {
		if ev.Data["card"] == "project.a.b" && ev.Data["kind"] == "source_ready" {
			refused = true
		}
	}
	if !refused {
		t.Error("a done with conflict markers left was not refused through the correction route")
	}
	if got := git(t, e.dir, "show", "main:shared.txt"); got != "first\nsecond" {
		t.Errorf("main:shared.txt = %q", got)
	}
	subjects := git(t, e.dir, "log", "--format=%s", initial+"..main")
	if strings.Count(subjects, "\n") != 1 || !strings.Contains(subjects, "project.a.a") || !strings.Contains(subjects, "project.a.b") {
		t.Errorf("delivered = %q", subjects)
	}
	b := e.card("project.a.b")
	if b.Status != cards.Done || b.Git.Correction != nil || b.Git.Delivered == "" {
		t.Errorf("b = %s %+v", b.Status, b.Git)
	}
	for _, ev := range e.events("card_finished") {
		if ev.Data["card"] == "project.a.b" && ev.Data["summary"] == "resolved the conflict" {
			t.Error("the correction result became the card's product result")
		}
	}
}

// A dirty checkout refuses commissioning, naming the paths; nothing is
// generated.
func TestGitDirtyCheckoutRefusesCommissioning(t *testing.T) {
	dir := t.TempDir()
	gitCheckout(t, map[string]string{"README.md": "# demo\n"})(dir)
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := project.Init(context.Background(), project.InitOptions{Options: project.Options{Root: dir}, Template: "classic-git"})
	if err == nil || !strings.Contains(err.Error(), "README.md") || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "commissioning refused") {
		t.Fatalf("init on a dirty checkout: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".saivage", "cards")); !os.IsNotExist(err) {
		t.Errorf("generated state after the refusal: %v", err)
	}
	if refs := git(t, dir, "for-each-ref", "refs/saivage"); refs != "" {
		t.Errorf("private refs after the refusal: %s", refs)
	}
}

// A pre-commit hook that rewrites the index is detected: checkpoint_source
// reports the path, done is refused, nothing is delivered.
func TestGitIndexRewritingHookIsDetected(t *testing.T) {
	hook := "#!/bin/sh\nblob=$(printf 'hooked\\n' | git hash-object -w --stdin)\ngit update-index --add --cacheinfo 100644,$blob,hello.txt\n"
	e := newEnv(t, envOptions{template: "classic-git", prepare: func(dir string) {
		gitCheckout(t, map[string]string{"README.md": "# demo\n"})(dir)
		p := filepath.Join(dir, ".git", "hooks", "pre-commit")
		if err := os.WriteFile(p, []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}})
	initial := git(t, e.dir, "rev-parse", "main")
	e.script.Add("planner@project", call("activate_card", map[string]any{"card_id": "project.a"}), emit("blocked", "the goal is blocked", nil))
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello"}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		emit("blocked", "the task is blocked", nil),
	)
	e.script.Add("executor@project.a.a",
		call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
		call("checkpoint_source", map[string]any{}),
		call("write", map[string]any{"path": "record:summary", "content": "Wrote hello.txt."}),
		emit("done", "wrote hello.txt", nil),
		emit("blocked", "a hook keeps rewriting the index", nil),
	)
	e.run()
	if sum := e.waitRunEnded(); sum.Outcome != "blocked" {
		t.Fatalf("run = %+v", sum)
	}
	cps := e.sessionResults("project.a.a", "executor", "checkpoint_source")
	if len(cps) != 1 || !strings.Contains(cps[0], "no longer matches") || !strings.Contains(cps[0], "hello.txt") {
		t.Fatalf("checkpoint_source results = %v", cps)
	}
	if len(e.events("source_hook_effect")) != 1 {
		t.Error("no source_hook_effect event")
	}
	var refused bool
	for _, ev := range e.events("correction") {
		refused = refused || ev.Data["kind"] == "source_ready"
	}
	if !refused {
		t.Error("done over the hook-rewritten checkpoint was not refused")
	}
	if got := git(t, e.dir, "rev-parse", "main"); got != initial {
		t.Errorf("main moved to %s", got)
	}
	if st := e.status("project.a.a"); st != "blocked" {
		t.Errorf("task is %s", st)
	}
}

func fmtData(m map[string]any) string { return fmt.Sprint(m) }

// Mismatched source blocks execution before any model call and says why:
// a file changed outside any card refuses the root's entry, naming it.
func TestGitMismatchedSourceBlocksExecution(t *testing.T) {
	e := newGitEnv(t)
	if err := os.WriteFile(filepath.Join(e.dir, "README.md"), []byte("# edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "error" || !strings.Contains(sum.Reason, "source held") || !strings.Contains(sum.Reason, "README.md") {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("planner@project"); n != 0 {
		t.Errorf("%d model calls despite held source", n)
	}
	if st := e.status("project"); st != "backlog" {
		t.Errorf("root is %s", st)
	}
}
