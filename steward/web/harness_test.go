package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/browsertest"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/speech"
	"github.com/agentstack/agentstack/steward/usage"
	"github.com/agentstack/agentstack/steward/web"
	"github.com/agentstack/agentstack/steward/writeops"
)

var screenshotDir = flag.String("screenshots", "", "write screenshots of the app (PNG) into this directory, e.g. ../../docs/screenshots")

const hostToken = "browser-test-token-0123456789abcdef"

// xssAnswer is what a hostile model (or a mail it quotes) might say.
const xssAnswer = "Here is the page you asked for:\n\n" +
	"<img src=x onerror=\"window.__xss='img'\"> and <script>window.__xss='script'</script>\n\n" +
	"[click me](javascript:window.__xss='link') or [the docs](https://example.org/docs) " +
	"and ![tracker](https://tracker.example/pixel.png?u=1)\n\n" +
	"<a href=\"javascript:window.__xss='a'\">raw anchor</a> <svg onload=\"window.__xss='svg'\"></svg>"

// harness is a real host (SQLite stores, policy, usage and audit ledgers,
// the model gateway in front of a scripted provider) serving the embedded
// web app on a loopback port it can drop and restart.
type harness struct {
	t        *testing.T
	home     string
	provider *llmtest.Server
	gwSrv    *httptest.Server
	store    *chats.Store
	ledger   *usage.Store
	audit    *audit.Ledger
	pol      *policy.Policy
	gw       *gateway.Gateway
	sw       *gateway.Switch // what gwSrv serves: h.gw unless a test swaps it
	push     *push.Service
	journal  *writeops.Store
	pushSrv  *httptest.Server // the push service every subscription's endpoint reaches

	addr string
	srv  *http.Server
	ln   *trackingListener
	host *host.Host

	// refusePair answers /pair as the host does for a client on another
	// machine, to drive the app's manual pairing.
	refusePair atomic.Bool

	mu        sync.Mutex
	calls     map[string][]string // tool → args received
	pushCalls []string            // "METHOD /push/… Authorization" in arrival order
	pushSent  []string            // paths the push service received
	hold      chan struct{}       // the next plain reply streams its first chunk, then waits
	seq       int
	refused   bool // a message asking "too long for you" was refused once

	bg *bgFixture // the background plane the System page shows

	// mounts add routes to each host start (a restart builds a new host);
	// extraTools join the tools the model sees.
	mounts     []func(*host.Host)
	extraTools []agent.Tool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, home: t.TempDir(), calls: map[string][]string{}}
	h.bg = newBGFixture(h.home)
	h.provider = llmtest.NewServer(t)
	h.provider.Handle(h.script)
	var err error
	if h.store, err = chats.Open(ctx, filepath.Join(h.home, "chats.db")); err != nil {
		t.Fatal(err)
	}
	if h.ledger, err = usage.Open(ctx, filepath.Join(h.home, "usage.db"), usage.Options{}); err != nil {
		t.Fatal(err)
	}
	if h.audit, err = audit.Open(ctx, filepath.Join(h.home, "audit.db"), audit.Options{}); err != nil {
		t.Fatal(err)
	}
	if h.journal, err = writeops.Open(ctx, writeops.Path(h.home), writeops.Options{}); err != nil {
		t.Fatal(err)
	}
	if h.pol, err = policy.New(policy.Options{User: policy.Rules{Allow: []string{"test__journaled_write"}, DenyPrefixes: []string{"mcp__danger__"}}, Connectors: []string{"mail", "calendar", "contacts", "documents", "shell", "trains"},
		Hints: h.readOnlyHints()}); err != nil {
		t.Fatal(err)
	}
	cfg := &gateway.Config{
		Providers: map[string]gateway.Provider{"scripted": {BaseURL: h.provider.URL}},
		Models:    map[string][]gateway.Candidate{"tier-5": {{Provider: "scripted", Model: "scripted-1"}}},
		Rates:     map[string]gateway.Rate{"scripted/scripted-1": {Input: 3, Output: 15}},
	}
	if h.gw, err = gateway.New(gateway.Options{Config: cfg, Ledger: h.ledger}); err != nil {
		t.Fatal(err)
	}
	h.sw = gateway.NewSwitch(h.gw)
	h.gwSrv = httptest.NewServer(h.sw.Handler())
	// Every push endpoint (whatever its host) reaches this loopback push
	// service, which accepts the message.
	h.pushSrv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.pushSent = append(h.pushSent, r.URL.Path)
		h.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	client := h.pushSrv.Client()
	tr := client.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, h.pushSrv.Listener.Addr().String())
	}
	tr.TLSClientConfig.InsecureSkipVerify = true // the test server's certificate names 127.0.0.1, not the endpoint's host
	if h.push, err = push.Open(push.Options{Home: h.home, HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	h.start("127.0.0.1:0")
	t.Cleanup(h.close)
	return h
}

// start runs a host on addr over the harness's stores.
func (h *harness) start(addr string) {
	h.t.Helper()
	h.host = host.New(host.Options{
		Token: hostToken, Version: "test", Home: h.home, Usage: h.ledger, Rates: h.gw.Rates,
		AuditHandler: h.audit.Handler(), WriteOpsHandler: writeops.Handler(h.journal), Web: web.Handler(),
		System: h.systemInfo,
		Chats: host.ManagerOptions{
			Store: h.store, Model: llm.NewClient(llm.ClientOptions{BaseURL: h.gwSrv.URL + "/v1"}), ModelName: "tier-5",
			SystemPrompt: "test prompt", Tools: h.tools, Policy: h.pol, ApprovalTimeout: 5 * time.Minute,
			Audit: host.LedgerAuditor(h.audit),
		},
	})
	// The push routes as steward serve mounts them (behind the token), with
	// each authorised call recorded.
	h.push.Mount(func(pattern string, next http.Handler) {
		h.host.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.mu.Lock()
			h.pushCalls = append(h.pushCalls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			h.mu.Unlock()
			next.ServeHTTP(w, r)
		}))
	})
	h.mountPreparation()
	// The speech settings as steward serve mounts them (espeak-ng renders
	// previews when installed).
	speech.MountSettings(h.host.Handle, &speech.SettingsRoute{Store: &speech.SettingsStore{Path: filepath.Join(h.home, "voice-settings.json")},
		Synth: &speech.Synthesizer{TempDir: h.home}})
	for _, m := range h.mounts {
		m(h.host)
	}
	var ln net.Listener
	var err error
	// A restarted host takes the same port; the old socket may linger briefly.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatalf("listen on %s: %v", addr, err)
	}
	h.addr = ln.Addr().String()
	h.ln = &trackingListener{Listener: ln, conns: map[net.Conn]bool{}}
	hh := h.host.Handler()
	h.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/pair" && h.refusePair.Load() {
			http.Error(w, `{"error":"automatic pairing is only for the app opened on this computer"}`, http.StatusForbidden)
			return
		}
		hh.ServeHTTP(w, r)
	})}
	go h.srv.Serve(h.ln)
}

