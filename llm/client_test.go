package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

func newClient(t *testing.T) (*llm.Client, *llmtest.Server) {
	srv := llmtest.NewServer(t)
	return llm.NewClient(llm.ClientOptions{BaseURL: srv.URL, APIKey: "sk-test"}), srv
}

func userRequest(text string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "user", Content: text}}}
}

func TestChatStreamAccumulatesTextAndToolCalls(t *testing.T) {
	tests := []struct {
		name   string
		repeat bool
	}{{"names once", false}, {"names repeated in every chunk", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newClient(t)
			srv.Enqueue("m", llmtest.Reply{
				Content:   "Looking that up.",
				Reasoning: "need the tool",
				ToolCalls: []llm.ToolCall{
					{ID: "call_1", Function: llm.FunctionCall{Name: "search_mail", Arguments: `{"query":"invoice"}`}},
					{ID: "call_2", Function: llm.FunctionCall{Name: "read_event", Arguments: `{"uid":"x"}`}},
				},
				RepeatToolNames: tc.repeat,
			})
			var deltas []string
			resp, err := c.ChatStream(context.Background(), userRequest("hi"), func(ch llm.StreamChunk) error {
				for _, c := range ch.Choices {
					if c.Delta.Content != "" {
						deltas = append(deltas, c.Delta.Content)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			msg := resp.Choices[0].Message
			if msg.Content != "Looking that up." || strings.Join(deltas, "") != msg.Content || len(deltas) < 2 {
				t.Errorf("content = %q from deltas %q", msg.Content, deltas)
			}
			if msg.ReasoningContent != "need the tool" {
				t.Errorf("reasoning = %q", msg.ReasoningContent)
			}
			if len(msg.ToolCalls) != 2 {
				t.Fatalf("tool calls = %+v", msg.ToolCalls)
			}
			if got := msg.ToolCalls[0]; got.ID != "call_1" || got.Function.Name != "search_mail" || got.Function.Arguments != `{"query":"invoice"}` {
				t.Errorf("first call = %+v", got)
			}
			if got := msg.ToolCalls[1]; got.Function.Name != "read_event" || got.Function.Arguments != `{"uid":"x"}` {
				t.Errorf("second call = %+v", got)
			}
			if resp.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("finish = %q", resp.Choices[0].FinishReason)
			}
			if resp.Usage == nil || resp.Usage.CompletionTokens == 0 {
				t.Errorf("usage = %+v, want the include_usage chunk", resp.Usage)
			}
			req := srv.Requests()[0]
			if req.Header.Get("Authorization") != "Bearer sk-test" || !req.Stream {
				t.Errorf("request header/stream = %v %v", req.Header.Get("Authorization"), req.Stream)
			}
		})
	}
}

func TestChatStreamTruncatedAndErrors(t *testing.T) {
	c, srv := newClient(t)
	srv.Enqueue("m", llmtest.Reply{Content: "abcdefghij", Chunks: 5, DropAfter: 2})
	resp, err := c.ChatStream(context.Background(), userRequest("x"), nil)
	if err == nil {
		t.Fatal("dropped stream reported no error")
	}
	if resp == nil || resp.Choices[0].Message.Content != "abcd" {
		t.Errorf("partial content = %+v, want the two chunks received", resp)
	}

	srv.Enqueue("m", llmtest.Reply{Status: 429, ErrorMessage: "slow down"})
	_, err = c.ChatStream(context.Background(), userRequest("x"), nil)
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Message != "slow down" {
		t.Fatalf("err = %v, want APIError 429 slow down", err)
	}
}

func TestChatAndAttribution(t *testing.T) {
	c, srv := newClient(t)
	srv.Enqueue("m", llmtest.Reply{Content: "plain answer"})
	ctx := llm.WithAttribution(context.Background(), llm.Attribution{Service: "mail-mirror", Action: "triage"})
	resp, err := c.Chat(ctx, userRequest("q"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "plain answer" {
		t.Errorf("content = %q", resp.Choices[0].Message.Content)
	}
	h := srv.Requests()[0].Header
	if h.Get("X-Usage-Service") != "mail-mirror" || h.Get("X-Usage-Action") != "triage" {
		t.Errorf("attribution headers = %q %q", h.Get("X-Usage-Service"), h.Get("X-Usage-Action"))
	}
	if srv.Requests()[0].Stream {
		t.Error("Chat sent stream=true")
	}
}

func TestEmbed(t *testing.T) {
	c, srv := newClient(t)
	e := &llm.Embedder{Client: c, Model: "local-embed", Attribution: llm.Attribution{Service: "documents-mcp", Action: "search-embed"}}
	vecs, err := e.Embed(context.Background(), []string{"alpha", "beta", "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || len(vecs[0]) != srv.EmbeddingDim {
		t.Fatalf("vectors = %d × %d", len(vecs), len(vecs[0]))
	}
	for i := range vecs[0] {
		if vecs[0][i] != vecs[2][i] {
			t.Fatal("equal inputs gave different vectors")
		}
	}
	if srv.Requests()[0].Header.Get("X-Usage-Action") != "search-embed" {
		t.Error("embedder did not attribute its call")
	}
}

func TestEmbedPartial(t *testing.T) {
	// The server answers out of order and leaves out input 1.
	var answer atomic.Value
	answer.Store(`{"data":[{"index":2,"embedding":[0,1]},{"index":0,"embedding":[1,0]}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(answer.Load().(string))) }))
	t.Cleanup(srv.Close)
	c := llm.NewClient(llm.ClientOptions{BaseURL: srv.URL + "/v1/"})
	if c.BaseURL() != srv.URL+"/v1" {
		t.Errorf("BaseURL() = %q", c.BaseURL())
	}
	texts := []string{"a", "b", "c"}
	if _, err := c.Embed(context.Background(), "m", texts); err == nil || !strings.Contains(err.Error(), "2 vectors for 3 inputs") {
		t.Errorf("strict Embed of a partial answer: err = %v", err)
	}
	e := &llm.Embedder{Client: c, Model: "m", Partial: true}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || vecs[0][0] != 1 || vecs[1] != nil || vecs[2][1] != 1 {
		t.Errorf("partial vectors = %v", vecs)
	}
	tests := []struct{ name, answer, want string }{
		{"index out of range", `{"data":[{"index":5,"embedding":[1]}]}`, "bad or repeated index 5"},
		{"repeated index", `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, "bad or repeated index 0"},
		{"more vectors than inputs", `{"data":[{"index":0},{"index":1},{"index":2},{"index":3}]}`, "4 vectors for 3 inputs"},
	}
	for _, tc := range tests {
		answer.Store(tc.answer)
		if _, err := c.EmbedPartial(context.Background(), "m", texts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestUsageTokensNormalises(t *testing.T) {
	ds := &llm.Usage{PromptTokens: 100, CompletionTokens: 20, PromptCacheHitTokens: 60, PromptCacheMissTokens: 40}
	if got := ds.Tokens(); got != (llm.Tokens{Input: 40, Output: 20, CacheRead: 60}) {
		t.Errorf("DeepSeek usage = %+v", got)
	}
	oa := &llm.Usage{PromptTokens: 100, CompletionTokens: 5}
	oa.PromptTokensDetails = &struct {
		CachedTokens int `json:"cached_tokens"`
	}{CachedTokens: 30}
	if got := oa.Tokens(); got != (llm.Tokens{Input: 70, Output: 5, CacheRead: 30}) {
		t.Errorf("OpenAI usage = %+v", got)
	}
	if got := (*llm.Usage)(nil).Tokens(); got != (llm.Tokens{}) {
		t.Errorf("nil usage = %+v", got)
	}
}

func TestReadSSE(t *testing.T) {
	var got []string
	err := llm.ReadSSE(strings.NewReader(": comment\n\ndata: a\ndata: b\n\nevent: x\ndata: c\n\ndata: [DONE]\n\n"), func(d []byte) error {
		got = append(got, string(d))
		return nil
	})
	if err != nil || strings.Join(got, "|") != "a\nb|c" {
		t.Fatalf("events = %q, err = %v", got, err)
	}
	if err := llm.ReadSSE(strings.NewReader("data: a\n\n"), func([]byte) error { return nil }); !errors.Is(err, llm.ErrStreamTruncated) {
		t.Fatalf("missing [DONE]: err = %v", err)
	}
}
