package actions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
	"github.com/agentstack/agentstack/steward/watch/watchtest"
)

// execute_action_step in a watch turn, wired as steward serve wires it (the
// host's tools feed both the chat manager and the watch engine): the turn
// offers it, and each step's tool goes through that turn's own policy
// wrapper — a read runs, a granted write runs only within its grant's
// constraints, and a write the watch was not granted does not exist.
func TestExecuteStepInWatchTurn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	provider := llmtest.NewServer(t)
	clock := watchtest.NewClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	chatStore, err := chats.Open(ctx, filepath.Join(dir, "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer chatStore.Close()
	store, err := actions.Open(ctx, filepath.Join(dir, "actions.db"), actions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pol, err := policy.New(policy.Options{Connectors: []string{"mail"},
		Hints: policy.StaticHints{"mcp__mail__search_mail": true}}) // as the mail connector annotates it
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	calls := map[string][]string{}
	tool := func(name string) agent.Tool {
		return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)},
			Fn: func(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
				mu.Lock()
				calls[name] = append(calls[name], string(args))
				mu.Unlock()
				return agent.ToolResult{Content: name + " done"}, nil
			}}
	}
	execute := actions.ExecuteTool(actions.ExecuteOptions{Open: func(context.Context) (*actions.Store, error) { return store, nil }, Dispatch: policy.CallWrapped})
	var engineTools []agent.Tool
	source := func() []agent.Tool {
		return append([]agent.Tool{tool("mcp__mail__search_mail"), tool("mcp__mail__send_email"), tool("test__send"), execute}, engineTools...)
	}
	caps, _ := watch.NewRegistry(watch.Capability{Tool: "test__send", Allowed: []string{"to"}, Required: []string{"to"}, ConstraintsRequired: true})
	manager := host.NewManager(host.ManagerOptions{Store: chatStore, Model: llm.NewClient(llm.ClientOptions{BaseURL: provider.URL}),
		ModelName: "tier-5", SystemPrompt: "test prompt", Tools: source, Policy: pol})
	engine, err := watch.Open(ctx, watch.Options{Path: filepath.Join(dir, "watches.db"), Deliverer: manager, Clock: clock,
		Capabilities: caps, Tools: source, ReadOnly: func(n string) bool { return pol.Decide(n) == policy.Allow },
		Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: clock.Now, Location: time.UTC})}})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	engineTools = engine.Tools(host.ChatIDFrom)

	step := func(tool, args string) actions.Alternative {
		return actions.Alternative{Summary: tool, Confidence: 0.9, Steps: []actions.Step{{Label: tool, Type: "tool", Tool: tool, Args: json.RawMessage(args)}}}
	}
	id, _, err := store.Upsert(ctx, actions.Item{SourceKey: "mail:thread:1", Kind: "reply-needed", Title: "Answer Anna", SourceAt: clock.Now(),
		Proposal: []actions.Alternative{
			step("mcp__mail__search_mail", `{"query":"anna"}`),
			step("mcp__mail__send_email", `{"to":"anna@example.com"}`),
			step("test__send", `{"to":"anna@example.com"}`),
			step("test__send", `{"to":"mallory@example.com"}`),
		}}, false)
	if err != nil {
		t.Fatal(err)
	}
	chat, _ := chatStore.Create(ctx, "Anna", "user")
	if _, err := engine.Create(ctx, watch.CreateRequest{Source: "time", ResourceRef: clock.Now().Add(30 * time.Minute).Format(time.RFC3339),
		Instruction: "at half past eight, act on Anna's request", ChatID: chat.ID, Agent: true,
		Rules: []watch.Rule{{ID: "at", Event: "time.reached", Grants: []watch.Grant{{Tool: "test__send",
			Constraints: &watch.Constraints{Fields: map[string]watch.FieldConstraint{"to": {Kind: watch.ConstraintExact, Value: "anna@example.com"}}}}}}}}); err != nil {
		t.Fatal(err)
	}

	exec := func(callID string, alt int) llm.ToolCall {
		return llm.ToolCall{ID: callID, Type: "function", Function: llm.FunctionCall{Name: actions.ExecuteToolName,
			Arguments: fmt.Sprintf(`{"id":%d,"alternative":%d}`, id, alt)}}
	}
	provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{exec("e0", 0), exec("e1", 1), exec("e2", 2), exec("e3", 3)}},
		llmtest.Reply{Content: "Anna has her answer."})
	clock.Advance(31 * time.Minute)
	if c, err := engine.RunOnce(ctx); err != nil || c.Delivered != 1 {
		t.Fatalf("delivery pass %+v %v", c, err)
	}

	reqs := provider.Requests()
	var offered []string
	tools, _ := reqs[0].Body["tools"].([]any)
	for _, t := range tools {
		offered = append(offered, t.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if !slices.Contains(offered, actions.ExecuteToolName) || slices.Contains(offered, "mcp__mail__send_email") {
		t.Fatalf("watch turn tools %v: want execute_action_step and no ungranted write", offered)
	}
	if got := calls["mcp__mail__search_mail"]; len(got) != 1 || got[0] != `{"query":"anna"}` {
		t.Errorf("read step calls %v", got)
	}
	if got := calls["test__send"]; len(got) != 1 || !strings.Contains(got[0], "anna@example.com") {
		t.Errorf("granted write calls %v: only the one within the grant may run", got)
	}
	if got := calls["mcp__mail__send_email"]; len(got) != 0 {
		t.Errorf("an ungranted write ran: %v", got)
	}
	// The model saw each step's outcome.
	results := map[string]string{}
	var msgs []map[string]any
	raw, _ := json.Marshal(reqs[1].Body["messages"])
	json.Unmarshal(raw, &msgs)
	for _, m := range msgs {
		if m["role"] == "tool" {
			results[m["tool_call_id"].(string)], _ = m["content"].(string)
		}
	}
	if !strings.Contains(results["e0"], "search_mail done") || !strings.Contains(results["e1"], "not available") ||
		!strings.Contains(results["e2"], "test__send done") || strings.Contains(results["e3"], "test__send done") || results["e3"] == "" {
		t.Errorf("step results %q", results)
	}
	it, _ := store.Get(ctx, id)
	if len(it.Diagnostics) != 4 {
		t.Errorf("diagnostics %q: want one per execution", it.Diagnostics)
	}
}
