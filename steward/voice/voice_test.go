package voice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
	"github.com/agentstack/agentstack/steward/voice"
	"github.com/agentstack/agentstack/steward/voice/ringbacktest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as the scripted Ringback MCP server.
func TestMain(m *testing.M) {
	if p := os.Getenv("RINGBACK_TEST_SCRIPT"); p != "" {
		if err := ringbacktest.Main(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const token = "voice-test-token"

// sendTool is a gated write the agent may reach during a call.
type sendTool struct {
	mu    sync.Mutex
	calls []string
}

func (s *sendTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: "mcp__mail__send_email", Description: "send mail",
		Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`)}
}

func (s *sendTool) Call(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, string(args))
	return agent.ToolResult{Content: "sent"}, nil
}

func (s *sendTool) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

type env struct {
	t        *testing.T
	provider *llmtest.Server
	host     *host.Host
	coord    *voice.Coordinator
	srv      *httptest.Server
	log      string
	send     *sendTool
	store    *chats.Store
	audits   *auditLog
	tools    func() []agent.Tool
}

type auditLog struct {
	mu     sync.Mutex
	events []string
	usage  []usage.ToolCall
}

func (a *auditLog) RecordTool(ctx context.Context, c usage.ToolCall) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.usage = append(a.usage, c)
}

func (a *auditLog) AuditVoice(ctx context.Context, typ, chatID, summary string, payload map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := json.Marshal(payload)
	a.events = append(a.events, typ+" "+summary+" "+string(b))
}

func (a *auditLog) find(prefix string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// fakeNetwork counts leases of the fallback route.
type fakeNetwork struct {
	mu                 sync.Mutex
	acquired, released int
}

func (n *fakeNetwork) Acquire(ctx context.Context) (voice.NetworkLease, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.acquired++
	return n, nil
}

func (n *fakeNetwork) Release(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.released++
	return nil
}

func newEnv(t *testing.T, script ringbacktest.Script, network ...voice.Network) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, provider: llmtest.NewServer(t), log: filepath.Join(dir, "calls.jsonl"), send: &sendTool{}, audits: &auditLog{}}
	script.Log = e.log
	sp := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(script)
	os.WriteFile(sp, b, 0o600)
	self, _ := os.Executable()
	bridge := mcpbridge.New(mcpbridge.Options{Servers: []mcpbridge.ServerConfig{{Name: "voice", Command: self,
		Env: map[string]string{"RINGBACK_TEST_SCRIPT": sp}}}})
	bridge.Start(context.Background())
	t.Cleanup(func() { bridge.Close() })
	var err error
	if e.store, err = chats.Open(context.Background(), filepath.Join(dir, "chats.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	pol, err := policy.New(policy.Options{Connectors: []string{"voice", "mail"}})
	if err != nil {
		t.Fatal(err)
	}
	e.tools = func() []agent.Tool { return append(bridge.Tools(), e.send) }
	e.host = host.New(host.Options{Token: token, Home: dir, Chats: host.ManagerOptions{
		Store: e.store, Model: llm.NewClient(llm.ClientOptions{BaseURL: e.provider.URL}), ModelName: "tier-5",
		Tools:  e.tools,
		Policy: pol, ApprovalTimeout: time.Minute, SystemPrompt: "test prompt",
	}})
	t.Cleanup(e.host.Close)
	opts := voice.Options{
		Transport: voice.MCPTransport{Session: func(ctx context.Context) (*mcp.ClientSession, error) { return bridge.Session(ctx, "voice") }},
		Runner:    e.host, Audit: e.audits, Usage: e.audits, RecoveryDelay: 50 * time.Millisecond,
	}
	if len(network) > 0 {
		opts.Network = network[0]
	}
	e.coord = voice.New(opts)
	t.Cleanup(e.coord.Close)
	voice.Mount(e.host.Handle, e.coord)
	e.srv = httptest.NewServer(e.host.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) post(path, body string) (int, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// waitIdle waits for the coordinator to end its call (the deadline is a
// hang guard only).
func (e *env) waitIdle() voice.Status {
	e.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st := e.coord.Status(); !st.Active {
			return st
		}
	}
	e.t.Fatalf("the call never ended: %+v", e.coord.Status())
	return voice.Status{}
}

func (e *env) dials() []ringbacktest.LogLine {
	e.t.Helper()
	lines, err := ringbacktest.ReadLog(e.log)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []ringbacktest.LogLine
	for _, l := range lines {
		if l.Tool == "call_start" {
			out = append(out, l)
		}
	}
	return out
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func TestPreflightFailureCreatesNoChatAndDialsNobody(t *testing.T) {
	for _, c := range []struct {
		name   string
		script ringbacktest.Script
		want   string
	}{
		{"missing tool", ringbacktest.Script{Omit: []string{"call_end"}}, "lacks call_end"},
		{"status fails twice", ringbacktest.Script{StatusFailures: 2}, "status check failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.script)
			code, out := e.post("/quick-call", `{}`)
			if code != 503 || !strings.Contains(fmt.Sprint(out["error"]), c.want) {
				t.Fatalf("quick-call = %d %v", code, out)
			}
			if list, _ := e.store.List(context.Background()); len(list) != 0 {
				t.Fatalf("a chat was created: %+v", list)
			}
			if d := e.dials(); len(d) != 0 || len(e.provider.Requests()) != 0 {
				t.Fatalf("dialled %v, %d model requests", d, len(e.provider.Requests()))
			}
			if st := e.coord.Status(); st.Active || st.Phase != voice.PhaseFailed {
				t.Fatalf("status %+v", st)
			}
		})
	}
	// One status failure is retried once and the call goes ahead.
	e := newEnv(t, ringbacktest.Script{StatusFailures: 1, Calls: []ringbacktest.Call{{Heard: []string{"hello"}}}})
	e.provider.Enqueue("tier-5", llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__voice__call_end", `{}`)}}, llmtest.Reply{Content: "Bye."})
	if code, out := e.post("/quick-call", `{}`); code != 202 {
		t.Fatalf("after one status failure: %d %v", code, out)
	}
	e.waitIdle()
}

func TestCallWithSpokenTurnsAndApprovals(t *testing.T) {
	e := newEnv(t, ringbacktest.Script{Calls: []ringbacktest.Call{{Heard: []string{
		"Email Anna that I am late",
		"Approve.",       // first gated send: approved
		"what?", "maybe", // second: two ambiguous answers → denied
		"repeat", "reject", // third: repeated, then rejected
		"thanks, bye",
	}}}})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__voice__call_start", `{"openingLine":"Hi, it's Steward."}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__mail__send_email", `{"to":"anna@example.com","body":"I am late"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c3", "mcp__mail__send_email", `{"to":"anna@example.com","body":"second"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c4", "mcp__mail__send_email", `{"to":"anna@example.com","body":"third"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c5", "mcp__voice__converse", `{"text":"Done. Anything else?"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c6", "mcp__voice__call_end", `{"text":"Bye."}`)}},
		llmtest.Reply{Content: "Call finished."})
	code, out := e.post("/voice/call", `{"openingLine":"Hi, it's Steward.","requestId":"r1"}`)
	if code != 202 || out["chatId"] == "" {
		t.Fatalf("voice/call = %d %v", code, out)
	}
	chatID := out["chatId"].(string)
	// A second call while this one runs: 409 with the live state.
	code, busy := e.post("/quick-call", `{}`)
	if code != 409 || busy["retryAfterMs"] == nil || busy["state"].(map[string]any)["chatId"] != chatID {
		t.Fatalf("second call = %d %v", code, busy)
	}
	// The same request id: the first chat, no second dial.
	if code, again := e.post("/voice/call", `{"requestId":"r1"}`); code != 202 || again["chatId"] != chatID || again["replayed"] != true {
		t.Fatalf("replayed request = %d %v", code, again)
	}
	st := e.waitIdle()
	if st.Outcome != voice.OutcomeCompleted || st.Phase != voice.PhaseIdle {
		t.Fatalf("final status %+v", st)
	}
	if n := e.send.sent(); n != 1 {
		t.Fatalf("%d sends ran; only the approved one may", n)
	}
	if d := e.dials(); len(d) != 1 {
		t.Fatalf("%d dials", len(d))
	}
	// What the host said: the exact tool and canonical arguments, the
	// constrained retry, the repeat.
	lines, _ := ringbacktest.ReadLog(e.log)
	var spoken []string
	for _, l := range lines {
		if l.Tool == "converse" {
			spoken = append(spoken, fmt.Sprint(l.Args["text"]))
		}
	}
	want := `Approval needed. Steward wants to run mcp__mail__send_email with {"body":"I am late","to":"anna@example.com"}. Say approve, reject or repeat.`
	if len(spoken) < 6 || spoken[0] != want || !strings.HasPrefix(spoken[2], "Please say only approve, reject or repeat.") {
		t.Fatalf("spoken prompts %q", spoken)
	}
	if strings.Count(strings.Join(spoken, "\n"), `"body":"third"`) != 2 {
		t.Errorf("repeat did not replay the same prompt: %q", spoken)
	}
	decisions := e.audits.find("voice.approval")
	if len(decisions) != 3 || !strings.Contains(decisions[0], `"decision":"approve"`) ||
		!strings.Contains(decisions[1], "no clear answer after one retry") || !strings.Contains(decisions[2], "rejected by voice") {
		t.Fatalf("approval audit %q", decisions)
	}
	e.audits.mu.Lock()
	var rows []string
	for _, u := range e.audits.usage {
		rows = append(rows, fmt.Sprintf("%s/%s %s ok=%v", u.Service, u.Action, u.Tool, u.OK))
	}
	e.audits.mu.Unlock()
	if strings.Join(rows, ";") != "host/voice-call voice.approval ok=true;host/voice-call voice.approval ok=true;host/voice-call voice.approval ok=true;host/voice-call voice.call ok=true" {
		t.Errorf("usage rows %q", rows)
	}
	// The transcript holds a control entry, not words the user did not say.
	entries, _ := e.store.Transcript(context.Background(), chatID)
	var kinds []string
	for _, en := range entries {
		kinds = append(kinds, en.Kind)
	}
	if len(kinds) == 0 || kinds[0] != "control" || strings.Contains(strings.Join(kinds, ","), "user") {
		t.Fatalf("transcript kinds %v", kinds)
	}
}

