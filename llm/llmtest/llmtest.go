// Package llmtest serves a scripted OpenAI-compatible model provider on
// loopback, the test double for every model-driven test: streamed and plain
// chat completions, tool calls, embeddings, usage, injected HTTP errors,
// delays, dropped connections and providers that refuse streaming.
//
// It is a test double of an external provider and never a production default.
package llmtest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// Reply scripts one answer of the provider.
type Reply struct {
	// Status, when not 0 or 200, answers with an OpenAI error object and this
	// HTTP status; ErrorMessage is its message, ErrorCode and ErrorType its
	// structured code and type (type default "scripted_error"), ErrorParam
	// the request parameter it names.
	Status       int
	ErrorMessage string
	ErrorCode    string
	ErrorType    string
	ErrorParam   string
	// RetryAfter, when set, is the Retry-After header of the error answer.
	RetryAfter string

	Content   string
	Reasoning string
	ToolCalls []llm.ToolCall
	// Usage defaults to token counts derived from the request and reply.
	Usage *llm.Usage

	// Delay waits before the response headers (the request context still cancels it).
	Delay time.Duration
	// Chunks splits Content into this many stream chunks (default 3).
	Chunks int
	// ChunkDelay waits between stream chunks.
	ChunkDelay time.Duration
	// DropAfter, when > 0 on a stream, closes the connection after that many
	// content chunks without [DONE]. On a non-stream reply any value > 0 drops
	// the connection after the headers, mid-body.
	DropAfter int
	// DropBeforeHeaders closes the connection without any response.
	DropBeforeHeaders bool
	// RejectStream answers a stream request with 400 "streaming is not
	// supported", its error naming the "stream" param as OpenAI's does.
	RejectStream bool
	// IgnoreStream answers a stream request with a plain JSON completion, as
	// some servers do.
	IgnoreStream bool
	// RepeatToolNames sends the id and name of a tool call in every chunk, a
	// quirk of some servers.
	RepeatToolNames bool
	// Hold, when set, blocks after the first stream chunk until it is closed
	// (or the request is cancelled): a stream that is visibly in progress.
	Hold chan struct{}
}

// Request is what the provider received.
type Request struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
	// Model and Stream are read from Body.
	Model  string
	Stream bool
	At     time.Time
}

// Server is a scripted provider.
type Server struct {
	// URL is the base URL including /v1.
	URL string
	// EmbeddingDim is the dimension of generated embeddings (default 8).
	EmbeddingDim int
	// ContextWindow, when > 0, is the model's context in tokens: a chat
	// request whose prompt (a quarter of its body's bytes) plus max_tokens
	// exceeds it is refused with 400 context_length_exceeded, as OpenAI
	// does, before any script is consumed. Set it before the first request.
	ContextWindow int

	srv      *httptest.Server
	mu       sync.Mutex
	queues   map[string][]Reply
	fallback func(Request) Reply
	requests []Request
}

// NewServer starts a provider on 127.0.0.1 and stops it when t ends. With no
// script, chat requests get the reply "ok".
func NewServer(t testing.TB) *Server {
	s := &Server{queues: map[string][]Reply{}, EmbeddingDim: 8}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and drops open connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Enqueue scripts replies, answered in order, to requests for the upstream
// model name model ("" matches any model without its own queue).
func (s *Server) Enqueue(model string, replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[model] = append(s.queues[model], replies...)
}

// Handle sets the reply for requests no queue answers.
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	for _, key := range []string{req.Model, ""} {
		if q := s.queues[key]; len(q) > 0 {
			s.queues[key] = q[1:]
			return q[0]
		}
	}
	if s.fallback != nil {
		return s.fallback(req)
	}
	return Reply{Content: "ok"}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, At: time.Now()}
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	req.Model, _ = req.Body["model"].(string)
	req.Stream, _ = req.Body["stream"].(bool)
	if s.ContextWindow > 0 && strings.HasSuffix(req.Path, "/chat/completions") {
		maxTokens, _ := req.Body["max_tokens"].(float64)
		if prompt := len(raw) / 4; prompt+int(maxTokens) > s.ContextWindow {
			s.mu.Lock()
			s.requests = append(s.requests, req)
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(llm.ErrorResponse{Error: llm.ErrorBody{Type: "invalid_request_error", Code: "context_length_exceeded",
				Message: fmt.Sprintf("This model's maximum context length is %d tokens; the request has %d.", s.ContextWindow, prompt+int(maxTokens))}})
			return
		}
	}
	reply := s.next(req)

	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.DropBeforeHeaders {
		hijackClose(w)
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		w.WriteHeader(reply.Status)
		body := llm.ErrorBody{Message: cmpOr(reply.ErrorMessage, http.StatusText(reply.Status)),
			Type: cmpOr(reply.ErrorType, "scripted_error"), Code: reply.ErrorCode}
		if reply.ErrorParam != "" {
			body.Param = reply.ErrorParam
		}
		json.NewEncoder(w).Encode(llm.ErrorResponse{Error: body})
		return
	}
	switch {
	case strings.HasSuffix(req.Path, "/embeddings"):
		s.serveEmbeddings(w, req)
	case strings.HasSuffix(req.Path, "/chat/completions"):
		if req.Stream && reply.RejectStream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(llm.ErrorResponse{Error: llm.ErrorBody{Message: "streaming is not supported by this model",
				Type: "invalid_request_error", Code: "unsupported_value", Param: "stream"}})
			return
		}
		if req.Stream && !reply.IgnoreStream {
			s.serveStream(w, r, req, reply)
			return
		}
		s.serveCompletion(w, req, reply)
	default:
		writeError(w, http.StatusNotFound, "no route "+req.Path)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(llm.ErrorResponse{Error: llm.ErrorBody{Message: msg, Type: "scripted_error"}})
}

