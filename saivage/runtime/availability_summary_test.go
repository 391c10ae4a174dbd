package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/state"
)

// isSummary reports whether a provider request is a compaction summary
// call (by its system prompt).
func isSummary(r llmtest.Request) bool {
	var b struct {
		Messages []llm.Message `json:"messages"`
	}
	return json.Unmarshal(r.Raw, &b) == nil && len(b.Messages) > 0 && b.Messages[0].Content == summarySystem
}

// smallCandidates gives both default candidates a 10,000-token window and
// 1,000 output tokens (usable input 8,000; a summary request's 7,000) and
// turns preventive compaction off, so only admission and rejections
// compact.
func smallCandidates(cfg string) string {
	cfg = strings.Replace(cfg, "contextWindowTokens: 128000", "contextWindowTokens: 10000", 1)
	cfg = strings.Replace(cfg, "maxOutputTokens: 8192", "maxOutputTokens: 1000", 1)
	cfg = strings.Replace(cfg, "tail_fraction: 0.3", "tail_fraction: 0.05", 1)
	return strings.Replace(cfg, "compaction:\n  enabled: true", "compaction:\n  enabled: false", 1)
}

// summarizerTier3 is smallCandidates with compaction.summarizer_candidate
// gateway/tier-3: summary calls have that one candidate.
func summarizerTier3(cfg string) string {
	return strings.Replace(smallCandidates(cfg), "compaction:\n", "compaction:\n  summarizer_candidate: {provider: gateway, model: tier-3}\n", 1)
}

// events returns the data of the runtime's app-log events of type typ.
func events(t *testing.T, rt *Runtime, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range appLogEvents(t, rt.p, typ) {
		out = append(out, ev.Data)
	}
	return out
}

