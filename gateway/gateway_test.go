package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// memLedger keeps records in memory and lets tests wait for them, because the
// gateway records after the client already has its answer.
type memLedger struct {
	mu       sync.Mutex
	cond     *sync.Cond
	requests []gateway.RequestRecord
	attempts []gateway.AttemptRecord
}

func newLedger() *memLedger {
	l := &memLedger{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *memLedger) RecordRequest(_ context.Context, r gateway.RequestRecord) {
	l.mu.Lock()
	l.requests = append(l.requests, r)
	l.mu.Unlock()
	l.cond.Broadcast()
}

func (l *memLedger) RecordAttempt(_ context.Context, a gateway.AttemptRecord) {
	l.mu.Lock()
	l.attempts = append(l.attempts, a)
	l.mu.Unlock()
}

// waitRequests waits until n request rows exist (a hang guard, not a timing assertion).
func (l *memLedger) waitRequests(t *testing.T, n int) []gateway.RequestRecord {
	t.Helper()
	deadline := time.AfterFunc(10*time.Second, func() { l.cond.Broadcast() })
	defer deadline.Stop()
	start := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.requests) < n {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("ledger has %d request rows, want %d", len(l.requests), n)
		}
		l.cond.Wait()
	}
	return append([]gateway.RequestRecord(nil), l.requests...)
}

func (l *memLedger) attemptsOf(id string) []gateway.AttemptRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []gateway.AttemptRecord
	for _, a := range l.attempts {
		if a.RequestID == id {
			out = append(out, a)
		}
	}
	return out
}

type fixture struct {
	url      string
	ledger   *memLedger
	upstream *llmtest.Server
	gw       *gateway.Gateway
}

// newFixture runs a gateway whose providers all point at one scripted
// upstream; yaml uses UPSTREAM where the upstream's base URL goes.
func newFixture(t *testing.T, yaml string, opts gateway.Options) *fixture {
	t.Helper()
	up := llmtest.NewServer(t)
	cfg, err := gateway.ParseConfig([]byte(strings.ReplaceAll(yaml, "UPSTREAM", up.URL)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	l := newLedger()
	opts.Config, opts.Ledger = cfg, l
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	g, err := gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, ledger: l, upstream: up, gw: g}
}

func (f *fixture) post(t *testing.T, path string, body any, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func chat(model string, stream bool) map[string]any {
	return map[string]any{"model": model, "stream": stream, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
}

func upstreamModels(s *llmtest.Server) []string {
	var out []string
	for _, r := range s.Requests() {
		out = append(out, r.Model)
	}
	return out
}

const twoCandidates = `
providers:
  a: { base_url: UPSTREAM }
  b: { base_url: UPSTREAM, headers: { X-Org: b } }
models:
  tier-5: [ { provider: a, model: first }, { provider: b, model: second } ]
rates:
  b/second: { input: 1, output: 2 }
`

func TestNonStreamFallbackBeforeOutput(t *testing.T) {
	tests := []struct {
		name  string
		fail  llmtest.Reply
		wantN int
	}{
		{"503", llmtest.Reply{Status: 503}, 2},
		{"429", llmtest.Reply{Status: 429}, 2},
		{"408", llmtest.Reply{Status: 408}, 2},
		{"409", llmtest.Reply{Status: 409}, 2},
		{"connection dropped", llmtest.Reply{DropBeforeHeaders: true}, 2},
		{"body cut short", llmtest.Reply{Content: "partial", DropAfter: 1}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, twoCandidates, gateway.Options{})
			f.upstream.Enqueue("first", tc.fail)
			f.upstream.Enqueue("second", llmtest.Reply{Content: "from second", Usage: &llm.Usage{PromptTokens: 1000, CompletionTokens: 500}})
			resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
			var out llm.ChatResponse
			json.Unmarshal(body, &out)
			if resp.StatusCode != 200 || out.Choices[0].Message.Content != "from second" {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if got := upstreamModels(f.upstream); fmt.Sprint(got) != "[first second]" {
				t.Errorf("upstream saw %v", got)
			}
			if h := f.upstream.Requests()[1].Header.Get("X-Org"); h != "b" {
				t.Errorf("provider header X-Org = %q", h)
			}
			rec := f.ledger.waitRequests(t, 1)[0]
			if rec.Provider != "b" || rec.UpstreamModel != "second" || rec.Outcome != gateway.OutcomeOK || rec.Attempts != 2 {
				t.Errorf("record = %+v", rec)
			}
			if want := (1000*1.0 + 500*2.0) / 1e6; rec.CostUSD != want {
				t.Errorf("cost = %v, want %v", rec.CostUSD, want)
			}
			atts := f.ledger.attemptsOf(rec.ID)
			if len(atts) != 2 || atts[0].Outcome != gateway.OutcomeRetryable || atts[1].Outcome != gateway.OutcomeOK {
				t.Errorf("attempts = %+v", atts)
			}
		})
	}
}

func TestNonRetryable4xxPassesThrough(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("first", llmtest.Reply{Status: 400, ErrorMessage: "context length exceeded"})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "context length exceeded") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if got := upstreamModels(f.upstream); len(got) != 1 {
		t.Errorf("a 400 fell back: upstream saw %v", got)
	}
	if rec := f.ledger.waitRequests(t, 1)[0]; rec.Outcome != gateway.OutcomeRejected || rec.Status != 400 {
		t.Errorf("record = %+v", rec)
	}
}

const ladder = `
providers:
  p: { base_url: UPSTREAM }
models:
  tier-1: [ { provider: p, model: m1 } ]
  tier-2: [ { provider: p, model: m2 } ]
  tier-3: [ { provider: p, model: m3 }, { provider: p, model: m3b } ]
  tier-4: [ { provider: p, model: m4 } ]
  tier-5: [ { provider: p, model: m5 } ]
  tier-6: [ { provider: p, model: m6 } ]
`

func TestEscalationOrder(t *testing.T) {
	tests := []struct {
		model string
		want  string
	}{
		{"tier-3", "[m3 m3b m4 m5 m6 m2]"}, // own, escalate up, sweep down paid rungs (never tier-1)
		{"tier-6", "[m6 m5 m4 m3 m3b m2]"},
		{"tier-1", "[m1 m2 m3 m3b m4 m5 m6]"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			f := newFixture(t, ladder, gateway.Options{})
			f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 500} })
			resp, body := f.post(t, "/v1/chat/completions", chat(tc.model, false), nil)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if got := fmt.Sprint(upstreamModels(f.upstream)); got != tc.want {
				t.Errorf("order = %s, want %s", got, tc.want)
			}
			var e llm.ErrorResponse
			json.Unmarshal(body, &e)
			if !strings.Contains(e.Error.Message, "p/m3b: HTTP 500") || e.Error.Code != "upstream_failed" {
				t.Errorf("error = %+v", e.Error)
			}
		})
	}
}