func TestMediaInterruptedGetsExactlyOneReplacementCall(t *testing.T) {
	e := newEnv(t, ringbacktest.Script{Calls: []ringbacktest.Call{
		{Heard: []string{"hello"}, Outcome: voice.OutcomeMediaInterrupted, Connected: true},
		{Heard: []string{"I heard you say hello"}, Outcome: voice.OutcomeMediaInterrupted, Connected: true},
	}})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__voice__call_start", `{"openingLine":"Hi"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__voice__converse", `{"text":"How can I help?"}`)}},
		llmtest.Reply{Content: "The call dropped."},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c3", "mcp__voice__call_start", `{"openingLine":"Sorry, we were cut off. What did you last hear?"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c4", "mcp__voice__converse", `{"text":"Right."}`)}},
		llmtest.Reply{Content: "Dropped again."})
	code, out := e.post("/quick-call", `{"requestId":"q1"}`)
	if code != 202 {
		t.Fatalf("quick-call = %d %v", code, out)
	}
	st := e.waitIdle()
	if d := e.dials(); len(d) != 2 {
		t.Fatalf("%d dials after two interruptions, want the call and exactly one replacement", len(d))
	}
	if st.Outcome != voice.OutcomeMediaInterrupted || !st.Recovery || st.ChatID != out["chatId"] || st.Phase != voice.PhaseFailed {
		t.Fatalf("final status %+v", st)
	}
	// Both calls ran in the same chat; the recovery's control text asks what
	// the user last heard.
	reqs := e.provider.Requests()
	last := fmt.Sprint(reqs[3].Body["messages"])
	if !strings.Contains(last, "what they last heard") {
		t.Fatalf("recovery turn did not ask what the user last heard: %s", last)
	}
	if list, _ := e.store.List(context.Background()); len(list) != 1 {
		t.Fatalf("%d chats; recovery must reuse the call's chat", len(list))
	}
}

