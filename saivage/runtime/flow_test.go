package runtime_test

import (
	"context"
	"github.com/agentstack/agentstack/saivage/runtime/runtimetest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// scriptTask scripts a task: the Executor writes a file, runs a command,
// writes its summary and reports done; the Reviewer approves.
func scriptTask(s *runtimetest.Script, id, file, content string) {
	s.Add("executor@"+id,
		call("write", map[string]any{"path": file, "content": content}),
		call("run_command", map[string]any{"command": "cat " + file + " && echo \"work root: $SAIVAGE_CARD_WORK_ROOT\""}),
		call("write", map[string]any{"path": "record:summary", "content": "Wrote " + file + " and checked it with cat."}),
		emit("done", "wrote "+file, nil),
	)
	s.Add("reviewer@"+id,
		call("read", map[string]any{"path": file}),
		call("write", map[string]any{"path": "record:review", "content": "Approved: " + file + " has the expected content."}),
		emit("done", "approved "+file, map[string]any{"verdict": "approved"}),
	)
}

// scriptFlow scripts the whole Done-when flow after the Analyst's turn.
func scriptFlow(s *runtimetest.Script) {
	s.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "Goal project.a delivers the hello files."}),
		emit("done", "the goal is done", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "The objective is met."}),
		emit("done", "complete", map[string]any{"verdict": "complete"}),
	)
	s.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Write hello.txt", "records": map[string]string{"brief": "Create hello.txt containing hello."}}),
		call("create_card", map[string]any{"title": "Write world.txt", "dependencies": []string{"project.a.a"}, "records": map[string]string{"brief": "Create world.txt containing world."}}),
		call("activate_card", map[string]any{"card_id": "project.a.b"}), // refused: its dependency is not done
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("activate_card", map[string]any{"card_id": "project.a.b"}),
		call("write", map[string]any{"path": "record:plan", "content": "Two tasks: hello.txt then world.txt."}),
		emit("done", "both tasks are done", nil),
	)
	s.Add("reviewer@project.a", emit("done", "the goal is met", map[string]any{"verdict": "approved"}))
	scriptTask(s, "project.a.a", "hello.txt", "hello\n")
	scriptTask(s, "project.a.b", "world.txt", "world\n")
}

func TestAnalystStartsRunThatFinishesTheTree(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.script.Add("analyst",
		call("create_card", map[string]any{"parent_id": "project", "title": "Hello files", "records": map[string]string{"brief": "Write hello.txt and world.txt."}}),
		call("start_project", map[string]any{}),
		text("I created the goal and started the Run."),
	)
	scriptFlow(e.script)
	ctx := context.Background()
	if _, _, err := e.rt.Analyst().Submit(ctx, "Create a goal for the hello files and start."); err != nil {
		t.Fatal(err)
	}
	res, err := e.rt.Analyst().Wait(ctx)
	if err != nil || res.Error != "" || !strings.Contains(res.Text, "started the Run") {
		t.Fatalf("analyst turn = %+v, %v", res, err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	for _, id := range []string{"project", "project.a", "project.a.a", "project.a.b"} {
		if st := e.status(id); st != "done" {
			t.Errorf("%s is %s", id, st)
		}
	}
	for file, want := range map[string]string{"hello.txt": "hello\n", "world.txt": "world\n"} {
		if b, err := os.ReadFile(filepath.Join(e.dir, file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v", file, b, err)
		}
	}
	if c, v := e.record("project.a.a", "summary"); v != 1 || !strings.Contains(c, "hello.txt") {
		t.Errorf("summary = v%d %q", v, c)
	}
	if left := e.script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed replies: %v", left)
	}
	// The refused early activation was an ordinary tool error for the Planner.
	cur, err := e.p.Sessions.LoadCurrent(e.p.Cards.SessionDir("project.a", "planner"), conversations.SessionID("planner", "project.a"), state.TailFail)
	if err != nil {
		t.Fatal(err)
	}
	var refused, childOutcome bool
	for _, r := range cur.Rows {
		if r.Kind == "tool_result" && strings.Contains(string(r.Content), "depends on project.a.a") {
			refused = true
		}
		if r.Kind == "tool_result" && strings.Contains(string(r.Content), `\"status\": \"done\"`) {
			childOutcome = true
		}
	}
	if !refused || !childOutcome {
		t.Errorf("planner session: refused=%v child outcome=%v", refused, childOutcome)
	}
	// The command ran with the card work root.
	cur, err = e.p.Sessions.LoadCurrent(e.p.Cards.SessionDir("project.a.a", "executor"), conversations.SessionID("executor", "project.a.a"), state.TailFail)
	if err != nil {
		t.Fatal(err)
	}
	var ran bool
	for _, r := range cur.Rows {
		if r.Kind == "tool_result" && r.Name == "run_command" && strings.Contains(string(r.Content), `\"head\":\"hello`) &&
			strings.Contains(string(r.Content), "work root: "+filepath.Join(e.dir, ".saivage", "work", "cards", "project.a.a")) {
			ran = true
		}
	}
	if !ran {
		t.Error("run_command result does not show the output with SAIVAGE_CARD_WORK_ROOT")
	}
}