func TestEscalationSucceedsOnHigherTier(t *testing.T) {
	f := newFixture(t, ladder, gateway.Options{})
	f.upstream.Enqueue("m3", llmtest.Reply{Status: 502})
	f.upstream.Enqueue("m3b", llmtest.Reply{Status: 503})
	f.upstream.Enqueue("m4", llmtest.Reply{Content: "tier four"})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-3", false), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "tier four") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if rec := f.ledger.waitRequests(t, 1)[0]; rec.PublicModel != "tier-3" || rec.UpstreamModel != "m4" {
		t.Errorf("record = %+v", rec)
	}
}

const aliases = `
providers:
  deepseek: { base_url: UPSTREAM, api_key_env: KEY_A }
  deepseek-again: { base_url: UPSTREAM/, api_key_env: KEY_B }
  other-key: { base_url: UPSTREAM, api_key_env: KEY_C }
models:
  tier-4: [ { provider: deepseek-again, model: flash } ]
  tier-5: [ { provider: deepseek, model: flash }, { provider: deepseek-again, model: flash }, { provider: other-key, model: flash } ]
`

func TestAliasCollapse(t *testing.T) {
	env := map[string]string{"KEY_A": "sk-same-key-1234", "KEY_B": "sk-same-key-1234", "KEY_C": "sk-other-key-5678"}
	f := newFixture(t, aliases, gateway.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 503} })
	f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
	// deepseek and deepseek-again (also tier-4) are one target; other-key differs by key.
	reqs := f.upstream.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream got %d requests, want 2 (aliases collapsed)", len(reqs))
	}
	if reqs[0].Header.Get("Authorization") != "Bearer sk-same-key-1234" || reqs[1].Header.Get("Authorization") != "Bearer sk-other-key-5678" {
		t.Errorf("keys sent: %q, %q", reqs[0].Header.Get("Authorization"), reqs[1].Header.Get("Authorization"))
	}
}

func TestSharedDeadline(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{RequestTimeout: 300 * time.Millisecond})
	f.upstream.Enqueue("first", llmtest.Reply{Delay: time.Hour}) // answers only when cancelled
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "deadline") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	// The deadline is shared: the second candidate never gets a fresh one.
	if got := upstreamModels(f.upstream); fmt.Sprint(got) != "[first]" {
		t.Errorf("upstream saw %v", got)
	}
	if rec := f.ledger.waitRequests(t, 1)[0]; rec.Outcome != gateway.OutcomeTimeout {
		t.Errorf("outcome = %s", rec.Outcome)
	}
}

