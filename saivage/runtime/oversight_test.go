package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
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
