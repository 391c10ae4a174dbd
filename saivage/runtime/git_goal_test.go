package runtime_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
)

// movedParentGoals scripts two goals under the project: project.b starts
// first, delivers its task into its own ref and blocks; project.a then
// runs and delivers to the project (the project's ref moves); project.b
// resumes and finishes, so its delivery finds the project moved since it
// started. The tasks write fileA and fileB; conflict says they conflict,
// so the project's Planner blocks once project.b comes back BLOCKED. It
// runs the project, requires the Run to end with outcome and every scripted
// reply used, and returns main's initial commit.
func runMovedParentGoals(e *env, fileA, contentA, fileB, contentB string, conflict bool, outcome string) string {
	initial := git(e.t, e.dir, "rev-parse", "main")
	project := []llmtest.Reply{
		call("create_card", map[string]any{"title": "Later goal", "records": map[string]string{"brief": "b"}}),
		call("activate_card", map[string]any{"card_id": "project.b"}), // blocks after its task delivered
		call("activate_card", map[string]any{"card_id": "project.a"}), // delivered: the project moves
		call("activate_card", map[string]any{"card_id": "project.b"}), // finishes against the moved project
	}
	if conflict {
		project = append(project, emit("blocked", "project.b conflicts with project.a", nil))
	} else {
		project = append(project,
			call("write", map[string]any{"path": "record:plan", "content": "Two goals."}),
			emit("done", "both goals done", nil),
			call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
			emit("done", "complete", map[string]any{"verdict": "complete"}))
	}
	e.script.Add("planner@project", project...)
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Write a", "records": map[string]string{"brief": "a"}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One task."}),
		emit("done", "a done", nil),
	)
	e.script.Add("reviewer@project.a", emit("done", "met", map[string]any{"verdict": "approved"}))
	e.script.Add("planner@project.b",
		call("create_card", map[string]any{"title": "Write b", "records": map[string]string{"brief": "b"}}),
		call("activate_card", map[string]any{"card_id": "project.b.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One task, then wait for project.a."}),
		emit("blocked", "waiting for project.a", nil),
		// Reentry from BLOCKED: the task's delivery is on the goal's ref.
		call("write", map[string]any{"path": "record:plan", "content": "One task, done."}),
		emit("done", "b done", nil),
	)
	e.script.Add("reviewer@project.b", emit("done", "met", map[string]any{"verdict": "approved"}))
	gitTask(e.script, "project.a.a", fileA, contentA)
	gitTask(e.script, "project.b.a", fileB, contentB)
	e.run()
	if sum := e.waitRunEnded(); sum.Outcome != outcome {
		e.t.Fatalf("run = %+v, want %s", sum, outcome)
	}
	if left := e.script.Remaining(); len(left) != 0 {
		e.t.Errorf("unconsumed replies: %v", left)
	}
	return initial
}

