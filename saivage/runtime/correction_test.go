package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// TestCorrectionsShareOneBudget: a malformed emit_result, a plain-text
// answer, an unwritten record and an empty record draft each produce a
// correction; the 17th corrective cause fails the node and the card.
func TestCorrectionsShareOneBudget(t *testing.T) {
	e := newEnv(t, envOptions{})
	replies := []llmtest.Reply{
		emit("maybe", "not an outcome", nil),                                     // 1 malformed
		text("I believe the plan is finished."),                                  // 2 plain text
		emit("done", "planned", nil),                                             // 3 plan not updated
		call("write", map[string]any{"path": "record:plan", "content": "draft"}), //
		call("write", map[string]any{"path": "record:plan", "content": ""}),      //
		emit("done", "planned", nil),                                             // 4 plan is empty
		{ToolCalls: []llm.ToolCall{{ID: "bad-json", Type: "function", Function: llm.FunctionCall{Name: "emit_result", Arguments: "{not json"}}}}, // 5 malformed
	}
	for range 12 { // 6 … 17
		replies = append(replies, text("still thinking"))
	}
	e.script.Add("planner@project", replies...)
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "failed" || e.status("project") != "failed" || !strings.Contains(sum.Reason, "exceeded its correction budget of 16") {
		t.Fatalf("run = %+v, root %s", sum, e.status("project"))
	}
	if n := e.script.Count("planner@project"); n != len(replies) {
		t.Errorf("planner model calls = %d, want %d", n, len(replies))
	}
	corr := e.events("correction")
	if len(corr) != 17 {
		t.Fatalf("corrections = %d, want 17", len(corr))
	}
	kinds := []string{}
	for _, c := range corr[:5] {
		kinds = append(kinds, c.Data["kind"].(string))
	}
	if got := strings.Join(kinds, ","); got != "malformed_result,plain_text,record_gate,record_gate,malformed_result" {
		t.Errorf("correction kinds = %s", got)
	}
	// The model saw each correction.
	var seen string
	for _, r := range e.rows("project", "planner") {
		seen += string(r.Content) + "\n"
	}
	for _, want := range []string{"outcome must be one of blocked, done, failed", "does not finish this node",
		"record:plan was not updated", "record:plan is empty", "(correction 16 of 16)"} {
		if !strings.Contains(seen, want) {
			t.Errorf("session lacks %q", want)
		}
	}
	// Nothing was accepted.
	if _, v := e.record("project", "plan"); v != 0 {
		t.Errorf("plan version = %d", v)
	}
}

// TestPendingNotifications: a message queued before the Run is delivered
// with the recipient's entry prompt; one that arrives while the recipient
// works is delivered as a correction when it reports a terminal outcome.
func TestPendingNotifications(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	// The planner's first model call streams until hold is closed, so the
	// Pause below lands while the recipient works, however slow the machine
	// is; its next model call then parks at the gate.
	hold := make(chan struct{})
	write := call("write", map[string]any{"path": "record:plan", "content": "plan"})
	write.Content, write.Hold = "Writing the plan.", hold
	e.script.Add("planner@project",
		write,
		emit("blocked", "waiting for input", nil),
		emit("blocked", "still waiting for input", nil),
	)
	if _, err := e.p.Cards.Enqueue(ctx, "project", "agent:analyst", "Remember the README."); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitObs("the planner's first model call", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsModelCall && o.Session == "agent:planner:project"
	})
	if err := e.rt.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.rt.Status().Status; st != runtime.StatusPausing {
		t.Fatalf("status with a model call in flight = %s, want pausing", st)
	}
	close(hold)
	e.waitObs("the parked call", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsGateParked && o.Session == "agent:planner:project"
	})
	if got := e.script.Count("planner@project"); got != 1 {
		t.Fatalf("planner model calls while paused = %d, want 1", got)
	}
	if _, err := e.p.Cards.Enqueue(ctx, "project", "agent:analyst", "Also add a licence."); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "blocked" {
		t.Fatalf("run = %+v", sum)
	}
	rows := e.rows("project", "planner")
	if !strings.Contains(string(rows[1].Content), "Remember the README.") {
		t.Errorf("entry prompt = %s", rows[1].Content)
	}
	var corrected bool
	for _, r := range rows {
		corrected = corrected || (r.Kind == "tool_result" && r.Name == "emit_result" && strings.Contains(string(r.Content), "Also add a licence."))
	}
	if !corrected {
		t.Error("the pending notification was not delivered as a correction")
	}
	h, _, err := e.p.Cards.GetHead(ctx, "project")
	if err != nil || len(h.Mailbox) != 0 {
		t.Errorf("mailbox after delivery = %v %v", h.Mailbox, err)
	}
	if c := e.events("correction"); len(c) != 1 || c[0].Data["kind"] != "pending_notifications" {
		t.Errorf("corrections = %+v", c)
	}
}