func TestNoAnswerIsNotRetried(t *testing.T) {
	e := newEnv(t, ringbacktest.Script{Calls: []ringbacktest.Call{{Outcome: voice.OutcomeNoAnswer}}})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__voice__call_start", `{"openingLine":"Hi"}`)}},
		llmtest.Reply{Content: "No answer."})
	if code, out := e.post("/quick-call", ``); code != 202 {
		t.Fatalf("quick-call = %d %v", code, out)
	}
	st := e.waitIdle()
	if st.Outcome != voice.OutcomeNoAnswer || st.Recovery || len(e.dials()) != 1 {
		t.Fatalf("status %+v, %d dials", st, len(e.dials()))
	}
}

func TestCallRequestsAreStrict(t *testing.T) {
	e := newEnv(t, ringbacktest.Script{})
	for _, c := range []struct {
		path, body string
		want       string
	}{
		{"/quick-call", `{"openingLine":"hi"}`, "unknown field openingLine"},
		{"/quick-call", `{"text":"call me"}`, "unknown field text"},
		{"/quick-call", `[1]`, "JSON object"},
		{"/voice/call", `{"openingLine":"` + strings.Repeat("a", 301) + `"}`, "openingLine is over 300"},
		{"/voice/call", `{"requestId":` + `"` + strings.Repeat("r", 129) + `"}`, "requestId is over 128"},
		{"/voice/call", `{"openingLine":5}`, "must be strings"},
	} {
		code, out := e.post(c.path, c.body)
		if code != 400 || !strings.Contains(fmt.Sprint(out["error"]), c.want) {
			t.Errorf("%s %s = %d %v, want 400 with %q", c.path, c.body, code, out, c.want)
		}
	}
	if len(e.dials()) != 0 {
		t.Fatal("a refused request dialled")
	}
}

