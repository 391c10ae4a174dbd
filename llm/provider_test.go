package llm_test

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
)

// wireReply is one scripted provider answer.
type wireReply struct {
	status int
	ctype  string
	body   string
	// hold keeps the connection open after the body until the test ends,
	// as a server that does not close after its terminal event.
	hold bool
}

type wireRequest struct {
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

// wireServer is a loopback provider answering with scripted raw bodies in
// the Responses wire formats.
type wireServer struct {
	*httptest.Server
	mu      sync.Mutex
	replies []wireReply
	reqs    []wireRequest
	release chan struct{}
}

func newWireServer(t *testing.T, replies ...wireReply) *wireServer {
	s := &wireServer{replies: replies, release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		s.mu.Lock()
		s.reqs = append(s.reqs, wireRequest{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: b})
		if len(s.replies) == 0 {
			s.mu.Unlock()
			http.Error(w, `{"error":{"message":"no scripted reply"}}`, http.StatusTeapot)
			return
		}
		rep := s.replies[0]
		s.replies = s.replies[1:]
		s.mu.Unlock()
		w.Header().Set("Content-Type", rep.ctype)
		w.WriteHeader(cmpInt(rep.status, http.StatusOK))
		io.WriteString(w, rep.body)
		w.(http.Flusher).Flush()
		if rep.hold {
			select {
			case <-s.release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { close(s.release); s.Close() })
	return s
}

func (s *wireServer) requests() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireRequest(nil), s.reqs...)
}

func cmpInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func fixture(t testing.TB, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sse(t testing.TB, name string) wireReply {
	return wireReply{ctype: "text/event-stream", body: fixture(t, name)}
}

// providerClient is a Client whose requests go through a ProviderTransport
// to srv.
func providerClient(srv *wireServer, o llm.ProviderTransportOptions) *llm.Client {
	o.BaseURL = srv.URL + "/v1"
	if o.Name == "" {
		o.Name = "openai:main"
	}
	return llm.NewClient(llm.ClientOptions{BaseURL: "http://provider.invalid/v1", HTTPClient: &http.Client{Transport: llm.NewProviderTransport(o)}})
}

func protocolModels(p llm.Protocol, effort string) func(string) llm.ModelWire {
	return func(string) llm.ModelWire { return llm.ModelWire{Protocol: p, ReasoningEffort: effort} }
}

func weatherRequest() *llm.ChatRequest {
	return &llm.ChatRequest{
		Model:     "gpt-4.1",
		MaxTokens: 500,
		Messages: []llm.Message{
			{Role: "system", Content: "You are terse."},
			{Role: "user", Content: "Weather in Paris?"},
		},
		Tools: []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: "get_weather", Description: "Weather now",
			Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}}},
	}
}