// sse reads a gateway stream into its data payloads.
func sse(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	if err := llm.ReadSSE(bytes.NewReader(body), func(d []byte) error { out = append(out, string(d)); return nil }); err != nil {
		t.Fatalf("read stream: %v\n%s", err, body)
	}
	return out
}

func streamText(t *testing.T, events []string) (text string, errMsg string) {
	for _, e := range events {
		var c llm.StreamChunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("bad chunk %q", e)
		}
		if c.Error != nil {
			errMsg = c.Error.Message
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
	}
	return text, errMsg
}

func TestStreamFallbackBeforeFirstByte(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("first", llmtest.Reply{Content: "never", DropAfter: 0, DropBeforeHeaders: true})
	f.upstream.Enqueue("second", llmtest.Reply{Content: "streamed answer", Chunks: 4})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), map[string]string{"X-Usage-Service": "host", "X-Usage-Action": "chat"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text, errMsg := streamText(t, sse(t, body))
	if text != "streamed answer" || errMsg != "" {
		t.Errorf("text %q err %q", text, errMsg)
	}
	// The gateway asked for usage on the stream even though the client did not.
	if opts, _ := f.upstream.Requests()[1].Body["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("upstream stream_options = %v", f.upstream.Requests()[1].Body["stream_options"])
	}
	rec := f.ledger.waitRequests(t, 1)[0]
	if rec.Outcome != gateway.OutcomeOK || !rec.Stream || rec.Tokens.Output == 0 || rec.Service != "host" || rec.Action != "chat" {
		t.Errorf("record = %+v", rec)
	}
	if rec.TTFB <= 0 || rec.TTFB > rec.Latency {
		t.Errorf("ttfb %v latency %v", rec.TTFB, rec.Latency)
	}
}

func TestStreamFailsAfterOutputWithoutSwitching(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("first", llmtest.Reply{Content: "abcdefgh", Chunks: 4, DropAfter: 2})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := sse(t, body) // ends with [DONE], or ReadSSE would fail
	text, errMsg := streamText(t, events)
	if text != "abcd" {
		t.Errorf("visible text %q, want only the first provider's output", text)
	}
	if !strings.Contains(errMsg, "ended before [DONE]") {
		t.Errorf("error event %q", errMsg)
	}
	if got := upstreamModels(f.upstream); fmt.Sprint(got) != "[first]" {
		t.Errorf("switched provider mid-stream: upstream saw %v", got)
	}
	if rec := f.ledger.waitRequests(t, 1)[0]; rec.Outcome != gateway.OutcomeStreamError {
		t.Errorf("outcome = %s", rec.Outcome)
	}
}

func TestStreamFromProviderThatCannotStream(t *testing.T) {
	tests := []struct {
		name   string
		yaml   string
		reply  llmtest.Reply
		stream []bool // what the upstream was asked, per request
	}{
		{"rejects streaming", twoCandidates, llmtest.Reply{RejectStream: true, Content: "re-emitted", ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "f", Arguments: `{"a":1}`}}}}, []bool{true, false}},
		{"ignores stream flag", twoCandidates, llmtest.Reply{IgnoreStream: true, Content: "re-emitted"}, []bool{true}},
		{"configured stream: false", strings.Replace(twoCandidates, "a: { base_url: UPSTREAM }", "a: { base_url: UPSTREAM, stream: false }", 1), llmtest.Reply{Content: "re-emitted"}, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.yaml, gateway.Options{})
			f.upstream.Enqueue("first", tc.reply, tc.reply)
			resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d type %q body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var acc llm.Accumulator
			for _, e := range sse(t, body) {
				var c llm.StreamChunk
				json.Unmarshal([]byte(e), &c)
				acc.Add(c)
			}
			msg := acc.Response().Choices[0].Message
			if msg.Content != "re-emitted" || len(msg.ToolCalls) != len(tc.reply.ToolCalls) {
				t.Errorf("message = %+v", msg)
			}
			var asked []bool
			for _, r := range f.upstream.Requests() {
				asked = append(asked, r.Stream)
			}
			if fmt.Sprint(asked) != fmt.Sprint(tc.stream) {
				t.Errorf("upstream stream flags = %v, want %v", asked, tc.stream)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{APIKey: "gw-secret-key"})
	tests := []struct {
		header string
		want   int
	}{{"", 401}, {"Bearer wrong", 401}, {"gw-secret-key", 401}, {"Bearer gw-secret-key", 200}}
	for _, tc := range tests {
		h := map[string]string{}
		if tc.header != "" {
			h["Authorization"] = tc.header
		}
		resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), h)
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: status %d, want %d (%s)", tc.header, resp.StatusCode, tc.want, body)
		}
		if resp.StatusCode == 401 && strings.Contains(string(body), "gw-secret-key") {
			t.Error("401 body echoes the key")
		}
	}
	for _, path := range []string{"/v1/models", "/rates", "/health"} {
		resp, err := http.Get(f.url + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s without key: %v %v", path, resp.StatusCode, err)
		}
	}
	// The client's gateway key is never forwarded to a provider.
	for _, r := range f.upstream.Requests() {
		if strings.Contains(r.Header.Get("Authorization"), "gw-secret-key") {
			t.Error("gateway key forwarded upstream")
		}
	}

	open := newFixture(t, twoCandidates, gateway.Options{})
	if resp, _ := open.post(t, "/v1/chat/completions", chat("tier-5", false), nil); resp.StatusCode != 200 {
		t.Errorf("without GATEWAY_API_KEY: status %d", resp.StatusCode)
	}
}

