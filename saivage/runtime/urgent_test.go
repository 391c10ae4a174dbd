package runtime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
)

var hang = llmtest.Reply{Content: "…", Delay: time.Hour}

// waitActive waits until chain is active and its leaf's Planner call has
// reached the scripted provider: the runtime counts a call in flight before
// its request is sent, and an urgent stop landing in between would make the
// replacement's call, not this one, take the leaf's hanging reply.
func (e *env) waitActive(chain ...string) {
	e.t.Helper()
	leaf := "planner@" + chain[len(chain)-1]
	e.waitFor("the active chain", func() bool {
		st := e.rt.Status()
		return slices.Equal(st.Activations, chain) && st.ModelCallsInFlight == 1 && e.script.Count(leaf) == 1
	})
}

// TestUrgentInterruptsDescendants: an urgent message for a running child
// queues the target first, then the note of the live owner; the owner's
// active suffix is stopped and its activate_card returns at once, so its
// Planner reads the notification and decides.
func TestUrgentInterruptsDescendants(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if _, err := e.p.Cards.Create(ctx, cardsInput("project", "Goal")); err != nil {
		t.Fatal(err)
	}
	e.script.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}),
		emit("failed", "the operator asked to stop", nil),
		emit("failed", "the operator asked to stop", nil))
	e.script.Add("planner@project.a", hang)
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitActive("project", "project.a")
	res, err := e.rt.UrgentNotify(ctx, "project.a", "operator", "Stop: the brief is wrong.")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Queued, []string{"project.a", "project"}) || res.Owner != "project" || !slices.Equal(res.Stopped, []string{"project.a"}) || res.Suppressed != "" {
		t.Fatalf("urgent = %+v", res)
	}
	run := e.waitRunEnded()
	if run.Outcome != "failed" || e.status("project.a") != "stopped" {
		t.Fatalf("run = %+v, project.a %s", run, e.status("project.a"))
	}
	// The target keeps its message for its own recipient; the owner's note
	// was delivered.
	if m, _ := e.p.Cards.Messages(ctx, "project.a"); len(m) != 1 || m[0].Text != "Stop: the brief is wrong." {
		t.Errorf("project.a mailbox = %+v", m)
	}
	if m, _ := e.p.Cards.Messages(ctx, "project"); len(m) != 0 {
		t.Errorf("root mailbox = %+v", m)
	}
	if left := e.script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed: %v", left)
	}
}

// TestUrgentRootReplacement: an urgent message for the running root stops
// it and replaces it by one STOPPED activation in the same Run, whose
// Planner gets the message at entry.
func TestUrgentRootReplacement(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.script.Add("planner@project", hang, emit("failed", "read the urgent message", nil))
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	runID := e.rt.Status().RunID
	e.waitActive("project")
	res, err := e.rt.UrgentNotify(ctx, "project", "operator", "Change of plan.")
	if err != nil || res.Owner != "project" || !slices.Equal(res.Stopped, []string{"project"}) {
		t.Fatalf("urgent = %+v %v", res, err)
	}
	run := e.waitRunEnded()
	if run.Outcome != "failed" || run.RunID != runID {
		t.Fatalf("run = %+v (want the same Run %s)", run, runID)
	}
	if n := len(e.events("root_replaced")); n != 1 {
		t.Errorf("root replacements = %d", n)
	}
	if n := len(e.events("run_started")); n != 1 {
		t.Errorf("runs = %d", n)
	}
	acts := e.events("card_activated")
	if len(acts) != 2 || acts[1].Data["entry"] != "STOPPED" {
		t.Errorf("activations = %+v", acts)
	}
	if m, _ := e.p.Cards.Messages(ctx, "project"); len(m) != 0 {
		t.Errorf("the replacement did not read the message: %+v", m)
	}
}

// TestUrgentSuppressed: Pause before the claim, and a stopped runtime,
// leave the messages queued without interrupting anything.
func TestUrgentSuppressed(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if _, err := e.p.Cards.Create(ctx, cardsInput("project", "Goal")); err != nil {
		t.Fatal(err)
	}
	res, err := e.rt.UrgentNotify(ctx, "project.a", "operator", "While stopped.")
	if err != nil || res.Suppressed == "" || res.Owner != "" || !slices.Equal(res.Queued, []string{"project.a", "project"}) {
		t.Fatalf("stopped: %+v %v", res, err)
	}
	e.script.Add("planner@project", call("activate_card", map[string]any{"card_id": "project.a"}))
	e.script.Add("planner@project.a", hang)
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitActive("project", "project.a")
	if err := e.rt.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = e.rt.UrgentNotify(ctx, "project.a", "operator", "While paused.")
	if err != nil || res.Owner != "" || res.Suppressed != "paused before the claim; no interruption" {
		t.Fatalf("paused: %+v %v", res, err)
	}
	if st := e.rt.Status(); !slices.Equal(st.Activations, []string{"project", "project.a"}) {
		t.Errorf("activations after a suppressed urgent = %v", st.Activations)
	}
	if err := e.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.rt.Status().Status; st != runtime.StatusStopped {
		t.Fatalf("status = %s", st)
	}
	// The first message was delivered at project.a's entry; the second
	// waits for its recipient.
	if m, _ := e.p.Cards.Messages(ctx, "project.a"); len(m) != 1 || m[0].Text != "While paused." {
		t.Errorf("project.a mailbox = %+v", m)
	}
}
