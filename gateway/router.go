package gateway

import (
	"context"
	"net/http"
	"sync"

	"github.com/agentstack/agentstack/llm"
)

// Router is the gateway's routing as a library: a Go caller in the same
// process sends a chat request through the same candidates, fallback,
// streaming rules and ledger as the HTTP routes, and gets back what the
// gateway did — the request's terminal record and every attempt — as return
// values, with no headers to smuggle them through. The HTTP handler and the
// Router share one implementation.
type Router struct {
	g      *Gateway
	client *llm.Client
}

// Trace is what the gateway did for one request.
type Trace struct {
	// Request is the terminal record (its provider, upstream model, status,
	// outcome, tokens and cost), as the ledger gets it.
	Request RequestRecord
	// Attempts are the candidates tried, in order.
	Attempts []AttemptRecord
}

// Router returns the gateway's router. Requests through it skip the bearer
// key check (they never leave the process).
func (g *Gateway) Router() *Router {
	h := http.NewServeMux()
	h.HandleFunc("POST /v1/chat/completions", g.handleChat)
	// The gateway times each candidate's attempt (so a stalled one fails
	// over); the client's own clocks would run across all attempts.
	return &Router{g: g, client: llm.NewClient(llm.ClientOptions{BaseURL: "http://gateway.in-process/v1",
		HTTPClient: &http.Client{Transport: InProcess(h)}, StreamInactivity: -1, CallTimeLimit: -1})}
}

// Do sends a chat request without streaming.
func (r *Router) Do(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResponse, *Trace, error) {
	ctx, tr := withTrace(ctx)
	resp, err := r.client.Chat(ctx, req)
	return resp, tr.done(), err
}

// Stream sends a chat request as a stream, calling onChunk for every chunk.
func (r *Router) Stream(ctx context.Context, req *llm.ChatRequest, onChunk func(llm.StreamChunk) error) (*llm.ChatResponse, *Trace, error) {
	ctx, tr := withTrace(ctx)
	resp, err := r.client.ChatStream(ctx, req, onChunk)
	return resp, tr.done(), err
}

// traceSink collects a request's records for its Router caller. The
// in-process transport returns only after the handler has finished, so
// every record is in before done is called.
type traceSink struct {
	mu sync.Mutex
	t  Trace
	// integrity is a plan that failed its check (StreamPlans returns it).
	integrity *IntegrityError
}

type traceKey struct{}

func withTrace(ctx context.Context) (context.Context, *traceSink) {
	s := &traceSink{}
	return context.WithValue(ctx, traceKey{}, s), s
}

func (s *traceSink) done() *Trace {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.t
	return &t
}

// traceOf returns the sink of a Router call (nil for HTTP requests).
func traceOf(ctx context.Context) *traceSink {
	s, _ := ctx.Value(traceKey{}).(*traceSink)
	return s
}

func (s *traceSink) request(r RequestRecord) {
	s.mu.Lock()
	s.t.Request = r
	s.mu.Unlock()
}

func (s *traceSink) attempt(a AttemptRecord) {
	s.mu.Lock()
	s.t.Attempts = append(s.t.Attempts, a)
	s.mu.Unlock()
}

// Target names one candidate of a route: a provider and its upstream model,
// as an AttemptRecord reports them.
type Target struct {
	Provider string
	Model    string
}
