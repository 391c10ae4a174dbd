package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// newHookedGitEnv is newGitEnv with a pre-commit hook, which runs at every
// checkpoint (the Executor's and the runtime's own).
func newHookedGitEnv(t *testing.T, hook string) *env {
	t.Helper()
	return newEnv(t, envOptions{template: "classic-git", prepare: func(dir string) {
		gitCheckout(t, map[string]string{"README.md": "# demo\n"})(dir)
		if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", "pre-commit"), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestGitUrgentWaitsForSourceSettlement: an urgent claim arriving while
// the Executor's checkpoint_source is in flight (its pre-commit hook
// waits) for the goal above it waits for the checkpoint to finish instead of cancelling it
// halfway; the stopped cards' source returns to the root; the root's
// Planner continues and reactivates the goal, whose Planner reactivates the
// task, which finds its checkpointed work on its ref; the reviewed change
// is delivered.
func TestGitUrgentWaitsForSourceSettlement(t *testing.T) {
	e := newHookedGitEnv(t, "#!/bin/sh\ntouch .git/hook-started\nwhile [ ! -e .git/release ]; do sleep 0.05; done\n")
	started, releaseFile := filepath.Join(e.dir, ".git", "hook-started"), filepath.Join(e.dir, ".git", "release")
	e.script.Add("planner@project",
		call("activate_card", map[string]any{"card_id": "project.a"}), // stopped by the urgent claim
		call("activate_card", map[string]any{"card_id": "project.a"}), // the continuation
		call("write", map[string]any{"path": "record:plan", "content": "One goal."}),
		emit("done", "the goal is done", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "Met."}),
		emit("done", "complete", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello"}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}), // stopped by the urgent claim
		// Reentry from STOPPED, with the notification.
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		call("write", map[string]any{"path": "record:plan", "content": "Task."}),
		emit("done", "task done", nil),
	)
	e.script.Add("reviewer@project.a", emit("done", "the goal is met", map[string]any{"verdict": "approved"}))
	e.script.Add("executor@project.a.a",
		call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}),
		call("checkpoint_source", map[string]any{"message": "write hello.txt"}), // the claim arrives here
		// Reentry from STOPPED: the checkpointed work is on the card's ref.
		call("read", map[string]any{"path": "hello.txt"}),
		call("write", map[string]any{"path": "record:summary", "content": "Wrote hello.txt."}),
		emit("done", "wrote hello.txt", nil),
	)
	gitApprove(e.script, "project.a.a", "hello.txt")
	t.Cleanup(func() { _ = os.WriteFile(releaseFile, nil, 0o644) }) // never leave the hook waiting
	e.run()
	e.waitFor("the pre-commit hook of checkpoint_source", func() bool { return exists(started) })

	type claim struct {
		res runtime.UrgentResult
		err error
	}
	claimed := make(chan claim, 1)
	go func() {
		res, err := e.rt.UrgentNotify(context.Background(), "project.a", "operator", "Stop and re-read the brief.")
		claimed <- claim{res, err}
	}()
	select {
	case c := <-claimed:
		t.Fatalf("the claim did not wait for the checkpoint in flight: %+v", c)
	case <-time.After(time.Second):
	}
	if st := e.status("project.a.a"); st != "running" {
		t.Fatalf("project.a.a is %s while its checkpoint is in flight", st)
	}
	if err := os.WriteFile(releaseFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var c claim
	select {
	case c = <-claimed:
	case <-time.After(2 * time.Minute):
		t.Fatal("the claim never happened after the checkpoint settled")
	}
	if c.err != nil || c.res.Owner != "project" || !slices.Equal(c.res.Stopped, []string{"project.a", "project.a.a"}) {
		t.Fatalf("urgent = %+v %v", c.res, c.err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	cps := e.sessionResults("project.a.a", "executor", "checkpoint_source")
	if len(cps) != 1 || !strings.Contains(cps[0], "Checkpointed 1 path(s)") || !strings.Contains(cps[0], `"is_error":false`) || !strings.Contains(cps[0], "hello.txt") {
		t.Fatalf("checkpoint_source results = %v (the claim cut the checkpoint short)", cps)
	}
	// The checkpoint finished before the card was stopped.
	ckpt, stop := e.eventFor("source_checkpointed", "project.a.a"), e.eventFor("card_recovered", "project.a.a")
	if ckpt.Time.After(stop.Time) {
		t.Errorf("checkpointed at %s, after the stop at %s", ckpt.Time, stop.Time)
	}
	var entries []any
	for _, ev := range e.events("card_activated") {
		if ev.Data["card"] == "project.a.a" {
			entries = append(entries, ev.Data["entry"])
		}
	}
	if len(entries) != 2 || entries[1] != "STOPPED" {
		t.Errorf("project.a.a entries = %v (want a continuation from STOPPED)", entries)
	}
	if reads := e.sessionResults("project.a.a", "executor", "read"); len(reads) != 1 || !strings.Contains(reads[0], "hello") {
		t.Errorf("the continuation did not find the checkpointed work: %v", reads)
	}
	if got := git(t, e.dir, "show", "main:hello.txt"); got != "hello" {
		t.Errorf("main:hello.txt = %q", got)
	}
	if st := git(t, e.dir, "status", "--porcelain"); st != "" {
		t.Errorf("uncommitted: %s", st)
	}
	if left := e.script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed: %v", left)
	}
}

// TestGitUrgentRefusesContinuationOnHeldSource: when an urgently stopped
// task's unfinished work cannot be kept (the pre-commit hook refuses its
// checkpoint), its source is held and the owner does not continue: the
// Run stops with the held reason, no Planner gets a further model call,
// the goal above is not marked held, and the work stays in the checkout.
func TestGitUrgentRefusesContinuationOnHeldSource(t *testing.T) {
	e := newHookedGitEnv(t, "#!/bin/sh\nif [ -e .git/refuse ]; then echo 'commits are refused here' >&2; exit 1; fi\n")
	e.script.Add("planner@project", call("activate_card", map[string]any{"card_id": "project.a"}), emit("blocked", "not reached", nil))
	e.script.Add("planner@project.a",
		call("create_card", map[string]any{"title": "Write hello", "records": map[string]string{"brief": "hello"}}),
		call("activate_card", map[string]any{"card_id": "project.a.a"}),
		emit("blocked", "the continuation must be refused", nil),
	)
	e.script.Add("executor@project.a.a", call("write", map[string]any{"path": "hello.txt", "content": "hello\n"}), hang)
	e.run()
	e.waitFor("the Executor's hanging call", func() bool {
		st := e.rt.Status()
		return slices.Equal(st.Activations, []string{"project", "project.a", "project.a.a"}) && st.ModelCallsInFlight == 1 &&
			e.script.Count("executor@project.a.a") == 2
	})
	if err := os.WriteFile(filepath.Join(e.dir, ".git", "refuse"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.rt.UrgentNotify(context.Background(), "project.a", "operator", "Stop.")
	if err != nil || res.Owner != "project" || !slices.Equal(res.Stopped, []string{"project.a", "project.a.a"}) {
		t.Fatalf("urgent = %+v %v", res, err)
	}
	sum := e.waitRunEnded()
	if sum.Outcome != "stopped" || !strings.Contains(sum.Reason, "source held on card project.a.a") ||
		!strings.Contains(sum.Reason, "commits are refused here") || !strings.Contains(sum.Reason, "continuation was refused") {
		t.Fatalf("run = %+v", sum)
	}
	e.waitStatus(runtime.StatusStopped)
	task := e.card("project.a.a")
	if task.Status != cards.Stopped || task.Git == nil || !strings.Contains(task.Git.Held, "keeping the unfinished source of project.a.a failed") {
		t.Errorf("task = %s %+v", task.Status, task.Git)
	}
	if refused := e.events("urgent_continuation_refused"); len(refused) != 1 || refused[0].Data["card"] != "project.a.a" {
		t.Errorf("refusals = %+v", refused)
	}
	if goal := e.card("project.a"); goal.Status != cards.Stopped || (goal.Git != nil && goal.Git.Held != "") {
		t.Errorf("goal = %s %+v (the held source is the task's)", goal.Status, goal.Git)
	}
	if left := e.script.Remaining(); left["planner@project.a"] != 1 || left["planner@project"] != 1 {
		t.Errorf("unconsumed = %v (the owner must not continue)", left)
	}
	if data, err := os.ReadFile(filepath.Join(e.dir, "hello.txt")); err != nil || string(data) != "hello\n" {
		t.Errorf("the held work was lost: %q %v", data, err)
	}
	if n := len(e.events("root_replaced")); n != 0 {
		t.Errorf("root replacements = %d", n)
	}
}

// eventFor returns the first event of a type for a card.
func (e *env) eventFor(typ, card string) project.Event {
	e.t.Helper()
	for _, ev := range e.events(typ) {
		if ev.Data["card"] == card {
			return ev
		}
	}
	e.t.Fatalf("no %s event for %s", typ, card)
	return project.Event{}
}
