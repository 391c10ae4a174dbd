package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// fakeClock is a manual clock: After registers a waiter that Advance fires
// once the clock reaches its deadline.
type fakeClock struct {
	mu         sync.Mutex
	now        time.Time
	waiters    []fakeWaiter
	registered []time.Duration // every requested wait, in order
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.registered = append(c.registered, d)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration{}, c.registered...)
}

// TestOversightSchedule: checks fire only while a Run is running, after
// the full configured interval (a 3-day interval waits in bounded 24 h
// timeouts without drift), re-arm after completion without catching up
// missed deadlines, stop on Pause and Stop, restart a full interval on
// Resume, and may queue a notification only to an eligible card.
func TestOversightSchedule(t *testing.T) {
	const interval = 72 * time.Hour
	fc := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOptions{rtOpts: runtime.Options{Clock: fc}, configEdit: func(s string) string {
		return strings.Replace(s, "  enabled: false\n  interval_seconds: 1800", "  enabled: true\n  interval_seconds: 259200", 1)
	}})
	ctx := context.Background()
	if _, err := e.p.Cards.Create(ctx, cardsInput("project", "Eligible")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Cards.Create(ctx, cardsInput("project", "Cancelled")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Cards.Cancel(ctx, "project.b"); err != nil {
		t.Fatal(err)
	}
	checks := func() int { return len(e.events("oversight_check")) }
	registered := func(n int) {
		t.Helper()
		e.waitFor("an Oversight timer", func() bool { return len(fc.waits()) >= n })
	}

	// Stopped: nothing is armed, however long it waits.
	fc.Advance(10 * interval)
	if len(fc.waits()) != 0 {
		t.Fatalf("armed while stopped: %v", fc.waits())
	}

	// The Planner's call hangs, so the Run stays running until Stop.
	e.script.Add("planner@project", llmtest.Reply{Content: "thinking", Delay: time.Hour})
	e.script.Add("oversight",
		call("queue_notification", map[string]any{"card_id": "project.b", "message": "Focus on the docs."}),
		call("queue_notification", map[string]any{"card_id": "project.a", "message": "The docs are behind the objective."}),
		text("Queued one notification."),
	)
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	registered(1)
	if w := fc.waits()[0]; w != 24*time.Hour {
		t.Fatalf("first wait = %v, want a bounded 24h timeout", w)
	}
	// Chained 24h timeouts up to the deadline; one second before it, no
	// check.
	for i := 0; i < 2; i++ {
		fc.Advance(24 * time.Hour)
		registered(i + 2)
	}
	fc.Advance(24*time.Hour - time.Second)
	time.Sleep(100 * time.Millisecond) // a drifting deadline would fire now
	if checks() != 0 || e.script.Count("oversight") != 0 {
		t.Fatalf("a check before the deadline (waits %v)", fc.waits())
	}
	if w := fc.waits(); len(w) != 3 || w[1] != 24*time.Hour || w[2] != 24*time.Hour {
		t.Fatalf("waits = %v, want three bounded 24h timeouts", w)
	}
	fc.Advance(time.Second)
	e.waitFor("the first check", func() bool { return checks() == 1 })
	ev := e.events("oversight_check")[0]
	if ev.Data["outcome"] != "ok" {
		t.Fatalf("check 1 = %v", ev.Data)
	}
	// The cancelled card was refused; the eligible one got the message.
	q := e.events("notification_queued")
	if len(q) != 1 || q[0].Data["card"] != "project.a" || q[0].Data["author"] != "agent:oversight" {
		t.Fatalf("notifications = %+v", q)
	}
	msgs, err := e.p.Cards.Messages(ctx, "project.a")
	if err != nil || len(msgs) != 1 || msgs[0].Text != "The docs are behind the objective." {
		t.Fatalf("project.a mailbox = %+v %v", msgs, err)
	}
	if m, _ := e.p.Cards.Messages(ctx, "project.b"); len(m) != 0 {
		t.Fatalf("a cancelled card received %+v", m)
	}

	// Re-armed after completion; a long gap yields one check, not a
	// catch-up burst.
	registered(4)
	e.script.Add("oversight", text("On track; no action."))
	fc.Advance(5 * interval)
	e.waitFor("the second check", func() bool { return checks() == 2 })
	registered(5) // re-armed once more
	if e.events("oversight_check")[1].Data["outcome"] != "ok" {
		t.Fatalf("check 2 = %v", e.events("oversight_check")[1].Data)
	}

	// Pause disarms: no check while paused, however long.
	if err := e.rt.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	fc.Advance(3 * interval)
	time.Sleep(100 * time.Millisecond) // a wrongly armed check would start now
	if checks() != 2 || e.script.Count("oversight") != 4 {
		t.Fatalf("checks while paused: %d", checks())
	}
	// Resume starts a new epoch with the full interval.
	n := len(fc.waits())
	if err := e.rt.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	registered(n + 1)
	fc.Advance(interval - time.Second)
	registered(n + 2) // the 1s left of the same deadline
	if w := fc.waits()[n+1]; w != time.Second {
		t.Fatalf("wait after a 72h-1s jump = %v, want the 1s left (no drift)", w)
	}
	time.Sleep(100 * time.Millisecond)
	if checks() != 2 {
		t.Fatal("a check before a full interval after Resume")
	}
	e.script.Add("oversight", text("No action."))
	fc.Advance(time.Second)
	e.waitFor("the third check", func() bool { return checks() == 3 })

	// Stop disarms.
	registered(n + 3)
	if err := e.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	fc.Advance(3 * interval)
	time.Sleep(100 * time.Millisecond)
	if checks() != 3 {
		t.Fatalf("checks after Stop: %d", checks())
	}
	if left := e.script.Remaining(); len(left) != 0 {
		t.Errorf("unconsumed: %v", left)
	}
}

// TestOversightOwnerFailure: a provider failure is an expected attempt
// failure (the check settles failed and the schedule goes on), while a
// check whose own session cannot be read is an unexpected owner failure:
// it settles failed, Failed is closed with the cause, no further check is
// armed and new Analyst submissions are refused.
func TestOversightOwnerFailure(t *testing.T) {
	fc := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEnv(t, envOptions{rtOpts: runtime.Options{Clock: fc}, configEdit: func(s string) string {
		return strings.Replace(s, "  enabled: false\n  interval_seconds: 1800", "  enabled: true\n  interval_seconds: 60", 1)
	}})
	ctx := context.Background()
	checks := func() []project.Event { return e.events("oversight_check") }
	e.script.Add("planner@project", llmtest.Reply{Content: "thinking", Delay: time.Hour})
	e.script.Add("oversight", llmtest.Reply{Status: 400, ErrorMessage: "bad request"})
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first timer", func() bool { return len(fc.waits()) >= 1 })
	fc.Advance(time.Minute)
	e.waitFor("the first check", func() bool { return len(checks()) == 1 })
	if c := checks()[0]; c.Data["outcome"] != "failed" || e.rt.Failure() != nil {
		t.Fatalf("provider failure: check %v, runtime failure %v", c.Data, e.rt.Failure())
	}
	// The schedule re-armed; now the session itself is unreadable.
	e.waitFor("the second timer", func() bool { return len(fc.waits()) >= 2 })
	idx := filepath.Join(e.p.StateDir, "agents", "oversight", "index.json")
	if err := os.WriteFile(idx, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Minute)
	select {
	case <-e.rt.Failed():
	case <-time.After(60 * time.Second):
		t.Fatal("an unreadable Oversight session did not fail the owner")
	}
	if err := e.rt.Failure(); err == nil || !strings.Contains(err.Error(), "oversight check 2") || !strings.Contains(err.Error(), "index.json") {
		t.Fatalf("failure = %v", err)
	}
	e.waitFor("the second check's event", func() bool { return len(checks()) == 2 })
	if c := checks()[1]; c.Data["outcome"] != "failed" {
		t.Errorf("check 2 = %v", c.Data)
	}
	if ev := e.events("owner_failed"); len(ev) != 1 {
		t.Errorf("owner_failed events = %d", len(ev))
	}
	if _, _, err := e.rt.Analyst().Submit(ctx, "hello"); err == nil {
		t.Error("the Analyst admitted a submission after the owner failed")
	}
	// Admissions are closed: a paused Run cannot resume, a stopped
	// runtime cannot start another Run.
	if err := e.rt.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Resume(ctx); !errors.Is(err, runtime.ErrNotAdmitted) || !strings.Contains(err.Error(), "owner failure") {
		t.Errorf("resume after the owner failed = %v", err)
	}
	if err := e.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Run(ctx); !errors.Is(err, runtime.ErrNotAdmitted) || !strings.Contains(err.Error(), "owner failure") {
		t.Errorf("run after the owner failed = %v", err)
	}
	fc.Advance(time.Hour)
	time.Sleep(100 * time.Millisecond) // a re-armed schedule would register a wait
	if n := len(fc.waits()); n != 2 {
		t.Errorf("timers after the failure = %d, want none re-armed", n)
	}
}
