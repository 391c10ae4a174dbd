package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/runtime"
)

// TestAnalystObservationTools: the Analyst reads sessions and events; card
// maintenance is refused while a Run is active.
func TestAnalystObservationTools(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	// A failed root gives read_runtime_errors something to report.
	e.script.Add("planner@project", emit("failed", "cannot do this", nil))
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "failed" {
		t.Fatalf("run = %+v", sum)
	}
	e.script.Add("analyst",
		call("list_agent_sessions", map[string]any{}),
		call("read_agent_session", map[string]any{"session_id": "agent:planner:project", "last": 3}),
		call("read_runtime_errors", map[string]any{}),
		call("get_status", map[string]any{}),
		text("The root failed."),
	)
	if _, _, err := e.rt.Analyst().Submit(ctx, "What happened?"); err != nil {
		t.Fatal(err)
	}
	res, err := e.rt.Analyst().Wait(ctx)
	if err != nil || res.Text != "The root failed." {
		t.Fatalf("turn = %+v %v", res, err)
	}
	results := map[string]string{}
	for _, r := range e.rows("", "analyst") {
		if r.Kind == "tool_result" {
			results[r.Name] = string(r.Content)
		}
	}
	for name, want := range map[string]string{
		"list_agent_sessions": "agent:planner:project",
		"read_agent_session":  "[tool_result emit_result]",
		"read_runtime_errors": "card_finished",
		"get_status":          `\"status\": \"failed\"`,
	} {
		if !strings.Contains(results[name], want) {
			t.Errorf("%s result lacks %q: %s", name, want, results[name])
		}
	}
	if strings.Contains(results["read_runtime_errors"], "card_activated") {
		t.Errorf("read_runtime_errors includes ordinary events: %s", results["read_runtime_errors"])
	}
	if st := e.rt.Status(); st.Status != runtime.StatusStopped {
		t.Errorf("status = %s", st.Status)
	}
}
