package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
	"github.com/agentstack/agentstack/steward/watch/watchtest"
)

// TestAgentWatchSendsOnceThroughJournal: an agent watch granted
// mcp__mail__send_email (exact to and subject, template body) sends exactly
// one mail through the real mail connector and the journal when its rule
// fires, and never again: not when the delivery is retried after the turn
// failed, and not after the engine and the connector restart.
func TestAgentWatchSendsOnceThroughJournal(t *testing.T) {
	srv := smtptest.StartFake(t, smtptest.FaultNone)
	home, _ := writesHome(t, srv.Port)
	ctx := context.Background()
	provider := llmtest.NewServer(t)
	clock := watchtest.NewClock(time.Now().UTC().Truncate(time.Second))
	firesAt := clock.Now().Add(30 * time.Minute)

	store, err := chats.Open(ctx, filepath.Join(home, "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pol, _ := policy.New(policy.Options{User: policy.Rules{Allow: []string{watch.ToolCreateAgentWatch}}, Connectors: mcpNames()}) // the approval itself is tested elsewhere

	startBridge := func() *mcpbridge.Bridge {
		b := mcpbridge.New(mcpbridge.Options{Servers: []mcpbridge.ServerConfig{{Name: "mail", Command: os.Args[0], Args: []string{"mcp", "mail"},
			Env: map[string]string{"STEWARD_HOME": home}}}, StartTimeout: time.Minute})
		b.Start(ctx)
		if err := b.WaitStarted(ctx); err != nil {
			t.Fatal(err)
		}
		return b
	}
	bridge := startBridge()
	var engine *watch.Engine
	source := func() []agent.Tool { return append(bridge.Tools(), engine.Tools(host.ChatIDFrom)...) }
	manager := host.NewManager(host.ManagerOptions{Store: store, Model: llm.NewClient(llm.ClientOptions{BaseURL: provider.URL}),
		ModelName: "tier-5", SystemPrompt: "test", Tools: source, Policy: pol})
	caps, err := watch.NewRegistry(writeCapabilities()...)
	if err != nil {
		t.Fatal(err)
	}
	openEngine := func() *watch.Engine {
		e, err := watch.Open(ctx, watch.Options{Path: filepath.Join(home, "watches.db"), Deliverer: manager, Clock: clock,
			Capabilities: caps, Tools: source, ReadOnly: func(n string) bool { return pol.Decide(n) == policy.Allow },
			Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: clock.Now, Location: time.UTC})}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	engine = openEngine()

	chat, _ := store.Create(ctx, "Viaggio", "user")
	provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: watch.ToolCreateAgentWatch,
		Arguments: `{"source":"time","afterMinutes":30,"instruction":"tra mezz'ora scrivi a mia sorella","rules":[{"id":"mail","event":"time.reached","once":true,` +
			`"grants":[{"tool":"mcp__mail__send_email","maxInvocations":1,"constraints":{"denyExtraFields":true,"fields":{` +
			`"to":{"kind":"exact","value":["sorella@example.org"]},"subject":{"kind":"exact","value":"Sto arrivando"},` +
			`"body":{"kind":"template","template":"Arrivo alle {{event.at}}."}}}}]}]}`}}}},
		llmtest.Reply{Content: "Fatto: tra mezz'ora le scrivo."})
	if res := manager.RunTurn(ctx, chat.ID, "tra mezz'ora scrivi a mia sorella che sto arrivando", host.TurnOptions{}); !res.OK {
		t.Fatalf("interactive turn %+v", res)
	}

	// The rule fires: the turn sends (arguments filled from the grant),
	// then the model fails, so the engine retries the delivery.
	send := llm.ToolCall{ID: "s1", Type: "function", Function: llm.FunctionCall{Name: "mcp__mail__send_email", Arguments: `{}`}}
	provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{send}}, llmtest.Reply{Status: 500, ErrorMessage: "down"})
	clock.Advance(31 * time.Minute)
	if c, err := engine.RunOnce(ctx); err != nil || c.Delivered != 0 {
		t.Fatalf("first delivery %+v %v", c, err)
	}
	if n := len(srv.Accepted()); n != 1 {
		t.Fatalf("%d messages after the rule fired, want 1", n)
	}
	// The retried delivery asks again; the durable claim refuses.
	send.ID = "s2"
	provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{send}}, llmtest.Reply{Content: "Ho scritto a tua sorella."})
	clock.Advance(5 * time.Minute)
	if c, err := engine.RunOnce(ctx); err != nil || c.Delivered != 1 {
		t.Fatalf("retried delivery %+v %v", c, err)
	}
	// Restart the engine and the connector: nothing is sent again.
	engine.Close()
	bridge.Close()
	bridge = startBridge()
	t.Cleanup(func() { bridge.Close() })
	engine = openEngine()
	t.Cleanup(func() { engine.Close() })
	clock.Advance(time.Hour)
	engine.RunOnce(ctx)

	got := srv.Accepted()
	if len(got) != 1 {
		t.Fatalf("%d messages in the end, want exactly 1", len(got))
	}
	wantBody := "Arrivo alle " + firesAt.Format(time.RFC3339) + "."
	if !strings.Contains(got[0], "Subject: Sto arrivando") || !strings.Contains(got[0], "To: <sorella@example.org>") ||
		!strings.Contains(got[0], wantBody) {
		t.Fatalf("message %q, want the template rendered as %q", got[0], wantBody)
	}
	j := opsDB(t, home)
	var n int
	var tool string
	j.QueryRow(`SELECT count(*), max(tool) FROM ops`).Scan(&n, &tool)
	if n != 1 || tool != "mcp__mail__send_email" {
		t.Fatalf("journal holds %d operations (%s), want the one send", n, tool)
	}
	tr, _ := store.Transcript(ctx, chat.ID)
	var refused bool
	for _, e := range tr {
		if e.Kind == "tool" && strings.Contains(string(e.Data), "already started for this event") {
			refused = true
		}
	}
	if !refused {
		t.Fatal("the retried turn's second send was not refused by the durable claim")
	}
}
