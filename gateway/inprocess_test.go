package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
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

// A candidate that stalls before any output, or runs past its attempt
// limit, is a failed attempt: the same call moves on to the next
// candidate. A stall after output started ends the stream (no switching
// mid-output). A limit longer than the model's delay does not trip.
func TestAttemptLimitsFailOver(t *testing.T) {
	tests := []struct {
		name        string
		opts        gateway.Options
		stream      bool
		first       llmtest.Reply
		wantContent string // "" = the call fails
		wantErr     error
		wantModels  string
	}{
		{"stream: no headers within the inactivity limit", gateway.Options{StreamInactivity: 400 * time.Millisecond},
			true, llmtest.Reply{Content: "late", Delay: time.Minute}, "from second", nil, "first second"},
		{"not streamed: past the attempt limit", gateway.Options{AttemptTimeLimit: 400 * time.Millisecond},
			false, llmtest.Reply{Content: "late", Delay: time.Minute}, "from second", nil, "first second"},
		{"stream: a long inactivity limit waits for a slow model", gateway.Options{StreamInactivity: time.Minute},
			true, llmtest.Reply{Content: "slow but fine", Delay: 1500 * time.Millisecond}, "slow but fine", nil, "first"},
		{"not streamed: a long attempt limit waits for a slow model", gateway.Options{AttemptTimeLimit: time.Minute},
			false, llmtest.Reply{Content: "slow but fine", Delay: 1500 * time.Millisecond}, "slow but fine", nil, "first"},
		{"stream: a stall after output ends the call", gateway.Options{StreamInactivity: 400 * time.Millisecond},
			true, llmtest.Reply{Content: "never finishes", Chunks: 3, Hold: make(chan struct{})}, "", llm.ErrStreamStalled, "first"},
		{"stream: past the attempt limit after output ends the call", gateway.Options{AttemptTimeLimit: 1200 * time.Millisecond},
			true, llmtest.Reply{Content: "trickle trickle trickle", Chunks: 40, ChunkDelay: 100 * time.Millisecond}, "", llm.ErrCallTimeLimit, "first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, twoCandidates, tc.opts)
			if tc.first.Hold != nil {
				t.Cleanup(func() { close(tc.first.Hold) })
			}
			f.upstream.Enqueue("first", tc.first)
			f.upstream.Enqueue("second", llmtest.Reply{Content: "from second"})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
			var resp *llm.ChatResponse
			var tr *gateway.Trace
			var err error
			if tc.stream {
				resp, tr, err = f.gw.Router().Stream(ctx, req, nil)
			} else {
				resp, tr, err = f.gw.Router().Do(ctx, req)
			}
			if ctx.Err() != nil {
				t.Fatal("the call outlived its test deadline")
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if resp == nil || resp.Choices[0].Message.Content == "" {
					t.Errorf("no partial response: %+v", resp)
				}
			} else if err != nil || resp.Choices[0].Message.Content != tc.wantContent {
				t.Fatalf("err %v, response %+v", err, resp)
			}
			var models []string
			for _, r := range f.upstream.Requests() {
				models = append(models, r.Model)
			}
			if got := strings.Join(models, " "); got != tc.wantModels {
				t.Errorf("upstream saw %s, want %s", got, tc.wantModels)
			}
			if tc.wantModels == "first second" {
				a := tr.Attempts[0]
				if len(tr.Attempts) != 2 || a.Outcome != gateway.OutcomeRetryable || !strings.Contains(a.Error, "model") {
					t.Errorf("attempts = %+v", tr.Attempts)
				}
			}
		})
	}
}
