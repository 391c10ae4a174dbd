package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
)

// countingKey is an API key that counts how often it was fetched: the
// attempt's credentials step.
type countingKey struct{ n atomic.Int32 }

func (k *countingKey) Token(context.Context) (string, error) { k.n.Add(1); return "sk-plan-test", nil }
func (k *countingKey) Refresh(context.Context, string) (string, error) {
	return "", errors.New("a static key cannot be refreshed")
}

// responsesServer is a loopback provider speaking the Responses wire
// format: it records each request and answers with a streamed text reply.
type responsesServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	path   string
	header http.Header
	raw    []byte
}

func newResponsesServer(t *testing.T) *responsesServer {
	t.Helper()
	reply, err := os.ReadFile(filepath.Join("..", "llm", "testdata", "responses", "text_only.sse"))
	if err != nil {
		t.Fatal(err)
	}
	s := &responsesServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recordedRequest{path: r.URL.Path, header: r.Header.Clone(), raw: b})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *responsesServer) requests() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedRequest(nil), s.reqs...)
}

// protocolRoute has one Responses and one Codex candidate of one account;
// the gateway reaches it through a ProviderTransport, which derives each
// protocol's wire body from the chat body it is given.
const protocolRoute = `
providers:
  openai: { base_url: http://provider.invalid/v1 }
models:
  tier-5: [ { provider: openai, model: gpt-4.1 }, { provider: openai, model: gpt-5-codex } ]
`

func protocolGateway(t *testing.T, srv *responsesServer, key *countingKey) *gateway.Gateway {
	t.Helper()
	cfg, err := gateway.ParseConfig([]byte(protocolRoute))
	if err != nil {
		t.Fatal(err)
	}
	pt := llm.NewProviderTransport(llm.ProviderTransportOptions{Name: "openai", BaseURL: srv.URL + "/v1", Credentials: key,
		Models: func(model string) llm.ModelWire {
			if model == "gpt-5-codex" {
				return llm.ModelWire{Protocol: llm.ProtocolCodex}
			}
			return llm.ModelWire{Protocol: llm.ProtocolResponses}
		}})
	g, err := gateway.New(gateway.Options{Config: cfg, Ledger: newLedger(), Transport: pt,
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// canonicalPlan is a candidate's canonical chat body as a caller admits
// it (a Codex one carries its prompt cache key), and the plan of it.
func canonicalPlan(t *testing.T, model string, codex bool) (*llm.ChatRequest, gateway.Plan) {
	t.Helper()
	req := &llm.ChatRequest{Model: model, MaxTokens: 700, Stream: true, StreamOptions: &llm.StreamOptions{IncludeUsage: true},
		Messages: []llm.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "the admitted question"}},
		Tools: []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: "lookup", Description: "Look something up",
			Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}}}
	if codex {
		req.PromptCacheKey = "0123456789abcdef0123456789abcdef"
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return req, gateway.NewPlan(gateway.Target{Provider: "openai", Model: model}, body)
}

// TestResponsesAndCodexPlansVerifiedBeforeWireDerivation: for a Responses
// or Codex candidate the plan carries the canonical (chat) body. An
// attempt checks its hash before anything else: a body altered after
// admission ends the call with an IntegrityError before credentials are
// fetched or a wire body derived — the provider receives nothing. An
// intact plan reaches the provider as the protocol's wire body derived
// from exactly the verified canonical body.
func TestResponsesAndCodexPlansVerifiedBeforeWireDerivation(t *testing.T) {
	for _, tc := range []struct {
		model string
		proto llm.Protocol
	}{
		{"gpt-4.1", llm.ProtocolResponses},
		{"gpt-5-codex", llm.ProtocolCodex},
	} {
		codex := tc.proto == llm.ProtocolCodex
		t.Run(string(tc.proto)+" tampered", func(t *testing.T) {
			srv, key := newResponsesServer(t), &countingKey{}
			g := protocolGateway(t, srv, key)
			_, plan := canonicalPlan(t, tc.model, codex)
			admitted := plan.Hash()
			copy(plan.Body[bytes.Index(plan.Body, []byte("admitted")):], "ALTERED!")
			_, tr, err := g.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{plan}, nil)
			var ie *gateway.IntegrityError
			if !errors.As(err, &ie) || ie.Want != admitted || ie.Target != plan.Target {
				t.Fatalf("err = %v, want the plan's integrity error", err)
			}
			if n := len(srv.requests()); n != 0 {
				t.Errorf("the provider received %d requests", n)
			}
			if n := key.n.Load(); n != 0 {
				t.Errorf("credentials fetched %d times before the integrity check failed", n)
			}
			if len(tr.Attempts) != 0 {
				t.Errorf("attempts %+v recorded for a plan that failed its check", tr.Attempts)
			}
		})
		t.Run(string(tc.proto)+" intact", func(t *testing.T) {
			srv, key := newResponsesServer(t), &countingKey{}
			g := protocolGateway(t, srv, key)
			req, plan := canonicalPlan(t, tc.model, codex)
			resp, _, err := g.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{plan}, nil)
			if err != nil || resp.Choices[0].Message.Content != "All done." {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 || reqs[0].path != "/v1/responses" || reqs[0].header.Get("Authorization") != "Bearer sk-plan-test" {
				t.Fatalf("provider requests %+v", reqs)
			}
			want, err := llm.ResponsesBody(req, llm.ResponsesOptions{Protocol: tc.proto, Stream: true, PromptCacheKey: req.PromptCacheKey})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(reqs[0].raw, want) {
				t.Errorf("wire body is not the derivation of the verified canonical body:\n got %s\nwant %s", reqs[0].raw, want)
			}
			var wire map[string]any
			if err := json.Unmarshal(reqs[0].raw, &wire); err != nil {
				t.Fatal(err)
			}
			if codex {
				if wire["max_output_tokens"] != nil || wire["prompt_cache_key"] != req.PromptCacheKey || reqs[0].header.Get("session_id") != req.PromptCacheKey {
					t.Errorf("codex wire: max_output_tokens %v prompt_cache_key %v session_id %q", wire["max_output_tokens"], wire["prompt_cache_key"], reqs[0].header.Get("session_id"))
				}
			} else if wire["max_output_tokens"] != float64(700) || wire["max_tokens"] != nil {
				t.Errorf("responses wire: max_output_tokens %v max_tokens %v", wire["max_output_tokens"], wire["max_tokens"])
			}
		})
	}
}