func TestParseCommandIsExact(t *testing.T) {
	for _, c := range []struct {
		lang, text string
		want       voice.Command
	}{
		{"en", "Approve.", voice.Approve}, {"en", "  REJECT!", voice.Reject}, {"en", "repeat", voice.Repeat},
		{"en", "yes", voice.Ambiguous}, {"en", "approve it", voice.Ambiguous}, {"en", "don't approve", voice.Ambiguous},
		{"it", "Approva", voice.Approve}, {"it", "rifiuta.", voice.Reject}, {"it", "ripeti", voice.Repeat},
		{"it", "approve", voice.Ambiguous}, {"en", "", voice.Ambiguous},
	} {
		if got := voice.ParseCommand(c.lang, c.text); got != c.want {
			t.Errorf("ParseCommand(%s, %q) = %v, want %v", c.lang, c.text, got, c.want)
		}
	}
}

// A dial that fails with network_error before the phone answers is retried
// once through the fallback route, in the same chat; the route is released.
func TestNetworkErrorRetriesOnceThroughFallbackRoute(t *testing.T) {
	net := &fakeNetwork{}
	e := newEnv(t, ringbacktest.Script{Calls: []ringbacktest.Call{
		{Outcome: voice.OutcomeNetworkError},
		{Heard: []string{"hello"}},
	}}, net)
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__voice__call_start", `{"openingLine":"Hi"}`)}},
		llmtest.Reply{Content: "The network failed."},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__voice__call_start", `{"openingLine":"Hi again"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c3", "mcp__voice__call_end", `{}`)}},
		llmtest.Reply{Content: "Done."})
	if code, out := e.post("/quick-call", `{}`); code != 202 {
		t.Fatalf("quick-call = %d %v", code, out)
	}
	st := e.waitIdle()
	if len(e.dials()) != 2 || st.Outcome != voice.OutcomeCompleted || !st.Recovery {
		t.Fatalf("%d dials, status %+v", len(e.dials()), st)
	}
	net.mu.Lock()
	defer net.mu.Unlock()
	if net.acquired != 1 || net.released != 1 {
		t.Fatalf("leases acquired %d, released %d", net.acquired, net.released)
	}
	if !strings.Contains(fmt.Sprint(e.provider.Requests()[2].Body["messages"]), "did not reach the phone network") {
		t.Fatalf("the retry's control turn does not say what happened: %d requests; %v", len(e.provider.Requests()), e.provider.Requests()[2].Body["messages"])
	}
}

// latchTransport reports a media failure while the call runs, then only a
// cleanup error: the first actionable failure must win.
type latchTransport struct {
	mu      sync.Mutex
	polls   int
	seen    chan struct{}
	running bool
}

func (l *latchTransport) Tools(ctx context.Context) ([]string, error) {
	return []string{"call_start", "call_status", "call_end", "converse"}, nil
}

func (l *latchTransport) Call(ctx context.Context, tool string, args map[string]any) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tool != voice.ToolCallStatus {
		return "", false, nil
	}
	if !l.running {
		if l.polls == 0 {
			return `{"phase":"idle"}`, false, nil // preflight
		}
		return `[CALL FAILED] {"code":"server_error","sipStatus":500,"reason":"NO ACTIVE CALL"}`, true, nil
	}
	l.polls++
	if l.polls == 1 {
		close(l.seen)
	}
	return `[CALL FAILED] {"code":"media_stalled","connected":true}`, true, nil
}

// latchRunner is a host whose call turn lasts until the transport was polled.
type latchRunner struct{ tr *latchTransport }

func (r latchRunner) NewChat(ctx context.Context, title string) (string, error) { return "chat_1", nil }
func (r latchRunner) RunControlTurn(ctx context.Context, chatID, text string) protocol.TurnResult {
	r.tr.mu.Lock()
	r.tr.running = true
	r.tr.mu.Unlock()
	<-r.tr.seen
	r.tr.mu.Lock()
	r.tr.running = false
	r.tr.mu.Unlock()
	return protocol.TurnResult{OK: true}
}
func (r latchRunner) PendingApprovals(string) []protocol.ApprovalRequest { return nil }
func (r latchRunner) Respond(protocol.ApprovalRespond) error             { return nil }

func TestFirstActionableFailureIsLatched(t *testing.T) {
	tr := &latchTransport{seen: make(chan struct{})}
	c := voice.New(voice.Options{Transport: tr, Runner: latchRunner{tr}})
	defer c.Close()
	if _, err := c.Start(context.Background(), voice.CallRequest{}); err != nil {
		t.Fatal(err)
	}
	var st voice.Status
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = c.Status(); !st.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never ended")
		}
	}
	if st.Outcome != voice.OutcomeMediaStalled {
		t.Fatalf("outcome %q (%s), want the latched media_stalled", st.Outcome, st.Error)
	}
}
