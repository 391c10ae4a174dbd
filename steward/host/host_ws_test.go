package host_test

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
)

const token = "test-token-0123456789abcdef"

// env is a running host over real SQLite files and a scripted provider.
type env struct {
	t        *testing.T
	home     string
	provider *llmtest.Server
	srv      *httptest.Server
	host     *host.Host
	store    *chats.Store
	usage    *usage.Store
	audit    *audit.Ledger
	tools    *toolbox
}

// toolbox holds in-process tools that record what they received.
type toolbox struct {
	mu    sync.Mutex
	calls map[string][]string
	// result, when set, is what mcp__mail__send_email returns.
	result string
}

func (tb *toolbox) record(name string, args json.RawMessage) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.calls[name] = append(tb.calls[name], string(args))
}

func (tb *toolbox) got(name string) []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.calls[name]...)
}

func (tb *toolbox) list() []agent.Tool {
	mk := func(name, schema, out string) agent.Tool {
		return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name, Parameters: json.RawMessage(schema)},
			Fn: func(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
				tb.record(name, args)
				return agent.ToolResult{Content: out, Data: json.RawMessage(`{"kind":"search_results","items":[]}`)}, nil
			}}
	}
	return []agent.Tool{
		mk("mcp__mail__search_mail", `{"type":"object","properties":{"query":{"type":"string"}}}`, "2 messages about the invoice"),
		mk("mcp__mail__send_email", `{"type":"object","required":["to","body"],"properties":{"to":{"type":"string"},"body":{"type":"string"},"cc":{"type":"string"}}}`, cmp.Or(tb.result, "sent")),
		mk("mcp__danger__wipe", `{"type":"object"}`, "wiped"),
	}
}

type envOptions struct {
	approvalTimeout time.Duration
	disconnectGrace time.Duration
	logger          *slog.Logger
	home            string
	provider        *llmtest.Server
	transcriber     host.Transcriber
	notifier        host.Notifier
	contextWindow   int // of the chats' model; 0: not declared
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, home: o.home, provider: o.provider, tools: &toolbox{calls: map[string][]string{}}}
	if e.home == "" {
		e.home = t.TempDir()
	}
	if e.provider == nil {
		e.provider = llmtest.NewServer(t)
	}
	ctx := context.Background()
	var err error
	if e.store, err = chats.Open(ctx, filepath.Join(e.home, "chats.db")); err != nil {
		t.Fatal(err)
	}
	if e.usage, err = usage.Open(ctx, filepath.Join(e.home, "usage.db"), usage.Options{}); err != nil {
		t.Fatal(err)
	}
	if e.audit, err = audit.Open(ctx, filepath.Join(e.home, "audit.db"), audit.Options{}); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(policy.Options{User: policy.Rules{DenyPrefixes: []string{"mcp__danger__"}}, Connectors: []string{"mail"},
		Hints: policy.StaticHints{"mcp__mail__search_mail": true}}) // as the mail connector annotates it
	if err != nil {
		t.Fatal(err)
	}
	if o.approvalTimeout == 0 {
		o.approvalTimeout = time.Minute
	}
	e.host = host.New(host.Options{Token: token, Home: e.home, Usage: e.usage, AuditHandler: e.audit.Handler(), Transcriber: o.transcriber, Chats: host.ManagerOptions{
		Audit: host.LedgerAuditor(e.audit),
		Store: e.store, Model: llm.NewClient(llm.ClientOptions{BaseURL: e.provider.URL}), ModelName: "tier-5",
		Tools: e.tools.list, Policy: pol, ApprovalTimeout: o.approvalTimeout, SystemPrompt: "test prompt",
		DisconnectGrace: o.disconnectGrace, Logger: o.logger, Notifier: o.notifier, ContextWindow: func() int { return o.contextWindow },
	}})
	e.srv = httptest.NewServer(e.host.Handler())
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	e.srv.Close()
	e.host.Close()
	e.store.Close()
	e.usage.Close()
	e.audit.Close()
}

// client is a WebSocket client that collects frames.
type client struct {
	t      *testing.T
	conn   *websocket.Conn
	frames chan map[string]any
	mu     sync.Mutex
	log    []map[string]any // every frame received, in order
}

// count returns how many frames of typ arrived so far.
func (c *client) count(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.log {
		if f["type"] == typ {
			n++
		}
	}
	return n
}

