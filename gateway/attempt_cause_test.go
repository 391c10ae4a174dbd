package gateway_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// TestMovedOnAttemptKeepsErrorCause: an attempt the gateway moves on from
// keeps its answer's structured error code and type, so a caller can tell
// an overload alias answered with 503 or 500 from a generic 5xx; an answer
// without an error object leaves both empty. Its Retry-After header, as
// sent, travels with it.
func TestMovedOnAttemptKeepsErrorCause(t *testing.T) {
	for _, tc := range []struct {
		reply     llmtest.Reply
		code, typ string
	}{
		{llmtest.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfter: "17"}, "rate_limit_exceeded", "scripted_error"},
		{llmtest.Reply{Status: 429, ErrorMessage: "slow down", RetryAfter: "Wed, 02 Dec 2026 12:00:45 GMT"}, "", "scripted_error"},
		{llmtest.Reply{Status: 503, ErrorCode: "server_is_overloaded", ErrorMessage: "busy"}, "server_is_overloaded", "scripted_error"},
		{llmtest.Reply{Status: 500, ErrorType: "overloaded_error", ErrorMessage: "busy"}, "", "overloaded_error"},
		{llmtest.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", ErrorType: "requests", ErrorMessage: "slow down"}, "rate_limit_exceeded", "requests"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprint(tc.reply.Status, tc.code, tc.typ, " stream=", stream), func(t *testing.T) {
				f := newFixture(t, twoCandidates, gateway.Options{})
				f.upstream.Enqueue("first", tc.reply)
				r := f.gw.Router()
				req := &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
				var tr *gateway.Trace
				var err error
				if stream {
					_, tr, err = r.Stream(context.Background(), req, nil)
				} else {
					_, tr, err = r.Do(context.Background(), req)
				}
				if err != nil || len(tr.Attempts) != 2 {
					t.Fatalf("err %v, trace %+v", err, tr)
				}
				if a := tr.Attempts[0]; a.Outcome != gateway.OutcomeRetryable || a.Status != tc.reply.Status || a.Code != tc.code || a.Type != tc.typ || a.RetryAfter != tc.reply.RetryAfter {
					t.Errorf("moved-on attempt = %+v, want code %q type %q retry-after %q", a, tc.code, tc.typ, tc.reply.RetryAfter)
				}
				if a := tr.Attempts[1]; a.Code != "" || a.Type != "" || a.RetryAfter != "" {
					t.Errorf("answering attempt carries a cause: %+v", a)
				}
			})
		}
	}
}