// restart stops the host and starts a new one on the same port and stores.
func (h *harness) restart() {
	h.srv.Close()
	h.host.Close()
	h.ln.dropAll()
	h.start(h.addr)
}

func (h *harness) close() {
	h.srv.Close()
	h.host.Close()
	h.ln.dropAll()
	h.gwSrv.Close()
	h.pushSrv.Close()
	h.audit.Close()
	h.journal.Close()
	h.ledger.Close()
	h.store.Close()
}

func (h *harness) url() string { return "http://" + h.addr + "/" }

// flush writes the ledgers' queued rows before a page reads them.
func (h *harness) flush() {
	ctx := context.Background()
	if err := h.ledger.Flush(ctx); err != nil {
		h.t.Fatal(err)
	}
	if err := h.audit.Flush(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// holdNext makes the next plain model reply stream its first chunk and wait
// until the returned channel is closed.
func (h *harness) holdNext() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = make(chan struct{})
	return h.hold
}

func (h *harness) got(tool string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls[tool]...)
}

func (h *harness) tools() []agent.Tool {
	mk := func(name, schema string, run func(args json.RawMessage) agent.ToolResult) agent.Tool {
		return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name, Parameters: json.RawMessage(schema)},
			Fn: func(_ context.Context, args json.RawMessage) (agent.ToolResult, error) {
				h.mu.Lock()
				h.calls[name] = append(h.calls[name], string(args))
				h.mu.Unlock()
				return run(args), nil
			}}
	}
	return append([]agent.Tool{
		mk("mcp__mail__search_mail", `{"type":"object","properties":{"query":{"type":"string"}}}`, func(json.RawMessage) agent.ToolResult {
			// Hostile mail content: it must render as text in the cards.
			return agent.ToolResult{Content: `1 message: <img src=x onerror="window.__xss='tool'">`,
				Data: json.RawMessage(`{"kind":"search_results","query":"invoice","items":[{"kind":"email","id":"m1","from":"billing@example.org",` +
					`"to":["me@example.org"],"subject":"Invoice <img src=x onerror=\"window.__xss='rich'\">","date":"2026-11-29T09:30:00Z",` +
					`"snippet":"Your invoice <script>window.__xss='snippet'</script> is attached","hasAttachments":true,"score":0.92},` +
					`{"kind":"file","path":"/Users/me/Documents/invoice-2026-11.pdf","name":"invoice-2026-11.pdf","size":48213,"modified":"2026-11-28T18:00:00Z","mime":"application/pdf","score":0.8},` +
					`{"kind":"event","uid":"ev1","calendar":"Work","title":"Pay the invoice","start":"2026-12-01T09:00:00Z","end":"2026-12-01T09:30:00Z","allDay":false,"location":"Home","score":0.5}]}`)}
		}),
		// A journaled write answering as the mail connector does through the
		// MCP bridge: the write_operation card in the structured content.
		mk("test__journaled_write", `{"type":"object"}`, func(json.RawMessage) agent.ToolResult {
			ctx := context.Background()
			op, err := h.journal.Begin(ctx, writeops.NewOperation{Kind: writeops.KindMailSend, Summary: "mail to anna@polimi.it: Lunch",
				Input: map[string]any{"to": []string{"anna@polimi.it"}, "subject": "Lunch"}})
			if err == nil {
				op, err = h.journal.Finish(ctx, op.ID, nil, nil)
			}
			if err != nil {
				return agent.ToolResult{Content: err.Error(), IsError: true}
			}
			data, _ := json.Marshal(map[string]any{"content": []any{}, "structuredContent": map[string]any{"kind": "write_operation",
				"operationId": op.ID, "summary": op.Summary, "state": op.State, "note": "accepted by the server"}})
			return agent.ToolResult{Content: "Accepted, operation " + op.ID, Data: data}
		}),
		mk("mcp__mail__send_email", `{"type":"object","required":["to","body"],"properties":{"to":{"type":"string","description":"Recipient address"},"body":{"type":"string"},"cc":{"type":"string"},"priority":{"type":"integer"}}}`,
			func(json.RawMessage) agent.ToolResult { return agent.ToolResult{Content: "Queued for sending."} }),
	}, append(h.cardTools(), h.extraTools...)...)
}

