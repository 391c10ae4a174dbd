package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/templates"
)

// TestEveryTemplateRunsToDone: each registered template's smallest project
// (the root alone: plan, then assess complete) runs to DONE on a scripted
// provider.
func TestEveryTemplateRunsToDone(t *testing.T) {
	for _, tpl := range templates.All() {
		t.Run(tpl.Name, func(t *testing.T) {
			o := envOptions{template: tpl.Name}
			if tpl.ProvisionRequired {
				o.prepare = gitCheckout(t, map[string]string{"README.md": "# demo\n"})
			}
			e := newEnv(t, o)
			e.script.Add("planner@project",
				call("write", map[string]any{"path": "record:plan", "content": "Nothing to build: the objective is a note."}),
				emit("done", "planned", nil),
				call("write", map[string]any{"path": "record:assessment", "content": "Objective met."}),
				emit("done", "assessed", map[string]any{"verdict": "complete"}),
			)
			if err := e.rt.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if sum := e.waitRunEnded(); sum.Outcome != "done" || e.status("project") != "done" {
				t.Fatalf("run = %+v, root %s", sum, e.status("project"))
			}
			if left := e.script.Remaining(); len(left) != 0 {
				t.Errorf("unconsumed replies: %v", left)
			}
		})
	}
}

// TestTypedTestCardRoutesCoverageReadyToVerify: in classic-typed a test
// card loops on write_tests until coverage_ready is true, then verify is
// the only successful terminal.
func TestTypedTestCardRoutesCoverageReadyToVerify(t *testing.T) {
	e := newEnv(t, envOptions{template: "classic-typed"})
	e.script.Add("planner@project",
		call("create_card", map[string]any{"title": "Tested parser", "records": map[string]string{"brief": "A parser with tests."}}),
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One goal."}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		emit("done", "assessed", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"type": "test", "title": "Parser tests", "records": map[string]string{"brief": "Cover the parser."}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One test card."}),
		emit("done", "tests are done", nil),
	)
	e.script.Add("reviewer@project.a", emit("done", "goal met", map[string]any{"verdict": "approved"}))
	e.script.Add("executor@project.a.a",
		call("write", map[string]any{"path": "record:coverage", "content": "Happy path only."}),
		emit("done", "not yet", map[string]any{"coverage_ready": false}),
		call("write", map[string]any{"path": "record:coverage", "content": "Happy path and errors."}),
		emit("done", "covered", map[string]any{"coverage_ready": true}),
	)
	e.script.Add("reviewer@project.a.a",
		call("write", map[string]any{"path": "record:verification", "content": "Ran them; they fail on a broken parser."}),
		emit("done", "verified", map[string]any{"verdict": "approved"}),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	if c, v := e.record("project.a.a", "coverage"); v != 2 || c != "Happy path and errors." {
		t.Errorf("coverage = v%d %q", v, c)
	}
	var nodes []string
	for _, ev := range e.events("node_entered") {
		if ev.Data["card"] == "project.a.a" {
			nodes = append(nodes, ev.Data["node"].(string))
		}
	}
	if got := strings.Join(nodes, ","); got != "write_tests,write_tests,verify" {
		t.Errorf("test card nodes = %s", got)
	}
}
