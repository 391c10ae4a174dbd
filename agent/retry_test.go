package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		attempts []int
		want     agent.ErrorClass
	}{
		{"network failure", fmt.Errorf("post: %w", io.ErrUnexpectedEOF), nil, agent.ErrTransient},
		{"truncated stream", llm.ErrStreamTruncated, nil, agent.ErrTransient},
		{"stalled stream", fmt.Errorf("model call: %w", llm.ErrStreamStalled), nil, agent.ErrTransient},
		{"invalid encrypted content before output", &llm.APIError{Status: 400, Code: "invalid_encrypted_content"}, nil, agent.ErrOther},
		{"invalid encrypted content in-band", &llm.APIError{Code: "invalid_encrypted_content"}, nil, agent.ErrOther},
		{"call past its time limit", fmt.Errorf("model call: %w", llm.ErrCallTimeLimit), nil, agent.ErrTransient},
		{"context code", &llm.APIError{Status: 400, Code: "context_length_exceeded"}, nil, agent.ErrContextLength},
		{"content policy code", &llm.APIError{Status: 400, Code: "content_policy_violation"}, nil, agent.ErrContentPolicy},
		{"content filter", &llm.APIError{Status: 200, Code: "content_filter"}, nil, agent.ErrContentPolicy},
		{"529", &llm.APIError{Status: 529}, nil, agent.ErrOverload},
		{"anthropic overloaded type", &llm.APIError{Status: 500, Type: "overloaded_error"}, nil, agent.ErrOverload},
		{"gateway 502 after only overloads", &llm.APIError{Status: 502}, []int{529, 529}, agent.ErrOverload},
		{"gateway 502 after mixed failures", &llm.APIError{Status: 502}, []int{529, 500}, agent.ErrTransient},
		{"rate limit", &llm.APIError{Status: 429}, nil, agent.ErrRateLimit},
		{"timeout", &llm.APIError{Status: 408}, nil, agent.ErrTransient},
		{"503", &llm.APIError{Status: 503}, nil, agent.ErrTransient},
		{"no status", &llm.APIError{Message: "broken"}, nil, agent.ErrTransient},
		{"bad request", &llm.APIError{Status: 400, Message: "bad tool schema"}, nil, agent.ErrOther},
		{"unauthorised", &llm.APIError{Status: 401}, nil, agent.ErrOther},
		{"in-band rate limit code", &llm.APIError{Code: "rate_limit_exceeded"}, nil, agent.ErrRateLimit},
		{"in-band overload code", &llm.APIError{Code: "server_is_overloaded"}, nil, agent.ErrOverload},
		{"in-band invalid key", &llm.APIError{Code: "invalid_api_key"}, nil, agent.ErrOther},
		// Message text alone never changes the class: each row's status and
		// code say one thing and its prose another.
		{"context phrase in a 400's message", &llm.APIError{Status: 400, Message: "context_length_exceeded: too many tokens"}, nil, agent.ErrOther},
		{"context phrase in a 503's message", &llm.APIError{Status: 503, Message: "upstream: context_too_large"}, nil, agent.ErrTransient},
		{"policy phrase in a 400's message", &llm.APIError{Status: 400, Message: "content_policy_violation: refused"}, nil, agent.ErrOther},
		{"policy phrase in an in-band error", &llm.APIError{Message: "content_filter triggered"}, nil, agent.ErrTransient},
		{"overload phrase in a 500's message", &llm.APIError{Status: 500, Message: "overloaded_error: busy"}, nil, agent.ErrTransient},
		{"rate-limit phrase in a 400's message", &llm.APIError{Status: 400, Message: "rate_limit_exceeded"}, nil, agent.ErrOther},
		{"gateway 502 quoting an overload", &llm.APIError{Status: 502, Code: "upstream_failed", Message: "every provider failed: p/m: 500 overloaded_error"}, []int{500}, agent.ErrTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := agent.Classify(tc.err, tc.attempts...); got != tc.want {
				t.Fatalf("Classify = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRetrySchedule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy agent.RetryPolicy
		fails  []agent.ErrorClass
		want   []time.Duration // -1: give up
	}{
		{"transient budget of four", agent.RetryPolicy{}, []agent.ErrorClass{agent.ErrTransient, agent.ErrRateLimit, agent.ErrTransient, agent.ErrTransient},
			[]time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, -1}},
		{"overload doubles to the ceiling", agent.RetryPolicy{}, []agent.ErrorClass{agent.ErrOverload, agent.ErrOverload, agent.ErrOverload, agent.ErrOverload, agent.ErrOverload, agent.ErrOverload, agent.ErrOverload},
			[]time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second, 240 * time.Second, 480 * time.Second, 600 * time.Second, 600 * time.Second}},
		{"bounded overloads", agent.RetryPolicy{OverloadMin: time.Second, OverloadMax: 3 * time.Second, MaxOverloads: 2}, []agent.ErrorClass{agent.ErrOverload, agent.ErrOverload, agent.ErrOverload},
			[]time.Duration{time.Second, 2 * time.Second, -1}},
		{"overloads do not spend the transient budget", agent.RetryPolicy{MaxTransient: 2, TransientBase: time.Second}, []agent.ErrorClass{agent.ErrOverload, agent.ErrTransient, agent.ErrOverload, agent.ErrTransient},
			[]time.Duration{30 * time.Second, time.Second, 60 * time.Second, -1}},
		{"never retried as they are", agent.RetryPolicy{}, []agent.ErrorClass{agent.ErrContextLength}, []time.Duration{-1}},
		{"content policy", agent.RetryPolicy{}, []agent.ErrorClass{agent.ErrContentPolicy}, []time.Duration{-1}},
		{"other", agent.RetryPolicy{}, []agent.ErrorClass{agent.ErrOther}, []time.Duration{-1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.policy.Start()
			for i, c := range tc.fails {
				d, ok := r.Next(c)
				if !ok {
					d = -1
				}
				if d != tc.want[i] {
					t.Fatalf("failure %d (%v): delay %v, want %v", i+1, c, d, tc.want[i])
				}
			}
		})
	}
}

