package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
	"github.com/agentstack/agentstack/steward/watch/watchtest"
)

// watchEnv is a ChatManager and a watch engine wired as steward serve wires
// them, over real SQLite files and a scripted model provider.
type watchEnv struct {
	t        *testing.T
	provider *llmtest.Server
	store    *chats.Store
	audit    *audit.Ledger
	manager  *host.ChatManager
	engine   *watch.Engine
	clock    *watchtest.Clock
	calls    map[string]int
	mu       sync.Mutex
}

func newWatchEnv(t *testing.T, rules policy.Rules) *watchEnv {
	w := &watchEnv{t: t, provider: llmtest.NewServer(t), clock: watchtest.NewClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)), calls: map[string]int{}}
	ctx := context.Background()
	dir := t.TempDir()
	var err error
	if w.store, err = chats.Open(ctx, filepath.Join(dir, "chats.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	if w.audit, err = audit.Open(ctx, filepath.Join(dir, "audit.db"), audit.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.audit.Close() })
	pol, err := policy.New(policy.Options{User: rules, Connectors: []string{"mail"},
		Hints: policy.StaticHints{"mcp__mail__search_mail": true}}) // as the mail connector annotates it
	if err != nil {
		t.Fatal(err)
	}
	connectorTools := []agent.Tool{w.tool("mcp__mail__search_mail"), w.tool("mcp__mail__send_email"), w.tool("test__send")}
	var hostTools []agent.Tool
	source := func() []agent.Tool { return append(append([]agent.Tool{}, connectorTools...), hostTools...) }
	caps, _ := watch.NewRegistry(watch.Capability{Tool: "test__send", Allowed: []string{"to"}, Required: []string{"to"}, ConstraintsRequired: true})
	w.manager = host.NewManager(host.ManagerOptions{Store: w.store, Model: llm.NewClient(llm.ClientOptions{BaseURL: w.provider.URL}),
		ModelName: "tier-5", SystemPrompt: "test prompt", Tools: source, Policy: pol, Audit: host.LedgerAuditor(w.audit)})
	w.engine, err = watch.Open(ctx, watch.Options{Path: filepath.Join(dir, "watches.db"), Deliverer: w.manager, Clock: w.clock,
		Capabilities: caps, Tools: source, ReadOnly: func(n string) bool { return pol.Decide(n) == policy.Allow },
		Adapters: []watch.Adapter{timewatch.New(timewatch.Options{Now: w.clock.Now, Location: time.UTC})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.engine.Close() })
	hostTools = w.engine.Tools(host.ChatIDFrom)
	return w
}

func (w *watchEnv) tool(name string) agent.Tool {
	return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
			w.mu.Lock()
			w.calls[name]++
			w.mu.Unlock()
			return agent.ToolResult{Content: name + " done"}, nil
		}}
}

func toolCall(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func toolNames(req llmtest.Request) []string {
	var names []string
	tools, _ := req.Body["tools"].([]any)
	for _, t := range tools {
		names = append(names, t.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return names
}

// TestWatchTurnEndToEnd: the agent creates a watch in a chat; when it fires
// the engine resumes that chat's session through the manager with the
// event as a non-user message, under a deny-by-default tool set.
func TestWatchTurnEndToEnd(t *testing.T) {
	w := newWatchEnv(t, policy.Rules{})
	ctx := context.Background()
	chat, _ := w.store.Create(ctx, "Promemoria", "user")
	w.provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall("c1", watch.ToolCreateWatch,
		`{"source":"time","afterMinutes":30,"instruction":"ricordami tra mezz'ora di uscire","rules":[{"id":"at","event":"time.reached"}]}`)}},
		llmtest.Reply{Content: "Va bene, ti avviso tra mezz'ora."})
	if res := w.manager.RunTurn(ctx, chat.ID, "ricordami tra mezz'ora di uscire", host.TurnOptions{}); !res.OK {
		t.Fatalf("interactive turn: %+v", res)
	}
	ws, _ := w.engine.List(ctx, chat.ID, false)
	if len(ws) != 1 {
		t.Fatalf("the watch was not created in this chat: %+v", ws)
	}
	before, _ := w.store.Transcript(ctx, chat.ID)

	w.provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall("c2", "mcp__mail__search_mail", `{}`),
		toolCall("c3", "mcp__mail__send_email", `{"to":"x@y.z"}`)}},
		llmtest.Reply{Content: "Sono le 08:30: è ora di uscire."})
	w.clock.Advance(31 * time.Minute)
	c, err := w.engine.RunOnce(ctx)
	if err != nil || c.Delivered != 1 {
		t.Fatalf("delivery pass %+v %v", c, err)
	}
	reqs := w.provider.Requests()
	watchReq := reqs[2]
	if got := watchReq.Header.Get(llm.HeaderUsageAction); got != "watch-agent-turn" {
		t.Errorf("attribution %q", got)
	}
	if names := strings.Join(toolNames(watchReq), ","); names != "mcp__mail__search_mail" {
		t.Errorf("background tools %s: want only the read-only ones", names)
	}
	raw := string(watchReq.Raw)
	if !strings.Contains(raw, "ricordami tra mezz'ora di uscire") || !strings.Contains(raw, "[Steward watch event") {
		t.Errorf("the turn did not resume the session with the event")
	}
	if w.calls["mcp__mail__search_mail"] != 1 || w.calls["mcp__mail__send_email"] != 0 {
		t.Errorf("tool calls %v: the write tool must not exist in the turn", w.calls)
	}

	after, _ := w.store.Transcript(ctx, chat.ID)
	var kinds []string
	for _, e := range after[len(before):] {
		kinds = append(kinds, e.Kind)
		if e.Kind == "user" {
			t.Errorf("the event became a user message: %s", e.Data)
		}
	}
	last := after[len(after)-1]
	if last.Kind != "assistant" || !strings.Contains(string(last.Data), "è ora di uscire") {
		t.Errorf("transcript tail %v: %s", kinds, last.Data)
	}
	session, _ := w.store.Session(ctx, chat.ID)
	var prompt *llm.Message
	for i := range session {
		if strings.HasPrefix(session[i].Content, "[Steward watch event") {
			prompt = &session[i]
		}
	}
	if prompt == nil || session[len(session)-1].Content != "Sono le 08:30: è ora di uscire." {
		t.Errorf("session tail %+v", session[len(session)-2:])
	}
	if got, _ := w.store.Get(ctx, chat.ID); !got.Unread {
		t.Error("the chat is not marked unread")
	}
}

