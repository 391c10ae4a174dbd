package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/runtime"
)

// TestRootRunsToDone: plan (write plan, emit done) → assess (write
// assessment, verdict complete) → DONE with consecutive record versions.
func TestRootRunsToDone(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "1. build hello"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Objective met."}),
		emit("done", "assessed", map[string]any{"verdict": "complete"}),
	)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "done" || e.status("project") != "done" {
		t.Fatalf("run = %+v, root %s", sum, e.status("project"))
	}
	if c, v := e.record("project", "plan"); v != 1 || c != "1. build hello" {
		t.Errorf("plan = v%d %q", v, c)
	}
	if _, v := e.record("project", "assessment"); v != 1 {
		t.Errorf("assessment version %d", v)
	}
	fin := e.events("card_finished")
	if len(fin) != 1 || fin[0].Data["outcome"] != "done" || !strings.Contains(fin[0].Data["summary"].(string), "assessed") {
		t.Errorf("card_finished = %+v", fin)
	}
	if e.rt.Status().Status != runtime.StatusStopped {
		t.Errorf("status %s", e.rt.Status().Status)
	}
	// A finished root refuses a new Run.
	if err := e.rt.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "done") {
		t.Errorf("second Run: %v", err)
	}
}
