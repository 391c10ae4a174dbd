package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// TestRouterReturnsAttempts: a Go caller gets the request's record and every
// attempt as return values — the first candidate failing, the second
// answering — with no attribution header anywhere, streaming or not; the
// ledger gets the same rows.
func TestRouterReturnsAttempts(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			f := newFixture(t, twoCandidates, gateway.Options{})
			f.upstream.Enqueue("first", llmtest.Reply{Status: 503})
			f.upstream.Enqueue("second", llmtest.Reply{Content: "from b"})
			r := f.gw.Router()
			req := &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
			var resp *llm.ChatResponse
			var tr *gateway.Trace
			var err error
			chunks := 0
			if stream {
				resp, tr, err = r.Stream(context.Background(), req, func(llm.StreamChunk) error { chunks++; return nil })
			} else {
				resp, tr, err = r.Do(context.Background(), req)
			}
			if err != nil || resp.Choices[0].Message.Content != "from b" {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if stream && chunks == 0 {
				t.Fatal("no chunks streamed")
			}
			if len(tr.Attempts) != 2 || tr.Attempts[0].Provider != "a" || tr.Attempts[0].Status != 503 || tr.Attempts[0].Outcome != gateway.OutcomeRetryable ||
				tr.Attempts[1].Provider != "b" || tr.Attempts[1].UpstreamModel != "second" || tr.Attempts[1].Outcome != gateway.OutcomeOK {
				t.Fatalf("attempts %+v", tr.Attempts)
			}
			if q := tr.Request; q.Provider != "b" || q.Outcome != gateway.OutcomeOK || q.Attempts != 2 || q.Stream != stream || q.CostUSD <= 0 ||
				q.Service != "unknown" || q.Action != "unknown" || q.ID != tr.Attempts[0].RequestID {
				t.Fatalf("request record %+v", q)
			}
			for _, up := range f.upstream.Requests() {
				for h := range up.Header {
					if h == llm.HeaderUsageAction || h == llm.HeaderUsageService {
						t.Fatalf("header %s reached the provider", h)
					}
				}
			}
			if rows := f.ledger.waitRequests(t, 1); rows[0].ID != tr.Request.ID || len(f.ledger.attemptsOf(rows[0].ID)) != 2 {
				t.Fatalf("ledger %+v", rows)
			}
		})
	}
}

func TestRouterFailureTrace(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 529} })
	_, tr, err := f.gw.Router().Do(context.Background(), &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}})
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 502 {
		t.Fatalf("err %v", err)
	}
	if tr.Request.Outcome != gateway.OutcomeFailed || len(tr.Attempts) != 2 || tr.Attempts[0].Status != 529 || tr.Attempts[1].Status != 529 {
		t.Fatalf("trace %+v", tr)
	}
}

func TestEscalationOff(t *testing.T) {
	f := newFixture(t, ladder+"escalation: false\n", gateway.Options{})
	f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 500} })
	_, tr, _ := f.gw.Router().Do(context.Background(), &llm.ChatRequest{Model: "tier-3", Messages: []llm.Message{{Role: "user", Content: "hi"}}})
	if got := fmt.Sprint(upstreamModels(f.upstream)); got != "[m3 m3b]" || len(tr.Attempts) != 2 {
		t.Fatalf("tried %s (%d attempts), want only tier-3's own candidates", got, len(tr.Attempts))
	}
}
