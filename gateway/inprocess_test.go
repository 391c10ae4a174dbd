package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

func TestInProcessTransport(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	client := llm.NewClient(llm.ClientOptions{BaseURL: "http://in-process/v1",
		HTTPClient: &http.Client{Transport: gateway.InProcess(f.gw.Handler())}})
	req := &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}

	f.upstream.Enqueue("first", llmtest.Reply{Content: "streamed in process", Chunks: 4})
	var deltas int
	resp, err := client.ChatStream(context.Background(), req, func(llm.StreamChunk) error { deltas++; return nil })
	if err != nil || resp.Choices[0].Message.Content != "streamed in process" || deltas < 4 {
		t.Fatalf("stream: %v %+v (%d chunks)", err, resp, deltas)
	}
	f.upstream.Enqueue("first", llmtest.Reply{Content: "plain"})
	if resp, err := client.Chat(context.Background(), req); err != nil || resp.Choices[0].Message.Content != "plain" {
		t.Fatalf("chat: %v %+v", err, resp)
	}
	// Errors keep their status.
	if _, err := client.Chat(context.Background(), &llm.ChatRequest{Model: "nope"}); err == nil {
		t.Fatal("unknown model accepted")
	} else {
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 404 {
			t.Errorf("err = %v, want a 404 APIError", err)
		}
	}
	// Cancelling the caller ends the call and the handler.
	hold := make(chan struct{})
	defer close(hold)
	f.upstream.Enqueue("first", llmtest.Reply{Content: "never finishes", Chunks: 3, Hold: hold})
	ctx, cancel := context.WithCancel(context.Background())
	_, err = client.ChatStream(ctx, req, func(llm.StreamChunk) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled stream: err = %v", err)
	}
	if recs := f.ledger.waitRequests(t, 4); len(recs) != 4 {
		t.Errorf("ledger rows = %d", len(recs))
	}
}

// A provider stream that stalls through the gateway (as Saivage's Router
// reads it, in process) ends with ErrStreamStalled, and the gateway's
// handler finishes and records the request.
func TestInProcessStalledStream(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	client := llm.NewClient(llm.ClientOptions{BaseURL: "http://in-process/v1", StreamInactivity: 300 * time.Millisecond,
		HTTPClient: &http.Client{Transport: gateway.InProcess(f.gw.Handler())}})
	hold := make(chan struct{})
	defer close(hold)
	f.upstream.Enqueue("first", llmtest.Reply{Content: "never finishes", Chunks: 3, Hold: hold})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := client.ChatStream(ctx, &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
	if !errors.Is(err, llm.ErrStreamStalled) || ctx.Err() != nil {
		t.Fatalf("err = %v, want ErrStreamStalled", err)
	}
	if resp == nil || resp.Choices[0].Message.Content != "neve" { // the first of three chunks
		t.Errorf("partial response %+v", resp)
	}
	if recs := f.ledger.waitRequests(t, 1); len(recs) != 1 {
		t.Errorf("ledger rows = %d", len(recs))
	}
}
