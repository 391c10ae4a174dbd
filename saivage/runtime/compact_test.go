package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
)

// smallWindow gives the gateway provider a 10,000-token window with 1,000
// output tokens (usable input 8,000 tokens) and keeps a 5 % tail.
func smallWindow(cfg string) string {
	cfg = strings.Replace(cfg, "contextWindowTokens: 128000", "contextWindowTokens: 10000", 1)
	cfg = strings.Replace(cfg, "maxOutputTokens: 8192", "maxOutputTokens: 1000", 1)
	return strings.Replace(cfg, "tail_fraction: 0.3", "tail_fraction: 0.05", 1)
}

// summaryRequests returns the user text of each summary call, in order.
func summaryRequests(e *env) []string {
	var out []string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "summary" {
			continue
		}
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, body.Messages[len(body.Messages)-1].Content)
	}
	return out
}

// TestPreventiveCompactionRefinesSequentially: past the trigger, the rows
// before the preferred endpoint are folded by one sequential refine
// accumulator — the second call carries the first call's summary and only
// source the first did not see — and the compacted segment replaces them.
// Every request stays within the usable input.
func TestPreventiveCompactionRefinesSequentially(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallWindow})
	notes := func(tag string) string { return strings.Repeat(tag+" ", 1300) }
	e.script.Add("planner@project",
		call("write", map[string]any{"path": "n1.txt", "content": notes("A1")}),
		call("write", map[string]any{"path": "n2.txt", "content": notes("B2")}),
		call("write", map[string]any{"path": "n3.txt", "content": notes("C3")}),
		call("write", map[string]any{"path": "n4.txt", "content": notes("D4")}),
		call("write", map[string]any{"path": "record:plan", "content": "plan"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "ok"}),
		emit("done", "ok", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("summary", text("FOLD-ONE: wrote n1 and n2."), text("FOLD-TWO: wrote n1, n2 and n3."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	reqs := summaryRequests(e)
	if len(reqs) != 2 {
		t.Fatalf("summary calls = %d, want 2", len(reqs))
	}
	if strings.Contains(reqs[0], "SUMMARY SO FAR") || !strings.Contains(reqs[0], "A1 A1") {
		t.Errorf("first fold does not carry the oldest source: %.200q", reqs[0])
	}
	if !strings.HasPrefix(reqs[1], "SUMMARY SO FAR:\nFOLD-ONE: wrote n1 and n2.") || strings.Contains(reqs[1], "A1 A1") || !strings.Contains(reqs[1], "C3 C3") {
		t.Errorf("second fold is not the accumulator plus new source only: %.300q", reqs[1])
	}
	rows := e.rows("project", "planner")
	var c struct {
		Text         string `json:"text"`
		SummaryCalls int    `json:"summary_calls"`
		Omitted      bool   `json:"omitted"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &c) != nil || c.Text != "FOLD-TWO: wrote n1, n2 and n3." || c.SummaryCalls != 2 || c.Omitted {
		t.Fatalf("compacted segment starts with %+v", rows[0])
	}
	ev := e.events("session_compacted")
	if len(ev) != 1 || ev[0].Data["tokens_after"].(float64) >= ev[0].Data["tokens_before"].(float64) {
		t.Fatalf("session_compacted = %+v", ev)
	}
	after := false
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "planner@project" {
			continue
		}
		if est := (len(r.Raw) + 3) / 4; est > 8000 {
			t.Errorf("a planner request of about %d tokens exceeds the usable input of 8000", est)
		}
		if strings.Contains(string(r.Raw), "FOLD-TWO") {
			after = true
			if strings.Contains(string(r.Raw), "A1 A1") || !strings.Contains(string(r.Raw), "D4 D4") {
				t.Errorf("compacted request keeps folded source or lost the tail")
			}
		}
	}
	if !after {
		t.Error("no planner request carried the summary")
	}
}

// rejectionScript writes and reads a large file, then the provider rejects
// the conversation as too long.
func rejectionScript(e *env, rest ...llmtest.Reply) {
	big := strings.Repeat("line of notes\n", 400)
	e.script.Add("planner@project", append([]llmtest.Reply{
		call("write", map[string]any{"path": "notes.txt", "content": big}),
		call("read", map[string]any{"path": "notes.txt"}),
		{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"},
	}, rest...)...)
}

// TestCompactionThatDoesNotShrinkPublishesNothing: a summary larger than
// the rows it would replace gives no smaller candidate at either endpoint;
// nothing is published and the node blocks on the provider's rejection.
func TestCompactionThatDoesNotShrinkPublishesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	rejectionScript(e)
	huge := strings.Repeat("an overlong summary ", 5000)
	e.script.Add("summary", text(huge), text(huge))
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "nothing can be compacted") {
		t.Fatalf("run = %+v", sum)
	}
	idx, err := e.p.Sessions.ReadIndex(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project")
	if err != nil || len(idx.Segments) != 1 {
		t.Fatalf("segments = %+v, %v", idx.Segments, err)
	}
	ns := e.events("compaction_not_smaller")
	if len(ns) == 0 || len(e.events("session_compacted")) != 0 {
		t.Fatalf("not-smaller events = %+v", ns)
	}
	for _, ev := range ns {
		if ev.Data["tokens_after"].(float64) < ev.Data["tokens_before"].(float64) {
			t.Errorf("a smaller candidate was refused: %+v", ev.Data)
		}
	}
}

// TestSummaryPolicyRefusalDeclaresOmission: the summarizer's first policy
// refusal ends summary calls for the compaction; a declared omission at the
// same endpoint (node instructions kept) is published and the node goes on.
func TestSummaryPolicyRefusalDeclaresOmission(t *testing.T) {
	e := newEnv(t, envOptions{})
	rejectionScript(e,
		call("write", map[string]any{"path": "record:plan", "content": "plan"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "ok"}),
		emit("done", "ok", map[string]any{"verdict": "complete"}),
	)
	e.script.Add("summary", llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"}, text("never asked"))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("summary"); n != 1 {
		t.Errorf("summary calls = %d, want 1", n)
	}
	if ev := e.events("compaction_summary_refused"); len(ev) != 1 {
		t.Errorf("refusal evidence rows = %d", len(ev))
	}
	rows := e.rows("project", "planner")
	var c struct {
		Text    string `json:"text"`
		Omitted bool   `json:"omitted"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &c) != nil || !c.Omitted || !strings.Contains(c.Text, "content policy") {
		t.Fatalf("compacted segment starts with %+v", rows[0])
	}
	if rows[1].Kind != "marker" || rows[2].Kind != "user" {
		t.Errorf("node instructions not kept: %+v", rows[1:3])
	}
}

// TestSummaryFailureBlocksCompaction: a summarizer failure that is neither
// a refusal nor the call budget leaves no candidate: nothing is published
// and the node blocks as compaction-summary-blocked.
func TestSummaryFailureBlocksCompaction(t *testing.T) {
	e := newEnv(t, envOptions{})
	rejectionScript(e)
	e.script.Add("summary", llmtest.Reply{Status: 400, ErrorCode: "invalid_request", ErrorMessage: "unsupported parameter"})
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "compaction-summary-blocked") {
		t.Fatalf("run = %+v", sum)
	}
	idx, err := e.p.Sessions.ReadIndex(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project")
	if err != nil || len(idx.Segments) != 1 {
		t.Fatalf("segments = %+v, %v", idx.Segments, err)
	}
}
