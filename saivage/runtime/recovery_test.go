package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/state"
)

func (e *env) rows(card, agent string) []conversations.Row {
	e.t.Helper()
	dir := filepath.Join(e.p.StateDir, "agents", agent)
	if card != "" {
		dir = e.p.Cards.SessionDir(card, agent)
	}
	cur, err := e.p.Sessions.LoadCurrent(dir, conversations.SessionID(agent, card), state.TailFail)
	if err != nil {
		e.t.Fatal(err)
	}
	return cur.Rows
}

// waitObs waits for a matching observation.
func (e *env) waitObs(what string, match func(runtime.Observation) bool) {
	e.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case o := <-e.obs:
			if match(o) {
				return
			}
		case err := <-e.fatal:
			e.t.Fatalf("fatal publication error while waiting for %s: %v", what, err)
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s (status %+v, unconsumed script %v)", what, e.rt.Status(), e.script.Remaining())
		}
	}
}

// TestPauseStopRestartRecovery: Pause during an Executor command lets the
// command finish and starts no model call until Resume; Stop during a
// second command leaves the cards running on disk; a restart recovers them
// to stopped with an uncertainty result for the pending call, and a new
// Run finishes the work.
func TestPauseStopRestartRecovery(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := filepath.Join(e.dir, "release")
	s := e.script
	s.Add("planner@project",
		call("create_card", map[string]any{"title": "Goal", "records": map[string]string{"brief": "Do the thing."}}),
		call("activate_card", map[string]any{"card_id": "project.a"}),
	)
	s.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Task", "records": map[string]string{"brief": "Run the commands."}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
	)
	s.Add("executor@project.a.a",
		call("run_command", map[string]any{"command": "while [ ! -f release ]; do sleep 0.02; done; echo released", "timeout_ms": 600000}),
		call("run_command", map[string]any{"command": "sleep 600", "timeout_ms": 600000}),
	)
	ctx := context.Background()
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitObs("the first command", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsToolStart && o.Session == "agent:executor:project.a.a" && o.Tool == "run_command"
	})
	if err := e.rt.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.rt.Status().Status; st != runtime.StatusPaused {
		t.Fatalf("status during a tool = %s, want paused (no model call in flight)", st)
	}
	if err := e.rt.InterventionAllowed(); err != nil {
		t.Errorf("intervention while paused: %v", err)
	}
	calls := s.Count("executor@project.a.a")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The command finishes and its result is recorded; the next model call
	// parks at the gate.
	e.waitObs("the parked model call", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsGateParked && o.Session == "agent:executor:project.a.a"
	})
	rows := e.rows("project.a.a", "executor")
	if last := rows[len(rows)-1]; last.Kind != "tool_result" || !strings.Contains(string(last.Content), "released") {
		t.Fatalf("last executor row = %+v", last)
	}
	if got := s.Count("executor@project.a.a"); got != calls {
		t.Fatalf("model calls while paused: %d → %d", calls, got)
	}
	if err := e.rt.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitObs("the second command", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsToolStart && o.Session == "agent:executor:project.a.a" && o.Tool == "run_command"
	})
	if got := s.Count("executor@project.a.a"); got != calls+1 {
		t.Errorf("model calls after Resume = %d, want %d", got, calls+1)
	}
	if err := e.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.rt.Status(); st.Status != runtime.StatusStopped || st.LastRun.Outcome != "stopped" {
		t.Fatalf("after Stop: %+v", st)
	}
	// Stop writes no card outcome: the chain is still running on disk and the
	// interrupted call has no result.
	for _, id := range []string{"project", "project.a", "project.a.a"} {
		if st := e.status(id); st != "running" {
			t.Errorf("%s after Stop = %s", id, st)
		}
	}
	rows = e.rows("project.a.a", "executor")
	if last := rows[len(rows)-1]; last.Kind != "tool_call" || last.Name != "run_command" {
		t.Fatalf("last executor row after Stop = %+v", last)
	}
	for _, p := range e.rt.Processes().List() {
		if p.State == "running" {
			t.Errorf("process %s still running after Stop", p.ID)
		}
	}

	// Restart: startup recovery publishes stopped leaf to root and settles
	// the pending calls with an uncertainty result and a notice.
	if err := e.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.open(runtime.Options{})
	for _, id := range []string{"project", "project.a", "project.a.a"} {
		if st := e.status(id); st != "stopped" {
			t.Errorf("%s after restart = %s", id, st)
		}
	}
	for _, sess := range [][2]string{{"project.a.a", "executor"}, {"project.a", "planner"}, {"project", "planner"}} {
		rows := e.rows(sess[0], sess[1])
		n := len(rows)
		if n < 2 || rows[n-2].Kind != "tool_result" || !strings.Contains(string(rows[n-2].Content), "outcome unknown") || rows[n-1].Kind != "marker" {
			t.Errorf("%s/%s tail after recovery = %+v", sess[0], sess[1], rows[max(n-2, 0):])
		}
	}
	rec := e.events("card_recovered")
	if len(rec) != 3 || rec[0].Data["card"] != "project.a.a" || rec[2].Data["card"] != "project" {
		t.Errorf("recovery order = %+v", rec)
	}

	// A new Run re-enters from STOPPED and finishes the work.
	s.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "Goal done."}),
		emit("done", "goal done", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		emit("done", "met", map[string]any{"verdict": "complete"}),
	)
	s.Add("planner@project.a",
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "One task."}),
		emit("done", "task done", nil),
	)
	s.Add("reviewer@project.a", emit("done", "ok", map[string]any{"verdict": "approved"}))
	s.Add("executor@project.a.a",
		call("write", map[string]any{"path": "record:summary", "content": "The first command ran; the second was interrupted and is not needed."}),
		emit("done", "done", nil),
	)
	s.Add("reviewer@project.a.a",
		call("write", map[string]any{"path": "record:review", "content": "Fine."}),
		emit("done", "ok", map[string]any{"verdict": "approved"}),
	)
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("second run = %+v (unconsumed %v)", sum, s.Remaining())
	}
	for _, id := range []string{"project", "project.a", "project.a.a"} {
		if st := e.status(id); st != "done" {
			t.Errorf("%s = %s", id, st)
		}
	}
	// The Executor's first call of the new Run saw the uncertainty result.
	found := false
	for _, r := range e.srv.Requests() {
		if strings.Contains(string(r.Raw), "outcome unknown") && strings.Contains(string(r.Raw), "agent working on card project.a.a") {
			found = true
		}
	}
	if !found {
		t.Error("no executor request carried the uncertainty result")
	}
}

func TestStartupSettlesAnalystPendingCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	sess := filepath.Join(e.p.StateDir, "agents", "analyst")
	id := conversations.SessionID("analyst", "")
	if err := e.p.Sessions.Append(sess, id, []conversations.Row{
		{ID: "s:user", Kind: "user", Content: []byte(`{"text":"stop it"}`)},
		{ID: "s:assistant:1", Kind: "assistant", Content: []byte(`{"text":""}`)},
		{ID: "s:1:tool-call:c9", Kind: "tool_call", CallID: "c9", Name: "stop_project", Content: []byte(`{"arguments":"{}"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.open(runtime.Options{})
	rows := e.rows("", "analyst")
	n := len(rows)
	if n != 5 || rows[3].Kind != "tool_result" || rows[3].CallID != "c9" || !strings.Contains(string(rows[3].Content), "outcome unknown") ||
		rows[4].Kind != "marker" || !strings.Contains(string(rows[4].Content), "stop_project") {
		t.Fatalf("analyst rows after startup = %+v", rows)
	}
	if ev := e.events("session_recovered"); len(ev) != 1 || ev[0].Data["recovery"] != "tool_pending" {
		t.Errorf("events = %+v", ev)
	}
}

func TestRecoveryRefusesBranchingChain(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	p := e.p
	for _, title := range []string{"A", "B"} {
		if _, err := p.Cards.Create(ctx, cardsInput("project", title)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"project", "project.a", "project.b"} {
		if _, err := p.Cards.Activate(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "error" || !strings.Contains(sum.Reason, "branching") || e.rt.Status().Status != runtime.StatusError {
		t.Fatalf("run = %+v status %s", sum, e.rt.Status().Status)
	}
	if err := e.rt.Run(ctx); err == nil || !strings.Contains(err.Error(), "in error") {
		t.Errorf("Run after an error: %v", err)
	}
}