func TestResponsesProtocolsStreamToolCalls(t *testing.T) {
	for _, tc := range []struct {
		proto llm.Protocol
		hold  bool
	}{{llm.ProtocolResponses, false}, {llm.ProtocolCodex, true}} {
		t.Run(string(tc.proto), func(t *testing.T) {
			rep := sse(t, "tool_call.sse")
			rep.hold = tc.hold // Codex: the answer is known at response.completed, before EOF
			srv := newWireServer(t, rep)
			producer := llm.ProducerID("openai", "main")
			path := filepath.Join(t.TempDir(), "codex.json")
			os.WriteFile(path, []byte(`{"type":"token","token":"sk-live-123456","account_id":"acct-9"}`), 0o600)
			c := providerClient(srv, llm.ProviderTransportOptions{Credentials: &llm.AuthProfile{Name: "codex", Path: path},
				Models: protocolModels(tc.proto, "high"), Producer: producer, CacheKeySeed: "/srv/project"})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var deltas []string
			resp, err := c.ChatStream(ctx, weatherRequest(), func(ch llm.StreamChunk) error {
				for _, c := range ch.Choices {
					deltas = append(deltas, c.Delta.Content)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			msg := resp.Choices[0].Message
			if msg.Content != "Checking Paris." || strings.Join(deltas, "") != msg.Content {
				t.Errorf("content = %q from %q", msg.Content, deltas)
			}
			if msg.ReasoningContent != "Need the weather." {
				t.Errorf("reasoning = %q", msg.ReasoningContent)
			}
			if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_unLAR8MvFNptuiZK6K6HCy5k" ||
				msg.ToolCalls[0].Function.Name != "get_weather" || msg.ToolCalls[0].Function.Arguments != `{"location":"Paris, France"}` {
				t.Errorf("tool calls = %+v", msg.ToolCalls)
			}
			if want := []llm.ReasoningItem{{ID: "rs_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476", EncryptedContent: "gAAAAABoBr_KenC-encrypted-blob", Producer: producer}}; fmt.Sprint(msg.ReasoningItems) != fmt.Sprint(want) {
				t.Errorf("reasoning items = %+v", msg.ReasoningItems)
			}
			if resp.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("finish = %q", resp.Choices[0].FinishReason)
			}
			if tok := resp.Usage.Tokens(); tok != (llm.Tokens{Input: 163, Output: 23, CacheRead: 128}) {
				t.Errorf("tokens = %+v", tok)
			}
			if resp.ID != "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654" || resp.Model != "gpt-4.1-2025-04-14" {
				t.Errorf("id/model = %q %q", resp.ID, resp.Model)
			}

			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d upstream requests", len(reqs))
			}
			r := reqs[0]
			if r.path != "/v1/responses" || r.header.Get("Authorization") != "Bearer sk-live-123456" {
				t.Errorf("path %s auth %q", r.path, r.header.Get("Authorization"))
			}
			b := r.body
			tools, _ := b["tools"].([]any)
			if len(tools) != 1 {
				t.Fatalf("tools = %v", b["tools"])
			}
			tool := tools[0].(map[string]any)
			if tool["type"] != "function" || tool["name"] != "get_weather" || tool["function"] != nil || tool["parameters"] == nil {
				t.Errorf("tool layout is not flat: %v", tool)
			}
			if b["tool_choice"] != "auto" || b["parallel_tool_calls"] != false || b["stream"] != true || b["store"] != false {
				t.Errorf("tool_choice %v parallel %v stream %v store %v", b["tool_choice"], b["parallel_tool_calls"], b["stream"], b["store"])
			}
			if b["instructions"] != "You are terse." || b["messages"] != nil || b["max_tokens"] != nil {
				t.Errorf("instructions %v messages %v max_tokens %v", b["instructions"], b["messages"], b["max_tokens"])
			}
			if eff := b["reasoning"].(map[string]any)["effort"]; eff != "high" {
				t.Errorf("reasoning effort = %v", eff)
			}
			input := b["input"].([]any)
			if first := input[0].(map[string]any); len(input) != 1 || first["role"] != "user" ||
				first["content"].([]any)[0].(map[string]any)["text"] != "Weather in Paris?" {
				t.Errorf("input = %v", input)
			}
			switch tc.proto {
			case llm.ProtocolResponses:
				if b["max_output_tokens"] != float64(500) || b["prompt_cache_key"] != nil || r.header.Get("chatgpt-account-id") != "" {
					t.Errorf("max_output_tokens %v prompt_cache_key %v", b["max_output_tokens"], b["prompt_cache_key"])
				}
			case llm.ProtocolCodex:
				key, _ := b["prompt_cache_key"].(string)
				if b["max_output_tokens"] != nil || len(key) != 32 || r.header.Get("session_id") != key || r.header.Get("chatgpt-account-id") != "acct-9" {
					t.Errorf("codex: max_output_tokens %v prompt_cache_key %q session_id %q", b["max_output_tokens"], key, r.header.Get("session_id"))
				}
			}
		})
	}
}

func TestResponsesNonStreamed(t *testing.T) {
	t.Run("responses answers JSON", func(t *testing.T) {
		srv := newWireServer(t, wireReply{ctype: "application/json", body: fixture(t, "response.json")})
		c := providerClient(srv, llm.ProviderTransportOptions{Models: protocolModels(llm.ProtocolResponses, "")})
		resp, err := c.Chat(context.Background(), weatherRequest())
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if msg.Content != "Here you go." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_json1" ||
			msg.ToolCalls[0].Function.Arguments != `{"path":"README.md"}` || resp.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("message = %+v finish %q", msg, resp.Choices[0].FinishReason)
		}
		if resp.Usage.PromptTokens != 36 || resp.Usage.CompletionTokens != 87 {
			t.Errorf("usage = %+v", resp.Usage)
		}
		if b := srv.requests()[0].body; b["stream"] != nil || b["reasoning"] != nil || b["include"] != nil {
			t.Errorf("stream %v reasoning %v include %v", b["stream"], b["reasoning"], b["include"])
		}
	})
	t.Run("codex always streams and completes the deltas from the final output", func(t *testing.T) {
		rep := sse(t, "text_only.sse")
		rep.hold = true
		srv := newWireServer(t, rep)
		c := providerClient(srv, llm.ProviderTransportOptions{Models: protocolModels(llm.ProtocolCodex, "")})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		resp, err := c.Chat(ctx, &llm.ChatRequest{Model: "gpt-5-codex", Messages: []llm.Message{{Role: "user", Content: "go"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != "All done." || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("content %q finish %q", got, resp.Choices[0].FinishReason)
		}
		if b := srv.requests()[0].body; b["stream"] != true || b["include"] == nil {
			t.Errorf("codex request stream %v include %v", b["stream"], b["include"])
		}
	})
}

func TestResponsesTerminalFailures(t *testing.T) {
	truncated := fixture(t, "tool_call.sse")
	truncated = truncated[:strings.Index(truncated, "event: response.completed")]
	tests := []struct {
		name, body string
		code       string // APIError code
		status     int    // its HTTP status: a failure before output is an HTTP error, later ones are in-band (0)
		cause      string
		finish     string // when the call succeeds
	}{
		{name: "response.failed", body: fixture(t, "failed.sse"), code: "context_length_exceeded", status: 400, cause: "context_length"},
		{name: "error event", body: fixture(t, "error_event.sse"), code: "rate_limit_exceeded", status: 429, cause: "rate_limit"},
		{name: "no terminal event after output", body: truncated, code: "protocol_error", cause: "protocol"},
		{name: "no output at all", body: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n", code: "protocol_error", status: 502, cause: "protocol"},
		{name: "response.incomplete", body: fixture(t, "incomplete.sse"), finish: "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t, wireReply{ctype: "text/event-stream", body: tc.body})
			rec := &failures{}
			c := providerClient(srv, llm.ProviderTransportOptions{Models: protocolModels(llm.ProtocolResponses, ""), Failures: rec})
			resp, err := c.ChatStream(context.Background(), weatherRequest(), nil)
			if tc.finish != "" {
				if err != nil || resp.Choices[0].FinishReason != tc.finish {
					t.Fatalf("err %v finish %q", err, resp.Choices[0].FinishReason)
				}
				if len(rec.all()) != 0 {
					t.Errorf("a finished call was recorded as failed: %+v", rec.all())
				}
				return
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.status {
				t.Fatalf("err = %#v, want code %s status %d", err, tc.code, tc.status)
			}
			got := rec.all()
			if len(got) != 1 || got[0].Cause != tc.cause || got[0].Provider != "openai:main" || got[0].Endpoint != "/responses" || len(got[0].Body) == 0 {
				t.Errorf("recorded failures = %+v", got)
			}
		})
	}
}

type failures struct {
	mu sync.Mutex
	fs []llm.FailedRequest
}

func (f *failures) RecordFailure(r llm.FailedRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fs = append(f.fs, r)
}

func (f *failures) all() []llm.FailedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llm.FailedRequest(nil), f.fs...)
}

func TestResponsesReplayKeepsOnlyTheProducersReasoning(t *testing.T) {
	mine, other := llm.ProducerID("openai", "main"), llm.ProducerID("openai", "backup")
	req := &llm.ChatRequest{Model: "gpt-4.1", Messages: []llm.Message{
		{Role: "system", Content: "rules"},
		{Role: "user", Content: "look", Images: []llm.Image{{MIME: "image/png", Data: []byte("PNGDATA")}}},
		{Role: "assistant", Content: "calling", ReasoningItems: []llm.ReasoningItem{
			{ID: "rs_mine", EncryptedContent: "enc-mine", Producer: mine},
			{ID: "rs_other", EncryptedContent: "enc-other", Producer: other},
		}, ToolCalls: []llm.ToolCall{{ID: "call_1", Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: `{}`}}}},
		{Role: "tool", ToolCallID: "call_1", Content: "result"},
		{Role: "system", Content: "late note"},
	}}
	b, err := llm.ResponsesBody(req, llm.ResponsesOptions{Protocol: llm.ProtocolResponses, Producer: mine})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Instructions string           `json:"instructions"`
		Input        []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range body.Input {
		kinds = append(kinds, fmt.Sprintf("%v/%v/%v/%v", it["type"], it["role"], it["id"], it["call_id"]))
	}
	want := []string{"message/user/<nil>/<nil>", "reasoning/<nil>/rs_mine/<nil>", "message/assistant/<nil>/<nil>",
		"function_call/<nil>/<nil>/call_1", "function_call_output/<nil>/<nil>/call_1", "message/developer/<nil>/<nil>"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("input items\n got %v\nwant %v", kinds, want)
	}
	if body.Instructions != "rules" {
		t.Errorf("instructions = %q", body.Instructions)
	}
	if img := body.Input[0]["content"].([]any)[1].(map[string]any); img["type"] != "input_image" || img["image_url"] != "data:image/png;base64,UE5HREFUQQ==" {
		t.Errorf("image part = %v", img)
	}
	if strings.Contains(string(b), "enc-other") {
		t.Error("another account's encrypted reasoning was replayed")
	}
}

func TestProviderTransportAdmission(t *testing.T) {
	forced := weatherRequest()
	forced.ToolChoice = map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
	withImage := weatherRequest()
	withImage.Messages[1].Images = []llm.Image{{MIME: "image/png", Data: []byte("x")}}
	tests := []struct {
		name string
		wire llm.ModelWire
		req  *llm.ChatRequest
		want string // "" admitted
	}{
		{"tools to a toolless model", llm.ModelWire{NoTools: true}, weatherRequest(), "toolsMode: none"},
		{"image to a text-only model", llm.ModelWire{NoImages: true}, withImage, "imageInput: false"},
		{"forced tool without exclusive support", llm.ModelWire{}, forced, "exclusiveToolChoiceSupport: false"},
		{"forced tool with exclusive support", llm.ModelWire{ExclusiveToolChoice: true}, forced, ""},
		{"image to an image model", llm.ModelWire{}, withImage, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t, wireReply{ctype: "application/json", body: `{"id":"c","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`})
			c := providerClient(srv, llm.ProviderTransportOptions{Models: func(string) llm.ModelWire { return tc.wire }})
			_, err := c.Chat(context.Background(), tc.req)
			n := len(srv.requests())
			if tc.want == "" {
				if err != nil || n != 1 {
					t.Fatalf("err %v, %d requests", err, n)
				}
				return
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != llm.IncapableCode || !strings.Contains(ae.Message, tc.want) || n != 0 {
				t.Errorf("err = %v (%d requests), want a 409 naming %q and no request", err, n, tc.want)
			}
		})
	}
}