func TestWatchTurnBusyDeletedFallbackAndFailure(t *testing.T) {
	w := newWatchEnv(t, policy.Rules{Deny: []string{"test__send"}})
	ctx := context.Background()
	chat, _ := w.store.Create(ctx, "Treni", "user")

	// An interactive turn in flight defers the event.
	hold := make(chan struct{})
	w.provider.Enqueue("", llmtest.Reply{Content: "thinking about it", Hold: hold})
	done := make(chan struct{})
	go func() { w.manager.RunTurn(ctx, chat.ID, "hello", host.TurnOptions{}); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for !w.manager.Running(chat.ID) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // waiting for the turn to start, not asserting time
	}
	if _, err := w.manager.DeliverWatchTurn(ctx, watch.Turn{ChatID: chat.ID, Prompt: "event"}); !errors.Is(err, watch.ErrChatBusy) {
		t.Errorf("busy chat: %v", err)
	}
	close(hold)
	<-done

	// A model failure returns an error and leaves no automatic prompt in the session.
	sessionBefore, _ := w.store.Session(ctx, chat.ID)
	w.provider.Enqueue("", llmtest.Reply{Status: 500, ErrorMessage: "down"})
	if _, err := w.manager.DeliverWatchTurn(ctx, watch.Turn{ChatID: chat.ID, Prompt: "[Steward watch event] x"}); err == nil {
		t.Error("a failed generation reported success")
	}
	if s, _ := w.store.Session(ctx, chat.ID); len(s) != len(sessionBefore) {
		t.Errorf("session grew from %d to %d messages after a failed watch turn", len(sessionBefore), len(s))
	}

	// The user's deny rule still wins over a grant; unknown tools do not exist.
	w.provider.Enqueue("", llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall("d1", "test__send", `{"to":"a"}`), toolCall("d2", "mcp__mail__send_email", `{}`)}},
		llmtest.Reply{Content: "done"})
	d, err := w.manager.DeliverWatchTurn(ctx, watch.Turn{ChatID: chat.ID, Prompt: "event", Tools: []agent.Tool{w.tool("test__send")}})
	if err != nil || d.Text != "done" {
		t.Fatalf("denied-tool turn %+v %v", d, err)
	}
	tr, _ := w.store.Transcript(ctx, chat.ID)
	var cards []string
	for _, e := range tr {
		if e.Kind == "tool" {
			var card struct{ Name, Status string }
			json.Unmarshal(e.Data, &card)
			cards = append(cards, card.Name+":"+card.Status)
		}
	}
	if got := strings.Join(cards, ","); got != "test__send:blocked,mcp__mail__send_email:error" || w.calls["test__send"] != 0 {
		t.Errorf("cards %s, calls %v", got, w.calls)
	}

	// The original chat was deleted: the event goes to "Monitor automatici",
	// created once; a fallback needs no model.
	w.store.Delete(ctx, chat.ID)
	w.manager.Forget(chat.ID)
	n := len(w.provider.Requests())
	var monitor string
	for i := range 2 {
		d, err := w.manager.DeliverWatchTurn(ctx, watch.Turn{ChatID: chat.ID, Fallback: fmt.Sprintf("Il treno è partito (%d).", i)})
		if err != nil || d.Text != fmt.Sprintf("Il treno è partito (%d).", i) {
			t.Fatalf("fallback %+v %v", d, err)
		}
		if monitor != "" && d.ChatID != monitor {
			t.Errorf("a second monitor chat %s", d.ChatID)
		}
		monitor = d.ChatID
	}
	if len(w.provider.Requests()) != n {
		t.Error("a fallback called the model")
	}
	mc, err := w.store.Get(ctx, monitor)
	if err != nil || mc.Title != host.MonitorChatTitle || mc.Origin != "watch" {
		t.Fatalf("monitor chat %+v %v", mc, err)
	}
	tr, _ = w.store.Transcript(ctx, monitor)
	if len(tr) != 2 || tr[1].Kind != "assistant" || !strings.Contains(string(tr[1].Data), "partito (1)") {
		t.Errorf("monitor transcript %+v", tr)
	}
}

