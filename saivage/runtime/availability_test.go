package runtime

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// fakeClock is a clock only the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// After never fires: no Oversight runs in these tests.
func (c *fakeClock) After(time.Duration) <-chan time.Time { return nil }

// plannerInvoker is an invoker of rt's default route for the root card's
// planner session.
func plannerInvoker(rt *Runtime) *invoker {
	route, _ := rt.models.Route("default")
	return &invoker{rt: rt, route: route, sess: rt.cardSession("project", "planner"), system: func() string { return "be brief" }}
}

// appendReads writes a node marker and steps rounds of one 4,000-byte read
// each to iv's session.
func appendReads(t *testing.T, iv *invoker, steps int) {
	t.Helper()
	h := &history{}
	h.node(0)
	for n := range steps {
		h.step(n, 1, 4000)
	}
	if err := iv.sess.append(h.rows...); err != nil {
		t.Fatal(err)
	}
}

// step is one scripted answer of an upstream model; advance moves the
// clock while the request is being answered (a long call).
type step struct {
	reply   llmtest.Reply
	advance time.Duration
}

func overloaded529() step {
	return step{reply: llmtest.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "overloaded"}}
}

// rateLimited is a 429 whose answer carries retryAfter as its Retry-After.
func rateLimited(retryAfter string) step {
	return step{reply: llmtest.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfter: retryAfter}}
}

func failing(status int) step {
	return step{reply: llmtest.Reply{Status: status, ErrorMessage: "boom"}}
}