func TestProviderTransportCapsChatOutputTokens(t *testing.T) {
	for _, tc := range []struct{ asked, limit, want int }{{0, 4096, 4096}, {9000, 4096, 4096}, {1000, 4096, 1000}, {700, 0, 700}} {
		srv := newWireServer(t, wireReply{ctype: "application/json", body: `{"id":"c","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`})
		c := providerClient(srv, llm.ProviderTransportOptions{Models: func(string) llm.ModelWire { return llm.ModelWire{MaxOutputTokens: tc.limit} }})
		req := userRequest("hi")
		req.MaxTokens = tc.asked
		if _, err := c.Chat(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		r := srv.requests()[0]
		if got, _ := r.body["max_tokens"].(float64); int(got) != tc.want || r.path != "/v1/chat/completions" {
			t.Errorf("asked %d limit %d: sent max_tokens %v to %s, want %d", tc.asked, tc.limit, r.body["max_tokens"], r.path, tc.want)
		}
	}
}

// TestProviderTransportForwardsChatBodiesExactly: a Chat Completions body
// within the model's limits reaches the provider byte for byte (a request
// plan's admitted bytes); only a body over the output limit is rewritten.
func TestProviderTransportForwardsChatBodiesExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		exact bool
	}{
		{"within the limit", `{"stream":false,  "model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi \u00e9"}]}`, true},
		{"over the limit", `{"stream":false,  "model":"m","max_tokens":9000,"messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t, wireReply{ctype: "application/json", body: `{"id":"c","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`})
			tr := llm.NewProviderTransport(llm.ProviderTransportOptions{Name: "p", BaseURL: srv.URL + "/v1", Models: func(string) llm.ModelWire { return llm.ModelWire{MaxOutputTokens: 4096} }})
			req, _ := http.NewRequest(http.MethodPost, "http://provider.invalid/v1/chat/completions", strings.NewReader(tc.body))
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%v %v", resp, err)
			}
			resp.Body.Close()
			r := srv.requests()[0]
			if got := string(r.raw) == tc.body; got != tc.exact {
				t.Errorf("sent %s: byte for byte %v, want %v", r.raw, got, tc.exact)
			}
			if !tc.exact && r.body["max_tokens"] != float64(4096) {
				t.Errorf("max_tokens = %v, want the limit", r.body["max_tokens"])
			}
		})
	}
}

