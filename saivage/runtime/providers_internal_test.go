package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/project"
)

// seen is one request a loopback provider received.
type seen struct {
	Path, Auth string
	Body       map[string]any
}

// provider is a loopback model provider answering with handle.
type provider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newProvider(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *provider {
	p := &provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := seen{Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
		json.Unmarshal(b, &s.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, s)
		n := len(p.reqs)
		p.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) seen() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.reqs...)
}

func chatOK(w http.ResponseWriter, _ *http.Request, _ int) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"fine"}}]}`+"\n\n")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`+"\n\ndata: [DONE]\n\n")
}

func status(code int, errCode string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, `{"error":{"message":"no","type":"invalid_request_error","code":"`+errCode+`"}}`)
	}
}

func bind(t *testing.T, root, yaml string, opts ModelsOptions) (*Models, error) {
	t.Helper()
	cfg, err := config.Decode([]byte(yaml), config.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Root = root
	return BindModels(cfg, opts)
}

func ask(m *Models, route string, msgs ...llm.Message) (*llm.ChatResponse, []string, error) {
	if len(msgs) == 0 {
		msgs = []llm.Message{{Role: "user", Content: "hi"}}
	}
	resp, tr, err := m.router.Stream(context.Background(), &llm.ChatRequest{Model: routePrefix + route, Messages: msgs}, nil)
	var attempts []string
	if tr != nil {
		for _, a := range tr.Attempts {
			attempts = append(attempts, a.Provider+"/"+a.UpstreamModel)
		}
	}
	return resp, attempts, err
}

func TestAccountsFailOverByPriority(t *testing.T) {
	high := newProvider(t, status(503, "server_error"))
	low := newProvider(t, chatOK)
	m, err := bind(t, t.TempDir(), `providers:
  p:
    models: [m1]
    accounts:
      low: {baseUrl: `+low.URL+`, apiKey: key-low-0001, priority: 1}
      high: {baseUrl: `+high.URL+`, apiKey: key-high-0002, priority: 5}
      other: {baseUrl: `+high.URL+`, apiKey: key-other, priority: 9, models: []}
models:
  routes:
    default: {candidates: [p/m1]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, attempts, err := ask(m, "default")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "fine" {
		t.Errorf("content = %q", resp.Choices[0].Message.Content)
	}
	if want := "p:other/m1 p:high/m1 p:low/m1"; strings.Join(attempts, " ") != want {
		t.Errorf("attempts = %v, want %s", attempts, want)
	}
	h := high.seen()
	if len(h) != 2 || h[0].Auth != "Bearer key-other" || h[1].Auth != "Bearer key-high-0002" {
		t.Errorf("high endpoint saw %+v", h)
	}
	if l := low.seen(); len(l) != 1 || l[0].Auth != "Bearer key-low-0001" || l[0].Path != "/chat/completions" {
		t.Errorf("low endpoint saw %+v", l)
	}
}

func TestResponsesAccountWithRefreshedAuthProfile(t *testing.T) {
	root := t.TempDir()
	stream, err := os.ReadFile(filepath.Join("..", "..", "llm", "testdata", "responses", "tool_call.sse"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.PostForm.Get("refresh_token") != "rt-1" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"access_token":"at-2","refresh_token":"rt-2","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)
	prov := newProvider(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("Authorization") != "Bearer at-2" {
			status(401, "invalid_api_key")(w, r, 0)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(stream)
	})
	os.MkdirAll(filepath.Join(root, config.AuthProfileDir), 0o700)
	profile := config.AuthProfilePath(root, "work")
	os.WriteFile(profile, []byte(`{"type":"oauth","access_token":"at-1","refresh_token":"rt-1","token_url":"`+tokens.URL+`"}`), 0o600)
	m, err := bind(t, root, `providers:
  openai:
    baseUrl: `+prov.URL+`/v1
    authProfile: work
    models: [gpt-4.1, gpt-4.1-mini]
    modelCapabilities:
      gpt-4.1: {transportProtocol: responses, responsesReasoning: {effort: medium}, maxOutputTokens: 2048, contextWindowTokens: 100000}
models:
  routes:
    default: {candidates: [openai/gpt-4.1]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := ask(m, "default")
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" || len(msg.ReasoningItems) != 1 ||
		msg.ReasoningItems[0].Producer != llm.ProducerID("openai", "") {
		t.Errorf("message = %+v", msg)
	}
	s := prov.seen()
	if len(s) != 2 || s[0].Auth != "Bearer at-1" || s[1].Auth != "Bearer at-2" || s[1].Path != "/v1/responses" {
		t.Fatalf("provider saw %+v", s)
	}
	b := s[1].Body
	if b["max_output_tokens"] != float64(2048) || b["reasoning"].(map[string]any)["effort"] != "medium" || b["input"] == nil {
		t.Errorf("responses body = %v", b)
	}
	f, err := llm.LoadAuthProfile(profile)
	if err != nil || f.AccessToken != "at-2" || f.RefreshToken != "rt-2" {
		t.Errorf("profile after refresh = %+v %v", f, err)
	}
	if rb, _ := m.Route("default"); rb.UsableInput != int(float64(100000)*defaultUtilization)-2048 {
		t.Errorf("usable input = %d", rb.UsableInput)
	}
}

func TestBindRefusesAMissingAuthProfile(t *testing.T) {
	_, err := bind(t, t.TempDir(), `providers:
  openai:
    baseUrl: https://api.openai.com/v1
    authProfile: nowhere
models:
  routes:
    default: {candidates: [openai/gpt-4.1]}
`, ModelsOptions{})
	if err == nil || !strings.Contains(err.Error(), "providers.openai") || !strings.Contains(err.Error(), "nowhere.json") {
		t.Fatalf("err = %v", err)
	}
}

func TestImageRequestSkipsTextOnlyCandidate(t *testing.T) {
	prov := newProvider(t, chatOK)
	m, err := bind(t, t.TempDir(), `providers:
  p:
    baseUrl: `+prov.URL+`
    models: [text, vision]
    modelCapabilities:
      text: {imageInput: false}
models:
  routes:
    default: {candidates: [p/text, p/vision]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, attempts, err := ask(m, "default", llm.Message{Role: "user", Content: "look", Images: []llm.Image{{MIME: "image/png", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	s := prov.seen()
	if len(s) != 1 || s[0].Body["model"] != "vision" || strings.Join(attempts, " ") != "p/text p/vision" {
		t.Errorf("provider saw %+v after attempts %v", s, attempts)
	}
	// A text request still goes to the first candidate.
	if _, _, err := ask(m, "default"); err != nil || prov.seen()[1].Body["model"] != "text" {
		t.Errorf("text request: %v %+v", err, prov.seen())
	}
}

func TestFailedRequestDiagnosticsFromEnv(t *testing.T) {
	root := t.TempDir()
	prov := newProvider(t, status(400, "context_length_exceeded"))
	yaml := `providers:
  p:
    baseUrl: ` + prov.URL + `
    apiKey: sk-config-secret-99
models:
  routes:
    default: {candidates: [p/m]}
`
	cfg, err := config.Decode([]byte(yaml), config.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, config.StateDir)
	o := Options{Project: &project.Project{Root: root, StateDir: state, Config: cfg}}
	if err := (&Options{Project: o.Project}).BackendsFromEnv(func(k string) (string, bool) { return "yes", k == EnvFailedRequestDiagnostics }); err == nil {
		t.Error("a value other than 1 was accepted")
	}
	if err := o.BackendsFromEnv(func(k string) (string, bool) { return "1", k == EnvFailedRequestDiagnostics }); err != nil || o.FailedRequests == nil {
		t.Fatalf("diagnostics not enabled: %v", err)
	}
	m, err := bind(t, root, yaml, ModelsOptions{FailedRequests: o.FailedRequests})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = ask(m, "default", llm.Message{Role: "user", Content: "my key sk-config-secret-99"})
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("err = %v", err)
	}
	docs, _ := filepath.Glob(filepath.Join(state, FailedRequestDiagnosticsDir, "*", "*.json"))
	if len(docs) != 1 {
		t.Fatalf("documents = %v", docs)
	}
	b, _ := os.ReadFile(docs[0])
	var doc map[string]any
	json.Unmarshal(b, &doc)
	if doc["cause"] != "context_length" || doc["provider"] != "p" || doc["status"] != float64(400) || strings.Contains(string(b), "sk-config-secret-99") {
		t.Errorf("document = %s", b)
	}
}

// TestAssistantRowsKeepReasoningItems: the encrypted reasoning of an
// assistant message survives its conversation row, so the next request to
// the producing account can replay it.
func TestAssistantRowsKeepReasoningItems(t *testing.T) {
	items := []llm.ReasoningItem{{ID: "rs_1", EncryptedContent: "enc", Producer: llm.ProducerID("openai", "work")}}
	row := conversations.Row{ID: "s:assistant:1", Kind: "assistant", Content: rawJSON(assistantContent{Text: "calling", ReasoningItems: items})}
	msgs := rowsToMessages([]conversations.Row{row})
	if len(msgs) != 1 || len(msgs[0].ReasoningItems) != 1 || msgs[0].ReasoningItems[0] != items[0] || msgs[0].Content != "calling" {
		t.Errorf("messages = %+v", msgs)
	}
	var plain map[string]any
	json.Unmarshal(rawJSON(assistantContent{Text: "x"}), &plain)
	if _, ok := plain["reasoning"]; !ok || plain["reasoning_items"] != nil {
		t.Errorf("row without items = %v", plain)
	}
}

// TestResponsesFailureBeforeOutputFailsOver: a Responses stream that ends
// in a rate-limit error event before any output is a 429 to the gateway,
// which moves on to the next account.
func TestResponsesFailureBeforeOutputFailsOver(t *testing.T) {
	limited, err := os.ReadFile(filepath.Join("..", "..", "llm", "testdata", "responses", "error_event.sse"))
	if err != nil {
		t.Fatal(err)
	}
	first := newProvider(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(limited)
	})
	second := newProvider(t, chatOK)
	m := bindTwoAccounts(t, first, second)
	resp, tr, err := m.router.Stream(context.Background(), &llm.ChatRequest{Model: routePrefix + "default", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
	if err != nil || resp.Choices[0].Message.Content != "fine" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if len(tr.Attempts) != 2 || tr.Attempts[0].Status != 429 || tr.Attempts[0].Provider != "p:a" || tr.Attempts[1].Provider != "p:b" {
		t.Errorf("attempts = %+v", tr.Attempts)
	}
	if s := first.seen(); len(s) != 1 || s[0].Path != "/responses" {
		t.Errorf("first account saw %+v", s)
	}
}

// Encrypted reasoning the first account cannot verify ends the call there:
// the next account is not tried, and the error says what to do.
func TestInvalidEncryptedContentDoesNotFailOver(t *testing.T) {
	first := newProvider(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"The encrypted content gAAA==DQ could not be verified.","type":"invalid_request_error","code":"invalid_encrypted_content"}}`))
	})
	second := newProvider(t, chatOK)
	m := bindTwoAccounts(t, first, second)
	_, tr, err := m.router.Stream(context.Background(), &llm.ChatRequest{Model: routePrefix + "default", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Code != llm.InvalidEncryptedContentCode || !strings.Contains(ae.Message, "start a new session") {
		t.Fatalf("err = %v", err)
	}
	if len(tr.Attempts) != 1 || tr.Attempts[0].Provider != "p:a" || len(second.seen()) != 0 {
		t.Errorf("attempts = %+v, second account saw %d requests", tr.Attempts, len(second.seen()))
	}
}

// A 401 that the account's own refresh did not cure moves on to the next
// account of the same candidate, but not to another candidate of the route.
func TestUnauthorizedMovesToTheNextAccount(t *testing.T) {
	for _, tc := range []struct {
		name, routes string
		want         []string // providers of the attempts
		ok           bool
	}{
		{name: "same candidate", routes: "[p/m]", want: []string{"p:a", "p:b"}, ok: true},
		{name: "another candidate", routes: "[q/m, p/m]", want: []string{"q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			denied := newProvider(t, status(401, "invalid_api_key"))
			good := newProvider(t, chatOK)
			m, err := bind(t, t.TempDir(), `providers:
  q: {baseUrl: `+denied.URL+`, apiKey: kq, models: [m]}
  p:
    accounts:
      a: {baseUrl: `+denied.URL+`, apiKey: ka, priority: 2, models: [m]}
      b: {baseUrl: `+good.URL+`, apiKey: kb, priority: 1, models: [m]}
models:
  routes:
    default: {candidates: `+tc.routes+`}
`, ModelsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			resp, tr, err := m.router.Stream(context.Background(), &llm.ChatRequest{Model: routePrefix + "default", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			var got []string
			for _, a := range tr.Attempts {
				got = append(got, a.Provider)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("attempts = %v, want %v", got, tc.want)
			}
			if tc.ok {
				if err != nil || resp.Choices[0].Message.Content != "fine" || tr.Attempts[0].Status != 401 {
					t.Fatalf("resp %+v err %v attempts %+v", resp, err, tr.Attempts)
				}
				return
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 401 || len(good.seen()) != 0 {
				t.Fatalf("err = %v; the other candidate's account saw %d requests", err, len(good.seen()))
			}
		})
	}
}

// bindTwoAccounts binds one route candidate p/m served by two accounts:
// first (priority, Responses protocol) then second (chat completions).
func bindTwoAccounts(t *testing.T, first, second *provider) *Models {
	t.Helper()
	m, err := bind(t, t.TempDir(), `providers:
  p:
    accounts:
      a: {baseUrl: `+first.URL+`, apiKey: ka, priority: 2, capabilities: {transportProtocol: responses}}
      b: {baseUrl: `+second.URL+`, apiKey: kb, priority: 1}
models:
  routes:
    default: {candidates: [p/m]}
`, ModelsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRequestTimeSettings: models.request_inactivity_ms decides when a
// provider that sends nothing counts as stalled: a short limit moves the
// call to the next candidate, a long one waits for the slow model.
// models.request_limit_ms bounds the whole call: a short one ends it.
func TestRequestTimeSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    string
		ms     int
		wantBy string // "" = the call fails
	}{
		{"short inactivity limit fails over", "request_inactivity_ms", 1000, "q/m1"},
		{"long inactivity limit waits", "request_inactivity_ms", 60000, "p/m1"},
		{"short call limit ends the call", "request_limit_ms", 1000, ""},
		{"long call limit waits", "request_limit_ms", 60000, "p/m1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
				select {
				case <-time.After(2500 * time.Millisecond):
					chatOK(w, r, n)
				case <-r.Context().Done():
				}
			})
			fast := newProvider(t, chatOK)
			m, err := bind(t, t.TempDir(), fmt.Sprintf(`providers:
  p: {baseUrl: %s, models: [m1]}
  q: {baseUrl: %s, models: [m1]}
models:
  %s: %d
  routes:
    default: {candidates: [p/m1, q/m1]}
`, slow.URL, fast.URL, tc.key, tc.ms), ModelsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			resp, attempts, err := ask(m, "default")
			if tc.wantBy == "" {
				if err == nil || len(fast.seen()) != 0 {
					t.Fatalf("err %v, fast provider saw %d: the call outlived its limit", err, len(fast.seen()))
				}
				return
			}
			if err != nil || resp.Choices[0].Message.Content != "fine" {
				t.Fatalf("err %v, response %+v", err, resp)
			}
			if attempts[len(attempts)-1] != tc.wantBy {
				t.Errorf("attempts %v, want the answer from %s", attempts, tc.wantBy)
			}
			if len(slow.seen()) != 1 {
				t.Errorf("the slow provider saw %d requests", len(slow.seen()))
			}
		})
	}
}