func TestAttribution(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.post(t, "/v1/chat/completions", chat("tier-5", false), map[string]string{"X-Usage-Service": "mail-promoter", "X-Usage-Action": "triage"})
	f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
	f.post(t, "/v1/chat/completions", chat("tier-5", false), map[string]string{"X-Usage-Service": "wiki"})
	recs := f.ledger.waitRequests(t, 3)
	got := map[string]bool{}
	for _, r := range recs {
		got[r.Service+"/"+r.Action] = true
	}
	for _, want := range []string{"mail-promoter/triage", "unknown/unknown", "wiki/unknown"} {
		if !got[want] {
			t.Errorf("no ledger row %s in %v", want, got)
		}
	}
	// Attribution headers are ours; providers never see them.
	if f.upstream.Requests()[0].Header.Get("X-Usage-Service") != "" {
		t.Error("attribution header forwarded upstream")
	}
}

func TestKeysNeverLeak(t *testing.T) {
	const key = "sk-live-ABCDEF0123456789"
	yaml := `
providers:
  p: { base_url: UPSTREAM, api_key_env: P_KEY }
models:
  tier-5: [ { provider: p, model: m } ]
`
	f := newFixture(t, yaml, gateway.Options{LookupEnv: func(k string) (string, bool) { return key, k == "P_KEY" }})
	f.upstream.Enqueue("m", llmtest.Reply{Status: 401, ErrorMessage: "Incorrect API key provided: " + key})
	f.upstream.Enqueue("m", llmtest.Reply{Status: 500, ErrorMessage: "internal error for key " + key})
	for range 2 {
		_, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
		if strings.Contains(string(body), key) {
			t.Errorf("response leaks the provider key: %s", body)
		}
	}
	if f.upstream.Requests()[0].Header.Get("Authorization") != "Bearer "+key {
		t.Error("provider did not receive its key")
	}
	for _, r := range f.ledger.waitRequests(t, 2) {
		if strings.Contains(fmt.Sprintf("%+v", r), key) {
			t.Errorf("ledger row leaks the key: %+v", r)
		}
		for _, a := range f.ledger.attemptsOf(r.ID) {
			if strings.Contains(fmt.Sprintf("%+v", a), key) {
				t.Errorf("attempt row leaks the key: %+v", a)
			}
		}
	}
}

func TestMissingKeySkipsCandidate(t *testing.T) {
	yaml := `
providers:
  paid: { base_url: UPSTREAM, api_key_env: PAID_KEY }
  free: { base_url: UPSTREAM }
models:
  tier-5: [ { provider: paid, model: m }, { provider: free, model: local } ]
`
	f := newFixture(t, yaml, gateway.Options{})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", false), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if got := upstreamModels(f.upstream); fmt.Sprint(got) != "[local]" {
		t.Errorf("upstream saw %v", got)
	}
	rec := f.ledger.waitRequests(t, 1)[0]
	if a := f.ledger.attemptsOf(rec.ID); len(a) != 2 || a[0].Outcome != gateway.OutcomeSkipped || !strings.Contains(a[0].Error, "PAID_KEY is not set") {
		t.Errorf("attempts = %+v", a)
	}
}