// script answers like a model: a tool result gets a short final answer; the
// user's words pick a tool call or a plain reply.
func (h *harness) script(req llmtest.Request) llmtest.Reply {
	msgs, _ := req.Body["messages"].([]any)
	if len(msgs) == 0 {
		return llmtest.Reply{Content: "no messages"}
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	content, _ := last["content"].(string)
	if first, _ := msgs[0].(map[string]any); strings.HasPrefix(fmt.Sprint(first["content"]), "You compact the conversation") {
		return llmtest.Reply{Content: "Summary: the user tried **streaming**, tools and approvals."}
	}
	if strings.Contains(content, "too long for you") {
		// The provider refuses the conversation as too long once; the host
		// summarises the earlier part and asks again.
		h.mu.Lock()
		refuse := !h.refused
		h.refused = true
		h.mu.Unlock()
		if refuse {
			return llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "the conversation is too long"}
		}
	}
	if last["role"] == "tool" {
		return llmtest.Reply{Content: "Done: " + strings.SplitN(content, "\n", 2)[0]}
	}
	h.mu.Lock()
	h.seq++
	id := fmt.Sprintf("call_%d", h.seq)
	hold := h.hold
	h.hold = nil
	h.mu.Unlock()
	call := func(name, args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}}}
	}
	switch {
	case strings.Contains(content, "refuse the key"):
		return llmtest.Reply{Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided: sk-te****"}
	case strings.Contains(content, "show xss"):
		return llmtest.Reply{Content: xssAnswer}
	case strings.Contains(content, "show cards"):
		return h.cardCalls()
	case strings.Contains(content, "search mail"):
		return call("mcp__mail__search_mail", `{"query":"invoice"}`)
	case strings.Contains(content, "ask me"):
		return call(host.AskUserTool, `{"question":"Which train?","options":["The 17:05","The 18:05"]}`)
	case strings.Contains(content, "journal a write"):
		return call("test__journaled_write", `{}`)
	case strings.Contains(content, "send mail"):
		return call("mcp__mail__send_email", `{"to":"anna@polimi.it","body":"See you Monday.","cc":"boss@polimi.it"}`)
	}
	first, _, _ := strings.Cut(content, "\n")
	return llmtest.Reply{Content: "Streaming **works**, and you said: " + first, Hold: hold, Chunks: 4}
}