// TestFailedWatchTurnShowsCauseAndFix: a watch turn the provider refuses
// leaves the same error card in the chat as a failed chat turn (plain cause,
// the fix, the provider's error as details), saying what the watch does
// next, and an Audit row chat.turn_failed naming the watch; the session is
// untouched, and after the second failure the fallback is posted.
func TestFailedWatchTurnShowsCauseAndFix(t *testing.T) {
	w := newWatchEnv(t, policy.Rules{})
	ctx := context.Background()
	chat, _ := w.store.Create(ctx, "Promemoria", "user")
	wt, err := w.engine.Create(ctx, watch.CreateRequest{Source: "time", ResourceRef: w.clock.Now().Add(10 * time.Minute).Format(time.RFC3339),
		Instruction: "remind me to leave", ChatID: chat.ID, Rules: []watch.Rule{{ID: "at", Event: "time.reached"}}})
	if err != nil {
		t.Fatal(err)
	}
	sessionBefore, _ := w.store.Session(ctx, chat.ID)
	w.provider.Enqueue("", llmtest.Reply{Status: 401, ErrorMessage: "Incorrect API key provided: sk-te****"})
	w.clock.Advance(11 * time.Minute)
	if c, err := w.engine.RunOnce(ctx); err != nil || c.Delivered != 0 || c.Queued != 1 {
		t.Fatalf("first pass %+v %v: want the event queued and not delivered", c, err)
	}
	tr, _ := w.store.Transcript(ctx, chat.ID)
	if len(tr) != 1 || tr[0].Kind != "error" {
		t.Fatalf("transcript %+v: want one error entry", tr)
	}
	var card struct {
		Error, Cause, Fix string
		Aborted           bool
	}
	if err := json.Unmarshal(tr[0].Data, &card); err != nil {
		t.Fatal(err)
	}
	if card.Cause != "A watch could not write its notification. The model provider refused the API key." || card.Aborted {
		t.Errorf("cause %q", card.Cause)
	}
	for _, want := range []string{"open the set-up screen (#/setup) or run 'steward setup'", "tries again at its next check", "after 2 failed attempts"} {
		if !strings.Contains(card.Fix, want) {
			t.Errorf("fix %q lacks %q", card.Fix, want)
		}
	}
	if !strings.Contains(card.Error, "Incorrect API key provided") {
		t.Errorf("details %q: want the provider's error", card.Error)
	}
	if s, _ := w.store.Session(ctx, chat.ID); len(s) != len(sessionBefore) {
		t.Errorf("session grew from %d to %d messages after a failed watch turn", len(sessionBefore), len(s))
	}
	if err := w.audit.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := w.audit.Query(ctx, audit.Filter{Type: "chat.turn_failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].ChatID != chat.ID || page.Events[0].Summary != card.Cause {
		t.Fatalf("audit %+v: want one chat.turn_failed with the cause", page.Events)
	}
	var payload struct{ WatchID, EventID, Error string }
	raw, _ := json.Marshal(page.Events[0].Payload)
	json.Unmarshal(raw, &payload)
	if payload.WatchID != wt.ID || payload.EventID == "" || !strings.Contains(payload.Error, "401") {
		t.Errorf("audit payload %+v: want the watch, its event and the error", payload)
	}

	// A second failure, then the fallback: the chat ends with the plain
	// notification after two cards.
	w.provider.Enqueue("", llmtest.Reply{Status: 401, ErrorMessage: "Incorrect API key provided: sk-te****"})
	w.clock.Advance(time.Minute)
	w.engine.RunOnce(ctx)
	w.clock.Advance(time.Minute)
	if c, err := w.engine.RunOnce(ctx); err != nil || c.Delivered != 1 {
		t.Fatalf("fallback pass %+v %v", c, err)
	}
	tr, _ = w.store.Transcript(ctx, chat.ID)
	var kinds []string
	for _, e := range tr {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "error,error,assistant" {
		t.Errorf("transcript kinds %s, want error,error,assistant", got)
	}
}