func TestProviderTransportRefusesNonObjects(t *testing.T) {
	srv := newWireServer(t)
	tr := llm.NewProviderTransport(llm.ProviderTransportOptions{Name: "p", BaseURL: srv.URL, Models: func(string) llm.ModelWire { return llm.ModelWire{MaxOutputTokens: 10} }})
	for _, body := range []string{"null", "[1]", "{", `"x"`} {
		req, _ := http.NewRequest(http.MethodPost, "http://provider.invalid/v1/chat/completions", strings.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %v %v", body, resp, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// BenchmarkResponsesStream measures translating a Responses stream (text,
// reasoning and one tool call) into chat chunks.
func BenchmarkResponsesStream(b *testing.B) {
	data := fixture(b, "tool_call.sse")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var acc llm.Accumulator
		s := llm.ResponsesStream{Producer: "p"}
		if err := s.Run(strings.NewReader(data), func(c llm.StreamChunk) error { acc.Add(c); return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// Encrypted reasoning the provider cannot verify is a terminal failure,
// answered with what to do instead of the provider's message (which quotes
// the encrypted content): a 400 (so a gateway does not move on to another
// account) before output, an in-band error after it.
func TestInvalidEncryptedContentIsTerminal(t *testing.T) {
	const quoted = "The encrypted content gAAAsecret==DQ could not be verified."
	httpBody := `{"error":{"message":"` + quoted + `","type":"invalid_request_error","param":null,"code":"invalid_encrypted_content"}}`
	failed := "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":\"invalid_encrypted_content\",\"message\":\"" + quoted + "\"}}}\n\n"
	afterOutput := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"code\":\"invalid_encrypted_content\",\"message\":\"" + quoted + "\"}\n\n"
	for _, tc := range []struct {
		name   string
		reply  wireReply
		stream bool
		status int
	}{
		{name: "HTTP 400", reply: wireReply{status: 400, ctype: "application/json", body: httpBody}, stream: true, status: 400},
		{name: "response.failed before output", reply: wireReply{ctype: "text/event-stream", body: failed}, stream: true, status: 400},
		{name: "error event after output", reply: wireReply{ctype: "text/event-stream", body: afterOutput}, stream: true},
		{name: "codex, not streamed", reply: wireReply{ctype: "text/event-stream", body: failed}, status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireServer(t, tc.reply)
			rec := &failures{}
			c := providerClient(srv, llm.ProviderTransportOptions{Models: protocolModels(llm.ProtocolCodex, ""), Failures: rec})
			var err error
			if tc.stream {
				_, err = c.ChatStream(context.Background(), weatherRequest(), nil)
			} else {
				_, err = c.Chat(context.Background(), weatherRequest())
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Code != llm.InvalidEncryptedContentCode || ae.Status != tc.status {
				t.Fatalf("err = %#v, want code %s status %d", err, llm.InvalidEncryptedContentCode, tc.status)
			}
			if !strings.Contains(ae.Message, "start a new session") || strings.Contains(ae.Message, "gAAA") || !strings.HasPrefix(ae.Message, "openai:main: ") {
				t.Errorf("message %q: want what to do, the provider name, and none of the encrypted content", ae.Message)
			}
			if llm.FailureCause(ae.Status, ae.Code, ae.Type) != "invalid_encrypted_content" {
				t.Errorf("cause %q", llm.FailureCause(ae.Status, ae.Code, ae.Type))
			}
			if got := rec.all(); len(got) != 1 || got[0].Cause != "invalid_encrypted_content" {
				t.Errorf("recorded failures = %+v", got)
			}
		})
	}
}
