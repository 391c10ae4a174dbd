package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
)

// tier3Caps gives gateway/tier-3 its own capabilities beside the
// provider's (which tier-5 keeps).
func tier3Caps(caps string) func(string) string {
	return func(cfg string) string {
		return strings.Replace(cfg, "    capabilities:\n      contextWindowTokens: 10000",
			"    modelCapabilities:\n      tier-3: {"+caps+"}\n    capabilities:\n      contextWindowTokens: 10000", 1)
	}
}

// upstreamModel is the model a provider request names.
func upstreamModel(t *testing.T, r llmtest.Request) string {
	t.Helper()
	var b struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(r.Raw, &b); err != nil {
		t.Fatal(err)
	}
	return b.Model
}

// noteSteps are n writes of about 3,900 bytes each.
func noteSteps(n int) []llmtest.Reply {
	var steps []llmtest.Reply
	for i := range n {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": strings.Repeat(fmt.Sprintf("N%d ", i), 1300)}))
	}
	return steps
}

// TestLocalExactTargetsTheCapableCandidatesOwnInput: the route's largest
// window (tier-3, 128,000 tokens) belongs to a candidate that takes no
// tools, so only tier-5 (usable input 8,000) can take the planner's
// requests. Once the history outgrows 8,000 tokens the one local-exact
// compaction runs before any I/O — the large incapable window neither
// suppresses it nor is its target: the tail target is a fraction of
// tier-5's own usable input (the published event says 8,000, not the
// binding's 114,200), which puts the preferred endpoint at the furthest
// legal cut, so the source is folded once. Every request goes to tier-5
// within its own usable input; none to tier-3.
func TestLocalExactTargetsTheCapableCandidatesOwnInput(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: func(cfg string) string {
		return tier3Caps("contextWindowTokens: 128000, maxOutputTokens: 1000, toolsMode: none")(exactWindow(cfg))
	}})
	e.script.Add("planner@project", append(noteSteps(8), finishRun()...)...)
	e.script.Add("summary", text("FOLD: wrote n0 to n6."), text("AGAIN: more notes."), text("AGAIN: more notes."), text("AGAIN: more notes."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "planner@project" {
			continue
		}
		if m := upstreamModel(t, r); m != "tier-5" {
			t.Errorf("a planner request went to %s, which takes no tools", m)
		}
		if tok := (len(r.Raw) + 3) / 4; tok > 8000 {
			t.Errorf("a planner request of about %d tokens was sent beyond tier-5's usable input of 8000", tok)
		}
	}
	cs := compactions(e)
	if len(cs) == 0 {
		t.Fatal("no compaction: the incapable candidate's window suppressed it")
	}
	c := cs[0]
	if c["mode"] != "local_exact" || c["usable_input"] != float64(8000) {
		t.Fatalf("first compaction = %+v, want local_exact targeting tier-5's 8000", c)
	}
	if c["summary_calls"] != float64(1) || c["kept_rows"] != float64(6) {
		t.Errorf("compaction = %+v, want the furthest endpoint folded in one call", c)
	}
	if len(e.events("admission_refused")) != 0 {
		t.Error("a request was refused after the local pass")
	}
}

// TestPreventiveUsesTheBindingsLargestCapacity: preventive maintenance
// weighs the actor-visible estimate against the binding's largest
// positive usable input (tier-3: floor(20000 × 0.9) − 1000 = 17,000), not
// the smaller candidate's (tier-5: 8,000), while each request is admitted
// against its own candidate: between 8,000 and the trigger (80 % of
// 17,000) requests go to tier-3 alone and nothing is compacted; the first
// compaction is preventive, at or past 13,600 estimated tokens.
func TestPreventiveUsesTheBindingsLargestCapacity(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: func(cfg string) string {
		return tier3Caps("contextWindowTokens: 20000, maxOutputTokens: 1000, toolsMode: native")(smallWindow(cfg))
	}})
	e.script.Add("planner@project", append(noteSteps(16), finishRun()...)...)
	var folds []llmtest.Reply
	for i := range 12 {
		folds = append(folds, text(fmt.Sprintf("FOLD-%d: wrote notes.", i)))
	}
	e.script.Add("summary", folds...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	cs := compactions(e)
	if len(cs) == 0 {
		t.Fatal("no compaction")
	}
	c := cs[0]
	if c["mode"] != "preventive" || c["usable_input"] != float64(17000) || c["tokens_before"].(float64) < 0.8*17000 {
		t.Fatalf("first compaction = %+v, want preventive at 80%% of the binding's 17000", c)
	}
	large := 0
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "planner@project" {
			continue
		}
		tok, m := (len(r.Raw)+3)/4, upstreamModel(t, r)
		if tok > 8000 {
			large++
			if m != "tier-3" {
				t.Errorf("a request of about %d tokens went to %s beyond its usable input of 8000", tok, m)
			}
		}
		if tok > 17000 {
			t.Errorf("a request of about %d tokens exceeds tier-3's usable input", tok)
		}
	}
	if large == 0 {
		t.Error("no request between tier-5's usable input and the trigger: the test does not show the two budgets apart")
	}
}

// TestStructuralOnlyEndpointIsNoCandidate: with a tail target larger than
// the whole history the preferred endpoint folds only the node's marker,
// which carries no summary source (and is kept anyway). That advance makes
// no provider call and is no candidate — it does not end the compaction as
// if the summarizer had failed: the furthest endpoint is folded and
// published, and the request fits.
func TestStructuralOnlyEndpointIsNoCandidate(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: func(cfg string) string {
		return strings.Replace(exactWindow(cfg), "tail_fraction: 0.05", "tail_fraction: 0.95", 1)
	}})
	e.script.Add("planner@project", append(noteSteps(8), finishRun()...)...)
	e.script.Add("summary", text("FOLD: wrote n0 to n6."), text("AGAIN: more notes."), text("AGAIN: more notes."), text("AGAIN: more notes."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	cs := compactions(e)
	if len(cs) == 0 || cs[0]["mode"] != "local_exact" || cs[0]["summary_calls"] != float64(1) || cs[0]["kept_rows"] != float64(6) {
		t.Fatalf("compactions = %+v, want the furthest endpoint folded in one call", cs)
	}
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" && (len(r.Raw)+3)/4 > 8000 {
			t.Errorf("a planner request of about %d tokens was sent beyond the usable input of 8000", (len(r.Raw)+3)/4)
		}
	}
}