func (e *env) dial(auth string) *client {
	e.t.Helper()
	ctx := context.Background()
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		e.t.Fatal(err)
	}
	c := &client{t: e.t, conn: conn, frames: make(chan map[string]any, 1000)}
	go func() {
		defer close(c.frames)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			c.mu.Lock()
			c.log = append(c.log, m)
			c.mu.Unlock()
			c.frames <- m
		}
	}()
	if auth != "" {
		c.send(map[string]any{"type": "auth", "token": auth})
	}
	e.t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	return c
}

func (c *client) send(frame map[string]any) {
	c.t.Helper()
	if _, ok := frame["v"]; !ok {
		frame["v"] = 1
	}
	b, _ := json.Marshal(frame)
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// next waits for the first frame matching typ (and pred), skipping others.
func (c *client) next(typ string, pred func(map[string]any) bool) map[string]any {
	c.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				c.t.Fatalf("connection closed while waiting for %s", typ)
			}
			if f["type"] == typ && (pred == nil || pred(f)) {
				return f
			}
		case <-timeout:
			c.t.Fatalf("no %s frame within 15 s", typ)
		}
	}
}

func (c *client) createChat(title string) string {
	c.send(map[string]any{"type": "chat.create", "title": title, "id": "req-" + title})
	f := c.next("chat.updated", func(f map[string]any) bool { return f["id"] == "req-"+title })
	return f["chat"].(map[string]any)["id"].(string)
}

func (c *client) say(chatID, text string) {
	c.send(map[string]any{"type": "user.message", "chatId": chatID, "text": text})
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func TestAllowedReadTool(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__search_mail", `{"query":"invoice"}`)}},
		llmtest.Reply{Content: "You have two invoice mails."})
	c := e.dial(token)
	c.next("hello", nil)
	chat := c.createChat("mail")
	c.say(chat, "any invoices?")
	c.next("user.message.saved", nil)
	start := c.next("tool.start", nil)
	if start["name"] != "mcp__mail__search_mail" || start["status"] != "running" {
		t.Errorf("tool.start = %v", start)
	}
	res := c.next("tool.result", nil)
	if res["status"] != "done" || res["content"] != "2 messages about the invoice" || res["kind"] != "search_results" {
		t.Errorf("tool.result = %v", res)
	}
	c.next("assistant.delta", nil)
	done := c.next("turn.done", nil)
	if done["ok"] != true || done["text"] != "You have two invoice mails." || done["messageId"] == "" {
		t.Errorf("turn.done = %v", done)
	}
	if got := e.tools.got("mcp__mail__search_mail"); len(got) != 1 {
		t.Errorf("tool calls = %v", got)
	}
	// The system prompt and history reached the model.
	msgs := e.provider.Requests()[0].Body["messages"].([]any)
	if msgs[0].(map[string]any)["content"] != "test prompt" {
		t.Errorf("first message = %v", msgs[0])
	}
	// The tool ledger has the call.
	e.usage.Flush(context.Background())
	rep, _ := e.usage.Report(context.Background(), usage.ReportOptions{})
	if len(rep.Tools) != 1 || rep.Tools[0].Tool != "mcp__mail__search_mail" || rep.Tools[0].Calls != 1 {
		t.Errorf("tool ledger = %+v", rep.Tools)
	}
}