func TestBadInputIsRefusedAndNotForwarded(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	big := bytes.Repeat([]byte("x"), gateway.MaxRequestBytes+1)
	tests := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		code   string
	}{
		{"malformed JSON", "application/json", []byte(`{"model": "tier-5",`), 400, "invalid_json"},
		{"JSON array", "application/json", []byte(`[1,2]`), 400, "invalid_json"},
		{"missing model", "application/json", []byte(`{"messages":[]}`), 400, "invalid_model"},
		{"unknown model", "application/json", []byte(`{"model":"gpt-9","messages":[]}`), 404, "model_not_found"},
		{"bad stream flag", "application/json", []byte(`{"model":"tier-5","stream":"yes"}`), 400, "invalid_stream"},
		{"wrong content type", "text/plain", []byte(`{"model":"tier-5"}`), 415, "unsupported_media_type"},
		{"over 32 MiB", "application/json", big, 413, "request_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, f.url+"/v1/chat/completions", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e llm.ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body is not an OpenAI error object: %v", err)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Errorf("status %d code %v msg %q, want %d %s", resp.StatusCode, e.Error.Code, e.Error.Message, tc.status, tc.code)
			}
		})
	}
	if n := len(f.upstream.Requests()); n != 0 {
		t.Errorf("%d bad requests were forwarded", n)
	}
}

func TestEmbeddingsAndModels(t *testing.T) {
	yaml := `
providers:
  o: { base_url: UPSTREAM }
models:
  local-embed: [ { provider: o, model: bge-m3 } ]
  tier-1: [ { provider: o, model: llama } ]
rates:
  o/bge-m3: { input: 0.01, output: 0 }
`
	f := newFixture(t, yaml, gateway.Options{})
	c := llm.NewClient(llm.ClientOptions{BaseURL: f.url + "/v1"})
	vecs, err := c.Embed(llm.WithAttribution(context.Background(), llm.Attribution{Service: "mail-mirror", Action: "embed"}), "local-embed", []string{"a", "b"})
	if err != nil || len(vecs) != 2 || len(vecs[0]) != f.upstream.EmbeddingDim {
		t.Fatalf("embed: %v %d", err, len(vecs))
	}
	if f.upstream.Requests()[0].Model != "bge-m3" || f.upstream.Requests()[0].Path != "/v1/embeddings" {
		t.Errorf("upstream request %+v", f.upstream.Requests()[0])
	}
	rec := f.ledger.waitRequests(t, 1)[0]
	if rec.Endpoint != "embeddings" || rec.Tokens.Input == 0 || rec.Service != "mail-mirror" {
		t.Errorf("record = %+v", rec)
	}

	resp, err := http.Get(f.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 2 || models.Data[0].ID != "local-embed" || models.Data[1].ID != "tier-1" {
		t.Errorf("models = %+v", models.Data)
	}
	resp, _ = http.Get(f.url + "/rates")
	var rates struct {
		Rates map[string]gateway.Rate `json:"rates"`
	}
	json.NewDecoder(resp.Body).Decode(&rates)
	resp.Body.Close()
	if rates.Rates["o/bge-m3"].Input != 0.01 {
		t.Errorf("rates = %+v", rates)
	}
}

// TestStreamRefusalRetriesWithoutStreaming: a provider whose structured
// error names the stream parameter is asked again without streaming and its
// answer re-emitted as SSE; a 400 whose words only mention streams is the
// provider's answer, passed through.
func TestStreamRefusalRetriesWithoutStreaming(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("first", llmtest.Reply{Status: 400, ErrorMessage: "Unsupported value: 'stream' does not support true with this model.",
		ErrorCode: "unsupported_value", ErrorType: "invalid_request_error", ErrorParam: "stream"})
	f.upstream.Enqueue("first", llmtest.Reply{Content: "answer without a stream"})
	resp, body := f.post(t, "/v1/chat/completions", chat("tier-5", true), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d type %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if text, errMsg := streamText(t, sse(t, body)); text != "answer without a stream" || errMsg != "" {
		t.Errorf("text %q err %q", text, errMsg)
	}
	reqs := f.upstream.Requests()
	if len(reqs) != 2 || reqs[0].Model != "first" || reqs[1].Model != "first" || reqs[1].Body["stream"] == true {
		t.Errorf("upstream saw %d requests; the second must ask the same model without streaming", len(reqs))
	}

	g := newFixture(t, twoCandidates, gateway.Options{})
	g.upstream.Enqueue("first", llmtest.Reply{Status: 400, ErrorMessage: "the stream of messages is too long for this model"})
	resp, body = g.post(t, "/v1/chat/completions", chat("tier-5", true), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "too long") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if got := upstreamModels(g.upstream); len(got) != 1 {
		t.Errorf("a 400 that only mentions streams was retried: upstream saw %v", got)
	}
}