// TestRetryDelays: the delay of the n-th failure, as a caller that keeps
// its own counts (per candidate) reads it, with and without defaults.
func TestRetryDelays(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name   string
		policy agent.RetryPolicy
		delay  func(agent.RetryPolicy, int) time.Duration
		n      []int
		want   []time.Duration
	}{
		{"transient defaults", agent.RetryPolicy{}, agent.RetryPolicy.TransientDelay, []int{1, 2, 3}, []time.Duration{2 * s, 4 * s, 8 * s}},
		{"transient base", agent.RetryPolicy{TransientBase: s}, agent.RetryPolicy.TransientDelay, []int{1, 3}, []time.Duration{s, 4 * s}},
		{"overload defaults", agent.RetryPolicy{}, agent.RetryPolicy.OverloadDelay, []int{1, 2, 5, 6, 7, 100}, []time.Duration{30 * s, 60 * s, 480 * s, 600 * s, 600 * s, 600 * s}},
		{"overload bounds", agent.RetryPolicy{OverloadMin: 2 * s, OverloadMax: 5 * s}, agent.RetryPolicy.OverloadDelay, []int{1, 2, 3}, []time.Duration{2 * s, 4 * s, 5 * s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, n := range tc.n {
				if got := tc.delay(tc.policy, n); got != tc.want[i] {
					t.Errorf("delay after failure %d = %v, want %v", n, got, tc.want[i])
				}
			}
		})
	}
}

func TestRunRetriesTransientFailures(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("tier-5", llmtest.Reply{Status: 429}, llmtest.Reply{Status: 503}, llmtest.Reply{Content: "fine now"})
	var slept []time.Duration
	rec := &recorder{}
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", OnEvent: rec.on,
		Messages: []llm.Message{{Role: "user", Content: "hi"}},
		Retry:    &agent.RetryPolicy{Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}})
	if err != nil || res.Text != "fine now" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if fmt.Sprint(slept) != "[2s 4s]" {
		t.Fatalf("slept %v, want [2s 4s]", slept)
	}
	if got := rec.kinds(); got != "Retrying Retrying AssistantDelta AssistantMessage Done" {
		t.Fatalf("events %s", got)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestRunDoesNotRetryWithoutPolicyOrForBadRequests(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("tier-5", llmtest.Reply{Status: 400, ErrorMessage: "bad schema"}, llmtest.Reply{Status: 503})
	for range 2 {
		_, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5",
			Messages: []llm.Message{{Role: "user", Content: "hi"}},
			Retry:    &agent.RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }, MaxTransient: 1}})
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v, want the API error", err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2 (no retries)", n)
	}
}

func TestCheckPairing(t *testing.T) {
	asst := func(ids ...string) llm.Message {
		m := llm.Message{Role: "assistant"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, call(id, "lookup", "{}"))
		}
		return m
	}
	res := func(id string) llm.Message { return llm.Message{Role: "tool", ToolCallID: id} }
	user := llm.Message{Role: "user"}
	for _, tc := range []struct {
		name string
		msgs []llm.Message
		ok   bool
	}{
		{"paired", []llm.Message{user, asst("a", "b"), res("a"), res("b"), asst()}, true},
		{"result without call", []llm.Message{user, res("a")}, false},
		{"call without result before the next message", []llm.Message{user, asst("a", "b"), res("a"), user}, false},
		{"ends open", []llm.Message{user, asst("a")}, false},
	} {
		if err := agent.CheckPairing(tc.msgs); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestRunRetriesAStalledStream(t *testing.T) {
	srv := llmtest.NewServer(t)
	client := llm.NewClient(llm.ClientOptions{BaseURL: srv.URL, StreamInactivity: 300 * time.Millisecond})
	// The first answer stalls before any output (a stall after output
	// started is returned, as any failure of a visible stream is).
	srv.Enqueue("tier-5", llmtest.Reply{Content: "too late", Delay: time.Minute}, llmtest.Reply{Content: "fine now"})
	var slept []time.Duration
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5",
		Messages: []llm.Message{{Role: "user", Content: "hi"}},
		Retry:    &agent.RetryPolicy{Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}})
	if err != nil || res.Text != "fine now" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if fmt.Sprint(slept) != "[2s]" {
		t.Fatalf("slept %v, want [2s]: the stall is one transient failure", slept)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}