func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
}

func usageFor(req Request, reply Reply) *llm.Usage {
	if reply.Usage != nil {
		return reply.Usage
	}
	out := len(strings.Fields(reply.Content)) + 1
	for _, tc := range reply.ToolCalls {
		out += len(tc.Function.Arguments)/4 + 1
	}
	in := len(req.Raw)/4 + 1
	return &llm.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
}

func (s *Server) serveCompletion(w http.ResponseWriter, req Request, reply Reply) {
	msg := llm.Message{Role: "assistant", Content: reply.Content, ReasoningContent: reply.Reasoning, ToolCalls: reply.ToolCalls}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	body, _ := json.Marshal(llm.ChatResponse{
		ID: "chatcmpl-scripted", Object: "chat.completion", Created: time.Now().Unix(), Model: req.Model,
		Choices: []llm.Choice{{Message: msg, FinishReason: finish}},
		Usage:   usageFor(req, reply),
	})
	w.Header().Set("Content-Type", "application/json")
	if reply.DropAfter > 0 {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		hijackClose(w)
		return
	}
	w.Write(body)
}

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	base := llm.StreamChunk{ID: "chatcmpl-scripted", Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: req.Model}
	send := func(c llm.StreamChunk) bool {
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return true
		}
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	chunk := func(d llm.Delta, finish *string) llm.StreamChunk {
		c := base
		c.Choices = []llm.StreamChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	if !send(chunk(llm.Delta{Role: "assistant"}, nil)) {
		return
	}
	if reply.Reasoning != "" && !send(chunk(llm.Delta{ReasoningContent: reply.Reasoning}, nil)) {
		return
	}
	parts := split(reply.Content, max(reply.Chunks, 1))
	if reply.Chunks == 0 {
		parts = split(reply.Content, 3)
	}
	for i, p := range parts {
		if reply.DropAfter > 0 && i == reply.DropAfter {
			hijackClose(w)
			return
		}
		if !wait(reply.ChunkDelay) || !send(chunk(llm.Delta{Content: p}, nil)) {
			return
		}
		if i == 0 && reply.Hold != nil {
			select {
			case <-reply.Hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	for i, tc := range reply.ToolCalls {
		idx := i
		args := split(tc.Function.Arguments, 2)
		for j, a := range args {
			d := llm.ToolCall{Index: &idx, Function: llm.FunctionCall{Arguments: a}}
			if j == 0 || reply.RepeatToolNames {
				d.ID, d.Type, d.Function.Name = tc.ID, "function", tc.Function.Name
			}
			if !wait(reply.ChunkDelay) || !send(chunk(llm.Delta{ToolCalls: []llm.ToolCall{d}}, nil)) {
				return
			}
		}
	}
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !send(chunk(llm.Delta{}, &finish)) {
		return
	}
	if opts, _ := req.Body["stream_options"].(map[string]any); opts != nil && opts["include_usage"] == true {
		c := base
		c.Choices = []llm.StreamChoice{}
		c.Usage = usageFor(req, reply)
		if !send(c) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flusher.Flush()
}

// split cuts s into at most n non-empty pieces on rune boundaries.
func split(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return nil
	}
	n = min(n, len(runes))
	var out []string
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, req Request) {
	var inputs []string
	switch in := req.Body["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, v := range in {
			str, _ := v.(string)
			inputs = append(inputs, str)
		}
	}
	resp := llm.EmbeddingsResponse{Object: "list", Model: req.Model}
	tokens := 0
	for i, in := range inputs {
		resp.Data = append(resp.Data, llm.Embedding{Index: i, Object: "embedding", Embedding: Vector(in, s.EmbeddingDim)})
		tokens += len(strings.Fields(in)) + 1
	}
	resp.Usage = &llm.Usage{PromptTokens: tokens, TotalTokens: tokens}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// Vector is the deterministic unit vector the server returns for text:
// equal texts get equal vectors, so tests can predict similarity.
func Vector(text string, dim int) []float32 {
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		h := sha256.Sum256([]byte(fmt.Sprintf("%d:%s", i, text)))
		x := float64(binary.LittleEndian.Uint32(h[:4]))/math.MaxUint32*2 - 1
		v[i] = float32(x)
		norm += x * x
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(norm))
	}
	return v
}