func TestGatedToolOutcomes(t *testing.T) {
	const proposal = `{"to":"anna@polimi.it","body":"See you Monday"}`
	tests := []struct {
		name     string
		respond  map[string]any // nil: let it time out
		wantRun  string
		verdict  string
		toolSays string // what the model receives as the tool result
	}{
		{"approve", map[string]any{"decision": "approve"}, proposal, "approved", "sent"},
		{"approve with edits", map[string]any{"decision": "approve", "args": map[string]any{"to": "bob@example.com", "body": "Tuesday instead", "cc": nil}},
			`{"body":"Tuesday instead","to":"bob@example.com"}`, "approved", "user edited the arguments"},
		{"deny with note", map[string]any{"decision": "deny", "note": "not to her"}, "", "denied", policy.BlockedDenied + " The user's note: not to her"},
		{"request revision", map[string]any{"decision": "revise", "note": "make it formal"}, "", "revise", policy.RevisionPrefix},
		{"timeout", nil, "", "timeout", policy.BlockedTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			timeout := time.Minute
			if tc.respond == nil {
				timeout = 300 * time.Millisecond
			}
			e := newEnv(t, envOptions{approvalTimeout: timeout})
			e.provider.Enqueue("tier-5",
				llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", proposal)}},
				llmtest.Reply{Content: "Done what I could."})
			c := e.dial(token)
			chat := c.createChat("send")
			c.say(chat, "email Anna")
			req := c.next("approval.request", nil)
			if req["tool"] != "mcp__mail__send_email" || req["chatId"] != chat {
				t.Fatalf("approval.request = %v", req)
			}
			if tc.respond != nil {
				f := map[string]any{"type": "approval.respond", "approvalId": req["approvalId"]}
				for k, v := range tc.respond {
					f[k] = v
				}
				c.send(f)
			}
			resolved := c.next("approval.resolved", nil)
			if resolved["verdict"] != tc.verdict {
				t.Errorf("verdict = %v, want %s", resolved["verdict"], tc.verdict)
			}
			done := c.next("turn.done", nil)
			if done["ok"] != true {
				t.Errorf("turn.done = %v", done)
			}
			got := e.tools.got("mcp__mail__send_email")
			if tc.wantRun == "" && len(got) != 0 {
				t.Errorf("the tool ran: %v", got)
			}
			if tc.wantRun != "" && (len(got) != 1 || got[0] != tc.wantRun) {
				t.Errorf("the tool received %v, want %s", got, tc.wantRun)
			}
			// What the model saw as the result of the call.
			second := e.provider.Requests()[1].Body["messages"].([]any)
			last := second[len(second)-1].(map[string]any)
			if !strings.Contains(last["content"].(string), tc.toolSays) {
				t.Errorf("model saw %q, want %q", last["content"], tc.toolSays)
			}
			// The transcript keeps the effective input.
			tr, _ := e.store.Transcript(context.Background(), chat)
			var card protocol.ToolCard
			for _, en := range tr {
				if en.Kind == "tool" {
					json.Unmarshal(en.Data, &card)
				}
			}
			// Effective arguments appear only when edits changed them.
			wantEffective := ""
			if tc.name == "approve with edits" {
				wantEffective = tc.wantRun
			}
			if string(card.EffectiveArgs) != wantEffective {
				t.Errorf("transcript effective args = %s, want %q", card.EffectiveArgs, wantEffective)
			}
			if tc.wantRun == "" && card.Status != "blocked" {
				t.Errorf("transcript card status = %s", card.Status)
			}
		})
	}
}

// TestSchemaViolationGoesBackToTheModel: a gated call whose arguments break
// the tool's inputSchema is refused without a card; the model corrects it and
// only the corrected proposal reaches the user.
func TestSchemaViolationGoesBackToTheModel(t *testing.T) {
	e := newEnv(t, envOptions{})
	const fixed = `{"to":"anna@polimi.it","body":"See you Monday"}`
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", `{"to":"anna@polimi.it","cc":["x"]}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__mail__send_email", fixed)}},
		llmtest.Reply{Content: "Sent."})
	c := e.dial(token)
	chat := c.createChat("schema")
	c.say(chat, "email Anna")
	req := c.next("approval.request", nil)
	if req["callId"] != "c2" {
		t.Fatalf("first card is for call %v, want only the corrected c2", req["callId"])
	}
	c.send(map[string]any{"type": "approval.respond", "approvalId": req["approvalId"], "decision": "approve"})
	if done := c.next("turn.done", nil); done["ok"] != true {
		t.Fatalf("turn.done = %v", done)
	}
	if n := c.count("approval.request"); n != 1 {
		t.Errorf("%d approval cards, want 1", n)
	}
	if got := e.tools.got("mcp__mail__send_email"); len(got) != 1 || got[0] != fixed {
		t.Errorf("the tool received %v, want only %s", got, fixed)
	}
	// The model saw the violation as a correctable error naming the problem.
	second := e.provider.Requests()[1].Body["messages"].([]any)
	last := second[len(second)-1].(map[string]any)
	content := last["content"].(string)
	if !strings.Contains(content, policy.InvalidProposal) || !strings.Contains(content, "/properties/cc") {
		t.Errorf("model saw %q", content)
	}
}

func TestDeniedPrefixBlockedWithoutCard(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5", llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__danger__wipe", `{}`)}}, llmtest.Reply{Content: "I cannot."})
	c := e.dial(token)
	chat := c.createChat("deny")
	c.say(chat, "wipe it")
	res := c.next("tool.result", nil)
	if res["status"] != "blocked" || res["content"] != policy.BlockedByPolicy {
		t.Errorf("tool.result = %v", res)
	}
	c.next("turn.done", nil)
	if got := e.tools.got("mcp__danger__wipe"); len(got) != 0 {
		t.Errorf("denied tool ran: %v", got)
	}
	if n := c.count("approval.request"); n != 0 {
		t.Errorf("a denied tool produced %d approval cards", n)
	}
}
