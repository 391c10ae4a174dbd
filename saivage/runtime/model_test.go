package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/runtime"
)

func finishRoot(e *env) {
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "record:plan", "content": "plan"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "ok"}),
		emit("done", "ok", map[string]any{"verdict": "complete"}),
	)
}

func runToEnd(t *testing.T, e *env) *runtime.RunSummary {
	t.Helper()
	if err := e.rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e.waitRunEnded()
}

// TestFailoverToNextCandidate: a 503 from the first candidate moves the call
// to the route's next candidate; the exchange evidence names both attempts.
func TestFailoverToNextCandidate(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.srv.Enqueue("tier-5", llmtest.Reply{Status: 503, ErrorMessage: "busy"})
	finishRoot(e)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	reqs := e.srv.Requests()
	if reqs[0].Model != "tier-5" || reqs[1].Model != "tier-3" {
		t.Errorf("models = %s, %s", reqs[0].Model, reqs[1].Model)
	}
	data, err := os.ReadFile(filepath.Join(e.p.Cards.SessionDir("project", "planner"), runtime.ExchangesFile))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(data), "\n", 2)[0]
	var env struct {
		Rows []struct {
			UpstreamModel string `json:"upstream_model"`
			Attempts      []struct {
				Model  string
				Status int
			}
		}
	}
	if err := json.Unmarshal([]byte(first), &env); err != nil {
		t.Fatal(err)
	}
	if r := env.Rows[0]; r.UpstreamModel != "tier-3" || len(r.Attempts) != 2 || r.Attempts[0].Status != 503 || r.Attempts[1].Model != "tier-3" {
		t.Errorf("evidence = %s", first)
	}
}

// TestOverloadBacksOff: when every candidate is overloaded (529) the call
// waits 30 s, 60 s, … (abortable) and retries without a finite budget.
func TestOverloadBacksOff(t *testing.T) {
	var mu chan time.Duration = make(chan time.Duration, 16)
	e := newEnv(t, envOptions{rtOpts: runtime.Options{Sleep: func(ctx context.Context, d time.Duration) error {
		mu <- d
		return ctx.Err()
	}}})
	for range 5 {
		e.srv.Enqueue("tier-5", llmtest.Reply{Status: 529, ErrorMessage: "overloaded"})
		e.srv.Enqueue("tier-3", llmtest.Reply{Status: 529, ErrorMessage: "overloaded"})
	}
	finishRoot(e)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	close(mu)
	var got []time.Duration
	for d := range mu {
		got = append(got, d)
	}
	want := []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second, 240 * time.Second, 480 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("back-off delays = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delay %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestTransientFailuresAreFinite: ordinary failures retry up to four times,
// then the card is blocked.
func TestTransientFailuresAreFinite(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: func(s string) string { return strings.Replace(s, "failover: true", "failover: false", 1) }})
	for range 4 {
		e.srv.Enqueue("tier-5", llmtest.Reply{Status: 500, ErrorMessage: "boom"})
	}
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "failed 4 times") {
		t.Fatalf("run = %+v", sum)
	}
	if n := len(e.srv.Requests()); n != 4 {
		t.Errorf("requests = %d (failover is off: tier-5 only)", n)
	}
}

// TestSecondContentPolicyRefusalBlocks: the first refusal is retried once;
// the second blocks the card.
func TestSecondContentPolicyRefusalBlocks(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.script.Add("planner@project",
		llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"},
		llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused again"},
	)
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "content-policy grounds") || e.status("project") != "blocked" {
		t.Fatalf("run = %+v", sum)
	}
	if ev := e.events("content_policy_refusal"); len(ev) != 2 {
		t.Errorf("refusal events = %d", len(ev))
	}
	if reqs := e.srv.Requests(); len(reqs) != 2 || reqs[1].Model != reqs[0].Model || !bytes.Equal(reqs[0].Raw, reqs[1].Raw) {
		t.Errorf("the second pass is not the same request to the same candidate: %d requests", len(reqs))
	}
}

// TestContentPolicyRetryIsPinned: the pass after a refusal goes to the
// refusing candidate alone with the byte-identical request; an overload on
// it is waited out there instead of failing over, and the route's other
// candidate never sees the call. Later calls use the whole route again.
func TestContentPolicyRetryIsPinned(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.srv.Enqueue("tier-5",
		llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"},
		llmtest.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "overloaded"},
	)
	finishRoot(e)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	reqs := e.srv.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		if r.Model != "tier-5" {
			t.Errorf("request %d went to %s: a pinned pass failed over", i, r.Model)
		}
	}
	if !bytes.Equal(reqs[0].Raw, reqs[1].Raw) || !bytes.Equal(reqs[0].Raw, reqs[2].Raw) {
		t.Errorf("the pinned passes are not byte-identical to the refused request (%d, %d, %d bytes)", len(reqs[0].Raw), len(reqs[1].Raw), len(reqs[2].Raw))
	}
	if ev := e.events("content_policy_refusal"); len(ev) != 1 {
		t.Errorf("refusal events = %d", len(ev))
	}
}

// TestContextRejectionCompactsOnce: a "context too large" rejection
// compacts the session once (summary call, new compacted segment keeping
// the node instructions) and retries.
func TestContextRejectionCompactsOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	big := strings.Repeat("line of notes\n", 400)
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "notes.txt", "content": big}),
		call("read", map[string]any{"path": "notes.txt"}),
		llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"},
		call("write", map[string]any{"path": "record:plan", "content": "plan"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "ok"}),
		emit("done", "ok", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("summary", text("SUMMARY: wrote notes.txt (400 lines) and read it back."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	idx, err := e.p.Sessions.ReadIndex(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Segments) != 2 || idx.Segments[1].Kind != "compacted" {
		t.Fatalf("segments = %+v", idx.Segments)
	}
	rows := e.rows("project", "planner")
	if rows[0].Kind != "summary" || !strings.Contains(string(rows[0].Content), "SUMMARY: wrote notes.txt") ||
		rows[1].Kind != "marker" || rows[2].Kind != "user" {
		t.Fatalf("compacted segment starts with %+v", rows[:3])
	}
	// The retried request carries the summary and the node instructions but
	// no longer the first tool call.
	var retried string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" && strings.Contains(string(r.Raw), "SUMMARY: wrote notes.txt") {
			retried = string(r.Raw)
			break
		}
	}
	if retried == "" || !strings.Contains(retried, "Plan the project toward its objective") || strings.Contains(retried, `\"content\":\"line of notes`) {
		t.Errorf("retried request does not look compacted")
	}
	if ev := e.events("session_compacted"); len(ev) != 1 {
		t.Errorf("compaction events = %d", len(ev))
	}
}

// TestPinnedPassIsNotCompacted: a context-length rejection of the pinned
// content-policy pass ends the call instead of compacting (no summary call).
func TestPinnedPassIsNotCompacted(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.srv.Enqueue("tier-5",
		llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"},
		llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too long"},
	)
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "not compacted") {
		t.Fatalf("run = %+v", sum)
	}
	if n := len(e.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want the refused one and its pinned pass only", n)
	}
}