// TestSummaryCallsShareAvailability: the summary calls of a compaction go
// through the candidate availability of the logical operation they belong
// to. A node session of about 50,000 bytes exceeds both candidates' usable
// input of 8,000 tokens, so the one local-exact compaction folds it in
// several summary calls before the primary request. Waits go through the
// runtime's Sleep, which records them and never sleeps.
func TestSummaryCallsShareAvailability(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		edit func(string) string
		// summary answers the summary calls to a model, in order (then
		// plain summaries).
		summary map[string][]llmtest.Reply
		// calls are the first requests expected: "sum:" or "primary:" and
		// the model; rest is what every later request is.
		calls []string
		rest  string
		waits []time.Duration
		err   string
	}{{
		name: "an overloaded summarizer candidate yields to the ready alternative",
		edit: smallCandidates,
		summary: map[string][]llmtest.Reply{"tier-5": {
			{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "overloaded"},
		}},
		// The gateway fails the first summary call over to tier-3; tier-5
		// then cools for 30 s, so every later summary call and the primary
		// request go to tier-3 first, without waiting.
		calls: []string{"sum:tier-5", "sum:tier-3", "sum:tier-3"},
		rest:  "tier-3",
	}, {
		name: "a summary call waits out its only candidate's cooling",
		edit: summarizerTier3,
		summary: map[string][]llmtest.Reply{"tier-3": {
			{Status: 500, ErrorMessage: "boom"},
			{Status: 429, ErrorMessage: "slow down", RetryAfter: "45"},
		}},
		calls: []string{"sum:tier-3", "sum:tier-3", "sum:tier-3", "sum:tier-3"},
		waits: []time.Duration{2 * s, 45 * s},
	}, {
		name: "a summarizer exhausted within the operation blocks the compaction",
		edit: summarizerTier3,
		summary: map[string][]llmtest.Reply{"tier-3": {
			{Status: 500, ErrorMessage: "boom"}, {Status: 502, ErrorMessage: "boom"},
			{Status: 503, ErrorMessage: "boom"}, {Status: 500, ErrorMessage: "boom"},
		}},
		calls: []string{"sum:tier-3", "sum:tier-3", "sum:tier-3", "sum:tier-3"},
		waits: []time.Duration{2 * s, 4 * s, 8 * s},
		err:   "compaction-summary-blocked: the conversation must be compacted and no summary could be made: no candidate of model route summarizer is left: gateway/tier-3 failed 4 times (last: HTTP 500)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
			srv := llmtest.NewServer(t)
			var mu sync.Mutex
			script := map[string][]llmtest.Reply{}
			for m, r := range tc.summary {
				script[m] = slices.Clone(r)
			}
			folds := 0
			srv.Handle(func(r llmtest.Request) llmtest.Reply {
				mu.Lock()
				defer mu.Unlock()
				if !isSummary(r) {
					return llmtest.Reply{Content: "fine"}
				}
				if q := script[r.Model]; len(q) > 0 {
					script[r.Model] = q[1:]
					return q[0]
				}
				folds++
				return llmtest.Reply{Content: fmt.Sprintf("SUMMARY %d: read the files.", folds)}
			})
			var waits []time.Duration
			sleep := func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				return ctx.Err()
			}
			rt := planRuntimeWith(t, srv.URL, Options{Sleep: sleep, Clock: clock}, tc.edit)
			iv := plannerInvoker(rt)
			appendReads(t, iv, 12)
			resp, err := iv.ChatStream(context.Background(), &llm.ChatRequest{}, nil)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err != "":
				if ce := (*CompactionBlockedError)(nil); !errors.As(err, &ce) || err.Error() != tc.err {
					t.Fatalf("err = %v\nwant %s", err, tc.err)
				}
			case len(resp.Choices) == 0 || resp.Choices[0].Message.Content != "fine":
				t.Fatalf("answer = %+v", resp)
			}
			var got []string
			summaries := 0
			for _, r := range srv.Requests() {
				kind := "primary:"
				if isSummary(r) {
					kind = "sum:"
					summaries++
				}
				got = append(got, kind+r.Model)
			}
			if len(got) < len(tc.calls) || !slices.Equal(got[:len(tc.calls)], tc.calls) {
				t.Fatalf("requests = %v\nwant first %v", got, tc.calls)
			}
			if tc.rest != "" {
				for i, c := range got[len(tc.calls):] {
					if !strings.HasSuffix(c, ":"+tc.rest) {
						t.Errorf("request %d after the overload = %s, want %s", len(tc.calls)+i, c, tc.rest)
					}
				}
			}
			if tc.err == "" && (summaries < 3 || !strings.HasPrefix(got[len(got)-1], "primary:")) {
				t.Errorf("requests = %v: want a compaction of several summary calls, then the primary request", got)
			}
			if !slices.Equal(waits, tc.waits) {
				t.Errorf("waits = %v, want %v", waits, tc.waits)
			}
		})
	}
}

