package runtime_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/runtime"
)

var hang = llmtest.Reply{Content: "…", Delay: time.Hour}

// waitActive waits until chain is active and the hanging caller's call
// (its first) has reached the scripted provider: the runtime counts a call
// in flight before its request is sent, and an urgent stop landing in
// between would let a replacement's call take the hanging reply instead.
func (e *env) waitActive(caller string, chain ...string) {
	e.t.Helper()
	e.waitFor("the active chain", func() bool {
		st := e.rt.Status()
		return slices.Equal(st.Activations, chain) && st.ModelCallsInFlight == 1 && e.script.Count(caller) == 1
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
	e.waitActive("planner@project.a", "project", "project.a")
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
	e.waitActive("planner@project", "project")
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
	e.waitActive("planner@project.a", "project", "project.a")
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

// TestUrgentJoinEdges has one row per edge of the spec's urgent join
// table. The chain project → project.a → project.a.a is running, the leaf
// waiting on its model, when an urgent message arrives; each row asserts
// what that edge makes observable.
func TestUrgentJoinEdges(t *testing.T) {
	type seen struct {
		mu sync.Mutex
		// at the owner's first model call after the claim: the statuses
		// of the retired cards and the owner's activate_card result.
		statuses map[string]string
	}
	tests := []struct {
		name   string
		target string // urgent target; its nearest live ancestor owns the claim
		owner  string
		// stopped is the claimed suffix, owner's child first.
		stopped []string
		// halt stops the runtime right after the claim.
		halt  bool
		check func(t *testing.T, e *env, s *seen)
	}{
		{
			// Old boundary consumer → successor tracker: the owner's
			// activate_card returns the child as stopped and the owner's
			// turn goes on, without waiting for the Supervisor.
			name: "old boundary consumer to successor tracker", target: "project.a", owner: "project", stopped: []string{"project.a", "project.a.a"},
			check: func(t *testing.T, e *env, s *seen) {
				e.waitOwnerCall()
				if got := lastToolResult(e, "planner@project"); !strings.Contains(got, "stopped") || !strings.Contains(got, "project.a") {
					t.Errorf("the owner's activate_card result = %s", got)
				}
				if e.rt.Status().Status != runtime.StatusRunning {
					t.Errorf("status = %s, want the same Run going on", e.rt.Status().Status)
				}
			},
		},
		{
			// New task → captured urgent settlement: the owner's next model
			// call (its successor's first preparation) happens only after
			// the retired card is settled and published stopped.
			name: "new task to captured urgent settlement", target: "project.a", owner: "project", stopped: []string{"project.a", "project.a.a"},
			check: func(t *testing.T, e *env, s *seen) {
				e.waitOwnerCall()
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.statuses["project.a"] != "stopped" || s.statuses["project.a.a"] != "stopped" {
					t.Errorf("at the owner's next model call the retired cards were %v, want both stopped", s.statuses)
				}
			},
		},
		{
			// Urgent settlement → descendant + retiring boundary joins: the
			// whole suffix below the root is stopped leaf to root while the
			// surviving owner's turn is still running (not joined).
			name: "urgent settlement to descendant and retiring boundary joins", target: "project.a", owner: "project", stopped: []string{"project.a", "project.a.a"},
			check: func(t *testing.T, e *env, s *seen) {
				e.waitOwnerCall() // the surviving owner is still at work
				var order []string
				for _, ev := range e.events("card_recovered") {
					order = append(order, ev.Data["card"].(string))
				}
				if !slices.Equal(order, []string{"project.a.a", "project.a"}) {
					t.Errorf("settled %v, want leaf to root", order)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.statuses["project.a"] != "stopped" || s.statuses["project.a.a"] != "stopped" {
					t.Errorf("at the owner's next call: %v", s.statuses)
				}
			},
		},
		{
			// Halt → current/retiring owners + same urgent settlement: a Stop
			// right after the claim joins the urgent settlement (the
			// retired card ends stopped, settled once) and the urgent work
			// does not wait for the halt (Stop returns).
			name: "halt to current and retiring owners and the same urgent settlement", target: "project.a", owner: "project", stopped: []string{"project.a", "project.a.a"}, halt: true,
			check: func(t *testing.T, e *env, _ *seen) {
				if st := e.rt.Status().Status; st != runtime.StatusStopped {
					t.Errorf("status = %s", st)
				}
				for _, id := range []string{"project.a", "project.a.a"} {
					if got := e.status(id); got != "stopped" {
						t.Errorf("%s = %s, want stopped by the urgent settlement", id, got)
					}
				}
				if n := len(e.events("card_recovered")); n != 2 {
					t.Errorf("settlements = %d, want exactly the urgent ones", n)
				}
				if got := e.status("project"); got != "running" {
					t.Errorf("project = %s: Stop writes no outcome for the surviving owner", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			ctx := context.Background()
			task := cardsInput("project.a", "Task")
			task.Type = "task"
			for _, c := range []cards.CreateInput{cardsInput("project", "Goal"), task} {
				if _, err := e.p.Cards.Create(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			e.script.Add("planner@project", call("activate_card", map[string]any{"card_id": "project.a"}))
			e.script.Add("planner@project.a", call("activate_card", map[string]any{"card_id": "project.a.a"}))
			e.script.Add("executor@project.a.a", hang)
			s := &seen{}
			// The owner's first call after the claim records what it
			// finds, then waits like the leaf did.
			e.script.Fallback = func(key string) (llmtest.Reply, bool) {
				if key != "planner@"+tt.owner {
					return llmtest.Reply{}, false
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.statuses == nil {
					s.statuses = map[string]string{}
					for _, id := range tt.stopped {
						c, err := e.p.Cards.Get(context.Background(), id)
						if err == nil {
							s.statuses[id] = string(c.Status)
						}
					}
				}
				return hang, true
			}
			if err := e.rt.Run(ctx); err != nil {
				t.Fatal(err)
			}
			e.waitActive("executor@project.a.a", "project", "project.a", "project.a.a")
			res, err := e.rt.UrgentNotify(ctx, tt.target, "operator", "Stop: the brief changed.")
			if err != nil {
				t.Fatal(err)
			}
			if res.Owner != tt.owner || !slices.Equal(res.Stopped, tt.stopped) || res.Suppressed != "" || res.Queued[0] != tt.target {
				t.Fatalf("urgent = %+v", res)
			}
			if tt.halt {
				if err := e.rt.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tt.check(t, e, s)
		})
	}
}

// lastToolResult returns the content of the last tool message a caller
// sent to the model.
func lastToolResult(e *env, caller string) string {
	out := ""
	for _, req := range e.srv.Requests() {
		if runtimeKey(req) != caller {
			continue
		}
		msgs, _ := req.Body["messages"].([]any)
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == "tool" {
				out, _ = mm["content"].(string)
			}
		}
	}
	return out
}

// waitOwnerCall waits until the root's Planner, the urgent owner, is in
// its next model call after the claim, and nothing else runs.
func (e *env) waitOwnerCall() {
	e.t.Helper()
	e.waitFor("the owner's next model call", func() bool {
		st := e.rt.Status()
		return e.script.Count("planner@project") == 2 && slices.Equal(st.Activations, []string{"project"}) && st.ModelCallsInFlight == 1
	})
}