// TestCandidateAvailability drives the primary model call of a card
// session through the gateway to a scripted OpenAI-compatible provider
// serving the classic route's two candidates (tier-5, then tier-3). Waits go
// through the runtime's Sleep, which records them and never sleeps (nor
// moves the clock), so each case checks the exact waits and the order in
// which the candidates were asked.
func TestCandidateAvailability(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		// single keeps only the route's first candidate (failover off).
		single bool
		script map[string][]step
		// calls is the number of logical operations (default 1).
		calls int
		// cancelAt cancels the call during that wait (1-based; 0 never).
		cancelAt int
		// models are the upstream models asked, in order.
		models string
		waits  []time.Duration
		// err is a fragment of the last call's error ("" for success).
		err string
		// samePlan: every request carries the first one's exact bytes.
		samePlan bool
	}{{
		name:   "an overloaded candidate is set aside while a ready alternative answers",
		script: map[string][]step{"tier-5": {overloaded529()}},
		calls:  2,
		// The second call goes to tier-3 first, without waiting.
		models: "tier-5 tier-3 tier-3",
	}, {
		name: "ordinary failures exhaust a candidate that cooling never reopens",
		script: map[string][]step{
			"tier-5": {failing(500), failing(500), failing(500), failing(500)},
			"tier-3": {overloaded529(), overloaded529()},
		},
		// tier-5 cools 2, 4 and 8 s and is exhausted by its fourth failure;
		// the call then waits for tier-3's overload cooling (30 s from the
		// start, then 60 s), never asking tier-5 again.
		models: "tier-5 tier-3 tier-5 tier-5 tier-5 tier-3 tier-3",
		waits:  []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 60 * s},
	}, {
		name: "every candidate exhausted names the route and each last error",
		script: map[string][]step{
			"tier-5": {failing(500), failing(500), failing(500), failing(500)},
			"tier-3": {failing(502), failing(429), failing(503), failing(502)},
		},
		models: "tier-5 tier-3 tier-5 tier-3 tier-5 tier-3 tier-5 tier-3",
		waits:  []time.Duration{2 * s, 4 * s, 8 * s},
		err:    "no candidate of model route default is left: gateway/tier-5 failed 4 times (last: HTTP 500); gateway/tier-3 failed 4 times (last: HTTP 502)",
	}, {
		name:   "exact overload aliases wait 30 s doubling to 600 s without a budget until cancelled",
		single: true,
		script: map[string][]step{"tier-5": {
			overloaded529(),
			{reply: llmtest.Reply{Status: 503, ErrorCode: "server_is_overloaded", ErrorMessage: "busy"}},
			{reply: llmtest.Reply{Status: 500, ErrorType: "overloaded_error", ErrorMessage: "busy"}},
			overloaded529(), overloaded529(),
			{reply: llmtest.Reply{Status: 503, ErrorCode: "server_is_overloaded", ErrorMessage: "busy"}},
			overloaded529(),
		}},
		cancelAt: 7,
		models:   "tier-5 tier-5 tier-5 tier-5 tier-5 tier-5 tier-5",
		waits:    []time.Duration{30 * s, 60 * s, 120 * s, 240 * s, 480 * s, 600 * s, 600 * s},
		err:      "context canceled",
	}, {
		name:   "generic 5xx and rate limits are finite and overloads do not spend that budget",
		single: true,
		script: map[string][]step{"tier-5": {failing(500), overloaded529(), failing(429), overloaded529(), failing(503), failing(500)}},
		models: "tier-5 tier-5 tier-5 tier-5 tier-5 tier-5",
		waits:  []time.Duration{2 * s, 30 * s, 4 * s, 60 * s, 8 * s},
		err:    "gateway/tier-5 failed 4 times (last: HTTP 500)",
	}, {
		name:   "an ordinary failure two hours after the first ends the budget",
		single: true,
		script: map[string][]step{"tier-5": {failing(500), {reply: failing(500).reply, advance: 2 * time.Hour}}},
		models: "tier-5 tier-5",
		waits:  []time.Duration{2 * s},
		err:    "gateway/tier-5 failed 2 times over two hours (last: HTTP 500)",
	}, {
		name:   "a rate limit's Retry-After in seconds sets its cooling",
		single: true,
		script: map[string][]step{"tier-5": {rateLimited("45"), rateLimited("7")}},
		models: "tier-5 tier-5 tier-5",
		waits:  []time.Duration{45 * s, 7 * s},
	}, {
		name:   "a rate limit's Retry-After as an HTTP date sets its cooling",
		single: true,
		// The clock reads 12:00:00.
		script: map[string][]step{"tier-5": {rateLimited("Wed, 02 Dec 2026 12:01:30 GMT")}},
		models: "tier-5 tier-5",
		waits:  []time.Duration{90 * s},
	}, {
		name:   "a Retry-After is bounded at 600 s and a malformed one keeps the fixed delay",
		single: true,
		script: map[string][]step{"tier-5": {rateLimited("86400"), rateLimited("soon")}},
		models: "tier-5 tier-5 tier-5",
		waits:  []time.Duration{600 * s, 4 * s},
	}, {
		name:   "rate limits with a Retry-After still spend the finite budget",
		single: true,
		script: map[string][]step{"tier-5": {rateLimited("5"), rateLimited("5"), rateLimited("5"), rateLimited("5")}},
		models: "tier-5 tier-5 tier-5 tier-5",
		waits:  []time.Duration{5 * s, 5 * s, 5 * s},
		err:    "gateway/tier-5 failed 4 times (last: HTTP 429)",
	}, {
		name: "the pinned content-policy pass waits out overloads of the refusing candidate alone",
		script: map[string][]step{"tier-5": {
			{reply: llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"}},
			{reply: llmtest.Reply{Status: 503, ErrorCode: "server_is_overloaded", ErrorMessage: "busy"}},
			overloaded529(),
		}},
		models:   "tier-5 tier-5 tier-5 tier-5",
		waits:    []time.Duration{30 * s, 60 * s},
		samePlan: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
			srv := llmtest.NewServer(t)
			var mu sync.Mutex
			script := map[string][]step{}
			for m, steps := range tc.script {
				script[m] = append([]step(nil), steps...)
			}
			srv.Handle(func(r llmtest.Request) llmtest.Reply {
				mu.Lock()
				defer mu.Unlock()
				q := script[r.Model]
				if len(q) == 0 {
					return llmtest.Reply{Content: "fine"}
				}
				script[r.Model] = q[1:]
				clock.advance(q[0].advance)
				return q[0].reply
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var waits []time.Duration
			sleep := func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				if len(waits) == tc.cancelAt {
					cancel()
				}
				return ctx.Err()
			}
			edit := func(cfg string) string { return cfg }
			if tc.single {
				edit = func(cfg string) string { return strings.Replace(cfg, "failover: true", "failover: false", 1) }
			}
			rt := planRuntimeWith(t, srv.URL, Options{Sleep: sleep, Clock: clock}, edit)
			var err error
			for range max(tc.calls, 1) {
				iv := plannerInvoker(rt)
				var resp *llm.ChatResponse
				resp, err = iv.ChatStream(ctx, &llm.ChatRequest{}, nil)
				if err == nil && (len(resp.Choices) == 0 || resp.Choices[0].Message.Content != "fine") {
					t.Fatalf("answer = %+v", resp)
				}
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if tc.err == "context canceled" && !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want the cancellation itself", err)
			}
			reqs := srv.Requests()
			var models []string
			for _, r := range reqs {
				models = append(models, r.Model)
			}
			if got := strings.Join(models, " "); got != tc.models {
				t.Errorf("models asked: %s\nwant:        %s", got, tc.models)
			}
			if !slices.Equal(waits, tc.waits) {
				t.Errorf("waits = %v, want %v", waits, tc.waits)
			}
			if tc.samePlan {
				for i, r := range reqs {
					if !bytes.Equal(r.Raw, reqs[0].Raw) {
						t.Errorf("request %d is not the refused plan's bytes", i)
					}
				}
			}
		})
	}
}