// TestAuthoritativeTargetsTheRejectingMember: tier-5 (usable input 8,000)
// and tier-3 (114,200) both admit a node session of about 25,000 bytes.
// tier-5 is sent it and rejects it as too long — its provider's real limit
// is smaller, it refuses any request over 11,000 bytes. The one
// authoritative compaction targets tier-5's own usable input, not the
// route's largest window: its tail is 30 % of 8,000 tokens (9,600 bytes),
// less than the half of the history a route-wide target keeps, so the
// rebuilt request retried on tier-5 first is within its real limit and
// answered.
func TestAuthoritativeTargetsTheRejectingMember(t *testing.T) {
	const limit = 11000
	srv := llmtest.NewServer(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		switch {
		case isSummary(r):
			return llmtest.Reply{Content: "SUMMARY: read the files."}
		case r.Model == "tier-5" && len(r.Raw) > limit:
			return llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"}
		}
		return llmtest.Reply{Content: "fine"}
	})
	rt := planRuntimeWith(t, srv.URL, Options{}, func(cfg string) string {
		cfg = strings.Replace(cfg, "compaction:\n  enabled: true", "compaction:\n  enabled: false", 1)
		return strings.Replace(cfg, "      transportProtocol: chat_completions\n",
			"      transportProtocol: chat_completions\n    modelCapabilities:\n"+
				"      tier-5: {contextWindowTokens: 10000, maxOutputTokens: 1000, toolsMode: native, transportProtocol: chat_completions}\n", 1)
	})
	iv := plannerInvoker(rt)
	appendReads(t, iv, 6)
	resp, err := iv.ChatStream(context.Background(), &llm.ChatRequest{}, nil)
	if err != nil || len(resp.Choices) == 0 || resp.Choices[0].Message.Content != "fine" {
		t.Fatalf("answer = %+v, %v", resp, err)
	}
	var primary []string
	for _, r := range srv.Requests() {
		if !isSummary(r) {
			primary = append(primary, fmt.Sprintf("%s:%d", r.Model, len(r.Raw)))
		}
	}
	if len(primary) != 2 || !strings.HasPrefix(primary[0], "tier-5:") || !strings.HasPrefix(primary[1], "tier-5:") {
		t.Fatalf("primary requests = %v, want the rejected one and the rebuilt one, both to tier-5", primary)
	}
	cs := events(t, rt, "session_compacted")
	if len(cs) != 1 || cs[0]["mode"] != "authoritative" || cs[0]["usable_input"] != float64(8000) {
		t.Fatalf("compactions = %+v, want one authoritative targeting tier-5's 8000", cs)
	}
}

// TestExchangeEvidenceCarriesAttemptCauses: each attempt of an exchange's
// evidence row carries the structured code and type its answer's error
// object had and the Retry-After it sent: an attempt the gateway moved on
// from (a rate limit) as the gateway recorded it, and the last attempt's
// own rejection, which the gateway passed through, from that answer.
func TestExchangeEvidenceCarriesAttemptCauses(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	srv := llmtest.NewServer(t)
	srv.Enqueue("tier-5", llmtest.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", ErrorType: "requests", ErrorMessage: "slow down", RetryAfter: "45"})
	srv.Enqueue("tier-3", llmtest.Reply{Content: "fine"},
		llmtest.Reply{Status: 400, ErrorCode: "invalid_value", ErrorType: "invalid_request_error", ErrorMessage: "no"})
	sleep := func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	rt := planRuntimeWith(t, srv.URL, Options{Sleep: sleep, Clock: clock}, nil)
	iv := plannerInvoker(rt)
	if _, err := iv.ChatStream(context.Background(), &llm.ChatRequest{}, nil); err != nil {
		t.Fatal(err)
	}
	// tier-5 cools for its Retry-After: the second call goes to tier-3,
	// which rejects it.
	if _, err := iv.ChatStream(context.Background(), &llm.ChatRequest{}, nil); err == nil {
		t.Fatal("the rejection was not returned")
	}
	var rows []exchangeRow
	_, err := rt.p.Publisher.ReadJSONL(filepath.Join(iv.sess.dir, ExchangesFile), state.ReadOptions{Versions: []int{exchangeVersion}, Tail: state.TailIgnore,
		Validate: func(_ int, env state.Envelope) error {
			for _, raw := range env.Rows {
				var r exchangeRow
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		var as []string
		for _, a := range r.Attempts {
			as = append(as, fmt.Sprintf("%s %d %s code=%s type=%s retry_after=%s", a.Model, a.Status, a.Outcome, a.Code, a.Type, a.RetryAfter))
		}
		got = append(got, strings.Join(as, "; "))
	}
	want := []string{
		"tier-5 429 retryable code=rate_limit_exceeded type=requests retry_after=45; tier-3 200 ok code= type= retry_after=",
		"tier-3 400 rejected code=invalid_value type=invalid_request_error retry_after=",
	}
	if !slices.Equal(got, want) {
		t.Errorf("evidence attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
