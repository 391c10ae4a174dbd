package voice_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/voice"
	"github.com/agentstack/agentstack/steward/voice/ringbacktest"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
	"github.com/agentstack/agentstack/steward/watch/watchtest"
)

// countingNotifier records the pushes the engine sends.
type countingNotifier struct{ n atomic.Int32 }

func (c *countingNotifier) Send(context.Context, push.Notification) push.Report {
	c.n.Add(1)
	return push.Report{Attempted: 1, Delivered: 1}
}

// TestWatchCallDialsOnceThroughTheVoiceServer: a time watch whose rule grants
// mcp__voice__call_start dials the scripted Ringback server through the real
// MCP bridge. The turn then fails (the provider is down), so the delivery is
// retried by a restarted engine: the model asks to dial again and the claim
// refuses, so the phone rings once; and the call-only rule never pushes.
func TestWatchCallDialsOnceThroughTheVoiceServer(t *testing.T) {
	e := newEnv(t, ringbacktest.Script{Calls: []ringbacktest.Call{{Heard: []string{"ok"}}}})
	caps, err := watch.NewRegistry(watch.Capability{Tool: "mcp__voice__" + voice.ToolCallStart, Allowed: []string{"openingLine"},
		ConstraintsRequired: true, Mode: watch.CapabilityVoice, MaxInvocations: 1})
	if err != nil {
		t.Fatal(err)
	}
	clock := watchtest.NewClock(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	pushes := &countingNotifier{}
	path := t.TempDir() + "/watches.db"
	open := func() *watch.Engine {
		eng, err := watch.Open(context.Background(), watch.Options{Path: path, Deliverer: e.host.Manager(), Notifier: pushes,
			Capabilities: caps, Tools: e.tools, Clock: clock, ReadOnly: func(string) bool { return false },
			Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: clock.Now, Location: time.UTC})}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	// The bridge starts the voice server in the background: wait for its tools.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ready := false
		for _, tl := range e.tools() {
			ready = ready || tl.Spec().Name == "mcp__voice__call_start"
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the voice server's tools never appeared")
		}
	}
	eng := open()
	chat, err := e.store.Create(context.Background(), "reminders", "user")
	if err != nil {
		t.Fatal(err)
	}
	line := "Time to leave for the station."
	if _, err := eng.Create(context.Background(), watch.CreateRequest{Source: "time", ResourceRef: "afterMinutes=30", ChatID: chat.ID, Agent: true,
		Instruction: "call me in half an hour", Rules: []watch.Rule{{ID: "call", Event: timewatch.EventReached, Grants: []watch.Grant{{
			Tool: "mcp__voice__call_start", Constraints: &watch.Constraints{Fields: map[string]watch.FieldConstraint{
				"openingLine": {Kind: watch.ConstraintExact, Value: line}}}}}}}}); err != nil {
		t.Fatal(err)
	}
	dial := llmtest.Reply{ToolCalls: []llm.ToolCall{call("w1", "mcp__voice__call_start", `{"openingLine":"`+line+`"}`)}}
	e.provider.Enqueue("tier-5", dial, llmtest.Reply{Status: 500, ErrorMessage: "provider down"})
	clock.Advance(31 * time.Minute)
	first, _ := eng.RunOnce(context.Background())
	if n := len(e.dials()); n != 1 {
		t.Fatalf("first delivery dialled %d times (cycle %+v)", n, first)
	}
	if d := e.dials()[0]; d.Args["openingLine"] != line {
		t.Fatalf("dialled with %v", d.Args)
	}

	eng.Close()
	eng = open() // the host restarts; the event is still pending
	e.provider.Enqueue("tier-5", dial, llmtest.Reply{Content: "I called you about the station."})
	clock.Advance(time.Minute)
	c, err := eng.RunOnce(context.Background())
	if err != nil || c.Delivered != 1 {
		t.Fatalf("retried delivery %+v %v", c, err)
	}
	if n := len(e.dials()); n != 1 {
		t.Fatalf("the retried delivery dialled again: %d dials", n)
	}
	if n := pushes.n.Load(); n != 0 {
		t.Fatalf("a call-only rule pushed %d notifications", n)
	}
}