// trackingListener remembers its connections so that a test can cut them
// all, as a network drop would, while the host keeps running.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns[c] = true
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	l.conns = map[net.Conn]bool{}
}

// browser is one headless Chromium session.
type browser struct {
	t    *testing.T
	ctx  context.Context
	page *browsertest.Browser
}

// newBrowser starts Chromium with exactly the CI's flags and a fresh
// profile, with a viewport of width×height; it skips the test when no
// Chromium is installed.
func newBrowser(t *testing.T, width, height int64, mobile bool) *browser {
	t.Helper()
	page := browsertest.Start(t, browsertest.Options{Width: width, Height: height, Mobile: mobile, Timeout: 4 * time.Minute})
	return &browser{t: t, ctx: page.Ctx, page: page}
}

// do runs actions, failing the test on error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second) // a hang guard: queries wait for their node
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v%s", err, b.debug())
	}
}

// wait polls a JavaScript condition until it is truthy.
func (b *browser) wait(expr string) {
	b.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		_, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(40*time.Millisecond)))
		if err == nil {
			return
		}
		// A poll that began in the page a navigation is replacing fails with
		// the old document's execution context; the condition is about the new one.
		if lostContext(err) && time.Now().Before(deadline) {
			time.Sleep(40 * time.Millisecond)
			continue
		}
		b.t.Fatalf("waiting for %s: %v%s", expr, err, b.debug())
	}
}

// lostContext reports an evaluation that failed because its document went
// away (a reload or navigation in progress), not because of the expression.
func lostContext(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") || strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Inspected target navigated or closed")
}

// setValue sets a form field's value as typing would, with an input event.
func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	b.wait(fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el) return false;
		el.value = %s; el.dispatchEvent(new Event('input', { bubbles: true })); return el.value === %s })()`, js(sel), js(value), js(value)))
}

// eval evaluates an expression into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v%s", expr, err, b.debug())
	}
	return v
}

func (b *browser) debug() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(location.hash + ' conn=' + document.documentElement.dataset.conn + ' ' + [...document.querySelectorAll('.transcript > *')].slice(-6).map((e) => e.className + ': ' + e.textContent.slice(0, 200)).join('\n'))`))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("\n--- page text (end) ---\n%s\n--- exceptions: %v", text, b.page.Exceptions())
}

func (b *browser) noExceptions() {
	b.t.Helper()
	if ex := b.page.Exceptions(); len(ex) > 0 {
		b.t.Errorf("the page threw: %v", ex)
	}
}

// shot writes a viewport screenshot when -screenshots is set.
func (b *browser) shot(name string) {
	b.t.Helper()
	if *screenshotDir == "" {
		return
	}
	// Let fonts and layout settle for two frames; screenshots are docs, not assertions.
	b.wait(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(*screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screenshotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