// A goal whose parent moved while it worked cannot fast-forward it: its
// children's reviewed changes land on the parent as one squash commit
// naming the goal, and the delivery branch ends with exactly the reviewed
// changes.
func TestGitGoalSquashesOntoMovedParent(t *testing.T) {
	e := newGitEnv(t)
	initial := runMovedParentGoals(e, "a.txt", "from a\n", "b.txt", "from b\n", false, "done")
	b := e.card("project.b")
	sq := e.events("source_squashed")
	if len(sq) != 1 || sq[0].Data["card"] != "project.b" || sq[0].Data["commit"] != b.Git.Delivered || sq[0].Data["base"] != initial {
		t.Fatalf("squash events = %+v (b facts %+v)", sq, b.Git)
	}
	subjects := strings.Split(git(t, e.dir, "log", "--first-parent", "--format=%s", initial+"..main"), "\n")
	if !slices.Equal(subjects, []string{"Later goal (card project.b)", "Write a (card project.a.a)"}) {
		t.Fatalf("delivered commits = %q", subjects)
	}
	if got := git(t, e.dir, "rev-parse", "main~1", "main"); got != git(t, e.dir, "rev-parse", "refs/saivage/cards/project.a")+"\n"+b.Git.Delivered {
		t.Errorf("main = %q: want project.a's fast-forward then project.b's squash %s", got, b.Git.Delivered)
	}
	if body := git(t, e.dir, "log", "-1", "--format=%B", "main"); !strings.Contains(body, "Saivage-Card: project.b") {
		t.Errorf("squash message %q does not name project.b", body)
	}
	if files := git(t, e.dir, "diff", "--name-only", initial, "main"); files != "a.txt\nb.txt" {
		t.Errorf("delivered files = %q", files)
	}
	for f, want := range map[string]string{"a.txt": "from a", "b.txt": "from b"} {
		if got := git(t, e.dir, "show", "main:"+f); got != want {
			t.Errorf("main:%s = %q", f, got)
		}
	}
	if st := git(t, e.dir, "status", "--porcelain"); st != "" {
		t.Errorf("uncommitted after the Run:\n%s", st)
	}
	if head := git(t, e.dir, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
		t.Errorf("HEAD = %s", head)
	}
	if b.Status != cards.Done || b.Git.Held != "" {
		t.Errorf("project.b = %s, held %q", b.Status, b.Git.Held)
	}
}

// When the goal's changes conflict with what its parent received meanwhile,
// nothing moves: the goal's reviewed work stays on its ref, the parent and
// the delivery branch are untouched, no rebase is started, and the goal
// ends BLOCKED with the held reason (the conflicting path), which its
// parent's Planner sees.
func TestGitGoalSquashConflictIsHeld(t *testing.T) {
	e := newGitEnv(t)
	initial := runMovedParentGoals(e, "shared.txt", "from a\n", "shared.txt", "from b\n", true, "blocked")
	b := e.card("project.b")
	if b.Status != cards.Blocked || b.Git == nil || !strings.Contains(b.Git.Held, "conflicts in shared.txt") || b.Git.Delivered != "" {
		t.Fatalf("project.b = %s %+v", b.Status, b.Git)
	}
	var seen bool // the project's Planner got the reason with the BLOCKED outcome
	for _, r := range e.sessionResults("project", "planner", "activate_card") {
		seen = seen || (strings.Contains(r, `\"status\": \"blocked\"`) && strings.Contains(r, "conflicts in shared.txt") && !strings.Contains(r, "exported_records"))
	}
	if !seen {
		t.Errorf("activate_card results do not report the held conflict: %v", e.sessionResults("project", "planner", "activate_card"))
	}
	if got := git(t, e.dir, "rev-parse", "main"); got != initial {
		t.Errorf("main moved to %s", got)
	}
	aTip := git(t, e.dir, "rev-parse", "refs/saivage/cards/project.a")
	if got := git(t, e.dir, "rev-parse", "refs/saivage/cards/project", "HEAD"); got != aTip+"\n"+aTip {
		t.Errorf("the project's ref and HEAD = %q, want project.a's delivery %s only", got, aTip)
	}
	if got := git(t, e.dir, "show", "refs/saivage/cards/project.b:shared.txt"); got != "from b" {
		t.Errorf("project.b's reviewed work is gone from its ref: shared.txt = %q", got)
	}
	if got := git(t, e.dir, "log", "-1", "--format=%s", "refs/saivage/cards/project.b"); got != "Write b (card project.b.a)" {
		t.Errorf("project.b's ref tip = %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".git", "rebase-merge")); err == nil {
		t.Error("a rebase was started")
	}
	if st := git(t, e.dir, "status", "--porcelain"); st != "" {
		t.Errorf("uncommitted after the hold:\n%s", st)
	}
	if held := e.events("source_held"); len(held) != 1 || held[0].Data["card"] != "project.b" {
		t.Errorf("held events = %+v", held)
	}
}
