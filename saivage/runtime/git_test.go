package runtime_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
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
