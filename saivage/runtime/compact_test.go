package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/state"
)

// smallWindow gives the gateway provider a 10,000-token window with 1,000
// output tokens (usable input 8,000 tokens) and keeps a 5 % tail.
func smallWindow(cfg string) string {
	cfg = strings.Replace(cfg, "contextWindowTokens: 128000", "contextWindowTokens: 10000", 1)
	cfg = strings.Replace(cfg, "maxOutputTokens: 8192", "maxOutputTokens: 1000", 1)
	return strings.Replace(cfg, "tail_fraction: 0.3", "tail_fraction: 0.05", 1)
}

// smallSummarizer is smallWindow with compaction.summarizer_candidate
// gateway/tier-3, whose window is 3,000 tokens: summary requests are
// admitted against floor(3000 × 0.9) − 2000 = 700 tokens, less than one
// 4,000-byte source row.
func smallSummarizer(cfg string) string {
	cfg = strings.Replace(smallWindow(cfg), "    capabilities:\n      contextWindowTokens: 10000",
		"    modelCapabilities:\n      tier-3: {contextWindowTokens: 3000, maxOutputTokens: 2000, toolsMode: native}\n    capabilities:\n      contextWindowTokens: 10000", 1)
	return strings.Replace(cfg, "compaction:\n", "compaction:\n  summarizer_candidate: {provider: gateway, model: tier-3}\n", 1)
}

const smallSummarizerUsable = 700

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
// accumulator over the summarizer's small window — each call carries the
// previous call's summary and only source no call saw — and the compacted
// segment replaces them. Every request stays within its usable input.
func TestPreventiveCompactionRefinesSequentially(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallSummarizer})
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
	var folds []llmtest.Reply
	for i := range agent.MaxSummaryCalls {
		folds = append(folds, text(fmt.Sprintf("FOLD-%d: wrote notes.", i)))
	}
	e.script.Add("summary", folds...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	reqs := summaryRequests(e)
	if len(reqs) < 2 {
		t.Fatalf("summary calls = %d, want the source folded over several", len(reqs))
	}
	if strings.Contains(reqs[0], "SUMMARY SO FAR") || !strings.Contains(reqs[0], "A1 A1") {
		t.Errorf("first fold does not carry the oldest source: %.200q", reqs[0])
	}
	sources := []string{reqs[0]}
	for i, r := range reqs[1:] {
		wrapper := fmt.Sprintf("SUMMARY SO FAR:\nFOLD-%d: wrote notes.\n\nNEW TRANSCRIPT (extend the summary with it):\n", i)
		if !strings.HasPrefix(r, wrapper) {
			t.Errorf("fold %d is not the accumulator plus new source: %.300q", i+1, r)
		}
		sources = append(sources, strings.TrimPrefix(r, wrapper))
	}
	// The ranges are disjoint and contiguous: joined, they carry each
	// folded write once, whole.
	joined := strings.Join(sources, "")
	for _, tag := range []string{"A1", "B2", "C3"} {
		row := `TOOL CALL write {"content":"` + notes(tag)
		if n := strings.Count(joined, row); n != 1 {
			t.Errorf("the %s write travelled %d times", tag, n)
		}
	}
	rows := e.rows("project", "planner")
	var c struct {
		Text         string `json:"text"`
		SummaryCalls int    `json:"summary_calls"`
		Omitted      bool   `json:"omitted"`
	}
	want := fmt.Sprintf("FOLD-%d: wrote notes.", len(reqs)-1)
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &c) != nil || c.Text != want || c.SummaryCalls != len(reqs) || c.Omitted {
		t.Fatalf("compacted segment starts with %+v", rows[0])
	}
	ev := e.events("session_compacted")
	if len(ev) != 1 || ev[0].Data["tokens_after"].(float64) >= ev[0].Data["tokens_before"].(float64) {
		t.Fatalf("session_compacted = %+v", ev)
	}
	after := false
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "summary" && (len(r.Raw)+3)/4 > smallSummarizerUsable {
			t.Errorf("a summary request of about %d tokens exceeds the summarizer's usable input", (len(r.Raw)+3)/4)
		}
		if runtimeKey(r) != "planner@project" {
			continue
		}
		if est := (len(r.Raw) + 3) / 4; est > 8000 {
			t.Errorf("a planner request of about %d tokens exceeds the usable input of 8000", est)
		}
		if strings.Contains(string(r.Raw), want) {
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

// TestSummaryRequestsAdmittedExactly: a summary source larger than the
// summarizer candidate's window — multibyte notes — is folded over
// sequential disjoint ranges: every summary request the provider receives
// fits floor(U×C) − 2000 measured on the bytes received, the ranges cut
// only between code points (a split code point would reach the provider as
// U+FFFD), each source row travels once, at most 16 calls.
func TestSummaryRequestsAdmittedExactly(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallSummarizer})
	notes := func(tag string) string { return strings.Repeat(tag+" Grüße 世界 😀 ", 300) }
	var steps []llmtest.Reply
	for i := range 5 {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": notes(fmt.Sprintf("N%d", i))}))
	}
	e.script.Add("planner@project", append(steps, finishRun()...)...)
	var folds []llmtest.Reply
	for i := range 2 * agent.MaxSummaryCalls {
		folds = append(folds, text(fmt.Sprintf("FOLD-%d.", i)))
	}
	e.script.Add("summary", folds...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	var ranges []string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "summary" {
			continue
		}
		if tok := (len(r.Raw) + 3) / 4; tok > smallSummarizerUsable {
			t.Errorf("summary request %d received with %d tokens, more than %d", len(ranges), tok, smallSummarizerUsable)
		}
		if strings.Contains(string(r.Raw), `\ufffd`) || strings.ContainsRune(string(r.Raw), utf8.RuneError) {
			t.Errorf("summary request %d carries a code point cut in two", len(ranges))
		}
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatal(err)
		}
		src := body.Messages[len(body.Messages)-1].Content
		if _, after, ok := strings.Cut(src, "(extend the summary with it):\n"); ok {
			src = after
		}
		ranges = append(ranges, src)
	}
	cs := compactions(e)
	if len(cs) == 0 || len(ranges) < 3 {
		t.Fatalf("%d compactions, %d summary calls", len(cs), len(ranges))
	}
	calls := 0
	for _, c := range cs {
		if n := int(c["summary_calls"].(float64)); n > agent.MaxSummaryCalls {
			t.Errorf("a compaction made %d summary calls", n)
		} else {
			calls += n
		}
	}
	if calls != len(ranges) {
		t.Errorf("compactions count %d summary calls, the provider received %d", calls, len(ranges))
	}
	// The first compaction's ranges are its source split once: each
	// folded note's call row (whole, never clipped) is larger than a
	// request may be, so it is cut between code points and its pieces,
	// joined, are the row once. The oldest note is always folded.
	first := strings.Join(ranges[:int(cs[0]["summary_calls"].(float64))], "")
	for i := range 5 {
		row := fmt.Sprintf(`TOOL CALL write {"content":"N%d `, i)
		n := strings.Count(first, row)
		if n > 1 || (i == 0 && n != 1) {
			t.Errorf("note %d's call travelled %d times in the first compaction", i, n)
		}
		if n != 1 {
			continue
		}
		whole := fmt.Sprintf(`TOOL CALL write {"content":%q,"path":"n%d.txt"}`, notes(fmt.Sprintf("N%d", i)), i)
		if !strings.Contains(first, whole) {
			t.Errorf("note %d's call row did not travel whole", i)
		}
		for _, r := range ranges {
			if strings.Contains(r, row+strings.Repeat(fmt.Sprintf("N%d Grüße 世界 😀 ", i), 150)) {
				t.Errorf("note %d's call row travelled in one request: no code-point refinement", i)
			}
		}
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

// TestInadmissibleSummaryDeclaresOmission: a summarizer whose window
// leaves no room for even the summary prompt receives no request: the
// summary is unavailable, a declared omission stands and the node goes on.
func TestInadmissibleSummaryDeclaresOmission(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: func(cfg string) string {
		cfg = strings.Replace(cfg, "    capabilities:\n      contextWindowTokens: 128000",
			"    modelCapabilities:\n      tier-3: {contextWindowTokens: 2300, maxOutputTokens: 2000, toolsMode: native}\n    capabilities:\n      contextWindowTokens: 128000", 1)
		return strings.Replace(cfg, "compaction:\n", "compaction:\n  summarizer_candidate: {provider: gateway, model: tier-3}\n", 1)
	}})
	rejectionScript(e, finishRun()...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("summary"); n != 0 {
		t.Errorf("summary requests = %d, want none", n)
	}
	if ev := e.events("compaction_summary_inadmissible"); len(ev) != 1 {
		t.Errorf("inadmissible events = %d", len(ev))
	}
	rows := e.rows("project", "planner")
	var c struct {
		Text    string `json:"text"`
		Omitted bool   `json:"omitted"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &c) != nil || !c.Omitted || !strings.Contains(c.Text, "no summary request fits") {
		t.Fatalf("compacted segment starts with %+v", rows[0])
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

// plannerRequests returns the messages of each planner request, in order,
// as "role: content" lines (an assistant's calls as "call NAME").
func plannerRequests(e *env) [][]string {
	var out [][]string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "planner@project" {
			continue
		}
		var body struct {
			Messages []struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			e.t.Fatal(err)
		}
		var seq []string
		for _, m := range body.Messages {
			line := m.Role + ": " + m.Content
			for _, c := range m.ToolCalls {
				line = strings.TrimSuffix(line, " ") + " call " + c.Function.Name
			}
			seq = append(seq, line)
		}
		out = append(out, seq)
	}
	return out
}

// matchSequence checks a request's messages against want, one pattern per
// message: "role: prefix" (the message starts with it).
func matchSequence(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d messages, want %d:\n%s", what, len(got), len(want), strings.Join(got, "\n---\n"))
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("%s: message %d = %.160q, want it to start with %q", what, i, got[i], want[i])
		}
	}
}

// TestContextProjectionOrder: every planner request is the system prompt,
// one provenance boundary, the history and the refreshed state as the final
// system block. After a compaction the history is, in order, the summary,
// the newest refusal fact, the node instructions and the uncovered suffix;
// the summarizer's source lists the fact before the history.
func TestContextProjectionOrder(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.script.Add("planner@project", llmtest.Reply{Status: 400, ErrorCode: "content_policy_violation", ErrorMessage: "refused"})
	rejectionScript(e, finishRun()...)
	e.script.Add("summary", text("SUMMARY: wrote notes.txt."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	const (
		sys      = "system: "
		boundary = "system: The conversation history follows."
		state    = "system: Latest state snapshot (observed for this model call; record descriptors only"
		prompt   = "user: This card is starting for the first time."
		read     = "tool:      1\tline of notes"
		fact     = "user: [Runtime fact] The provider refused an earlier request of this conversation under its content policy (refusal 1;"
	)
	reqs := plannerRequests(e)
	if len(reqs) < 6 {
		t.Fatalf("planner requests = %d", len(reqs))
	}
	before := []string{sys, boundary, prompt, state}
	matchSequence(t, "first request", reqs[0], before)
	// The pinned retry after the refusal is the same request; the refusal
	// marker itself is not history.
	matchSequence(t, "retry after the refusal", reqs[1], before)
	matchSequence(t, "rejected request", reqs[3], []string{sys, boundary, prompt,
		"assistant: call write", "tool: ", "assistant: call read", read, state})
	if strings.Contains(reqs[3][0], "boundary") || !strings.Contains(reqs[3][0], "You are the planner agent") {
		t.Errorf("the first block is not the system prompt: %.100q", reqs[3][0])
	}
	matchSequence(t, "request after the compaction", reqs[4], []string{sys, boundary,
		"user: Summary of the earlier conversation (older messages were compacted):\n\nSUMMARY: wrote notes.txt.",
		fact, prompt, "assistant: call read", read, state})
	src := summaryRequests(e)
	if len(src) != 1 || !strings.HasPrefix(src[0], "RUNTIME FACT: The provider refused") ||
		strings.Index(src[0], "RUNTIME FACT") > strings.Index(src[0], "USER: This card is starting") {
		t.Errorf("summary source does not put the fact before the history: %.300q", src)
	}
	// Each later request keeps the order with the new suffix.
	last := reqs[len(reqs)-1]
	if last[1] != reqs[0][1] || !strings.HasPrefix(last[len(last)-1], state) || !strings.HasPrefix(last[3], fact) {
		t.Errorf("last request lost the order:\n%s", strings.Join(last, "\n---\n"))
	}
}

// finishRun is the rest of a classic run: the planner writes its plan and
// finishes, then the reviewer's assessment.
func finishRun() []llmtest.Reply {
	return []llmtest.Reply{
		call("write", map[string]any{"path": "record:plan", "content": "plan"}),
		emit("done", "planned", nil),
		call("write", map[string]any{"path": "record:assessment", "content": "ok"}),
		emit("done", "ok", map[string]any{"verdict": "complete"}),
	}
}

// exactWindow is smallWindow with preventive compaction off, so only local
// admission (and a provider's rejection) compacts.
func exactWindow(cfg string) string {
	return strings.Replace(smallWindow(cfg), "compaction:\n  enabled: true", "compaction:\n  enabled: false", 1)
}

// compactions returns the session_compacted events' data.
func compactions(e *env) []map[string]any {
	var out []map[string]any
	for _, ev := range e.events("session_compacted") {
		out = append(out, ev.Data)
	}
	return out
}

// TestLocalExactCompactionBeforeIO: a request whose exact accounting
// (ceil(body bytes/4) plus image reservations) exceeds the usable input is
// never sent: one local-exact compaction first weighs both endpoints by
// accounting bytes and publishes the one with fewer, and the rebuilt
// request fits.
func TestLocalExactCompactionBeforeIO(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: exactWindow})
	notes := func(tag string) string { return strings.Repeat(tag+" ", 1300) }
	var steps []llmtest.Reply
	for i := range 8 {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": notes(fmt.Sprintf("N%d", i))}))
	}
	e.script.Add("planner@project", append(steps, finishRun()...)...)
	e.script.Add("summary", text("FAR: wrote n0 to n6."), text("AGAIN: more notes."), text("AGAIN: more notes."), text("AGAIN: more notes."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" && (len(r.Raw)+3)/4 > 8000 {
			t.Errorf("a planner request of about %d tokens was sent beyond the usable input of 8000", (len(r.Raw)+3)/4)
		}
	}
	cs := compactions(e)
	if len(cs) == 0 {
		t.Fatal("no compaction")
	}
	c := cs[0]
	if c["mode"] != "local_exact" || c["accounting_bytes_after"].(float64) >= c["accounting_bytes_before"].(float64) {
		t.Fatalf("first compaction = %+v", c)
	}
	// The source fits the summarizer (the route's window): one call.
	if c["summary_calls"].(float64) != 1 {
		t.Errorf("summary calls = %v, want the source in one call", c["summary_calls"])
	}
	// The furthest legal cut keeps only the newest step (assistant, call,
	// result) after the summary and the node's marker and prompt.
	rows := e.rows("project", "planner")
	if len(cs) != 1 || c["kept_rows"].(float64) != 6 || !strings.Contains(string(rows[0].Content), "FAR: wrote n0 to n6.") {
		t.Errorf("published candidate is not the furthest endpoint's: %+v, %s", c, rows[0].Content)
	}
	if len(e.events("compaction_not_smaller")) != 0 || len(e.events("admission_refused")) != 0 {
		t.Errorf("unexpected refusal events")
	}
}

// TestLocalAdmissionRefusesWhatCannotFit: when the one local-exact pass
// cannot bring the request within the usable input (the newest bundle
// alone is too large), it is refused before any I/O: no second pass, and
// the node blocks saying it was not sent.
func TestLocalAdmissionRefusesWhatCannotFit(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: exactWindow})
	e.script.Add("planner@project", call("write", map[string]any{"path": "huge.txt", "content": strings.Repeat("huge ", 9000)}))
	e.script.Add("summary", text("S: the node began."))
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "it was not sent") {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("planner@project"); n != 1 {
		t.Errorf("planner requests = %d, want only the one before the write", n)
	}
	if n := e.script.Count("summary"); n > 1 {
		t.Errorf("summary calls = %d: more than one local pass", n)
	}
	ev := e.events("admission_refused")
	if len(ev) != 1 || ev[0].Data["tokens"].(float64) <= 8000 {
		t.Fatalf("admission_refused = %+v", ev)
	}
}

// TestAuthoritativeCompactionAcceptsFirstReductionOnce: after the
// provider's context rejection the first candidate with fewer tokens is
// published (the preferred endpoint: one summary call, the fallback never
// folded); a second rejection is final — no third request.
func TestAuthoritativeCompactionAcceptsFirstReductionOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	var steps []llmtest.Reply
	for i := range 6 {
		steps = append(steps, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": strings.Repeat("note ", 400)}))
	}
	reject := llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"}
	e.script.Add("planner@project", append(steps, reject, reject, text("never asked"))...)
	e.script.Add("summary", text("FIRST: wrote the early notes."), text("never asked"))
	sum := runToEnd(t, e)
	if sum.Outcome != "blocked" || !strings.Contains(sum.Reason, "still too large for the model after compaction") {
		t.Fatalf("run = %+v", sum)
	}
	if n := e.script.Count("planner@project"); n != 8 {
		t.Errorf("planner requests = %d, want 6 steps and 2 rejected passes", n)
	}
	if n := e.script.Count("summary"); n != 1 {
		t.Errorf("summary calls = %d, want 1 (first reduction accepted)", n)
	}
	cs := compactions(e)
	if len(cs) != 1 || cs[0]["mode"] != "authoritative" || cs[0]["tokens_after"].(float64) >= cs[0]["tokens_before"].(float64) {
		t.Fatalf("compactions = %+v", cs)
	}
	// The preferred endpoint keeps more than the furthest legal cut (the
	// newest step's assistant row) would.
	rows := e.rows("project", "planner")
	kept := 0
	for _, r := range rows {
		if r.Kind == "assistant" {
			kept++
		}
	}
	if kept < 2 {
		t.Errorf("kept %d steps: the furthest endpoint was used, not the first reduction", kept)
	}
}

// TestOversizedNewestRoundSplitsBetweenPairs: a single step whose calls
// outgrow the tail is split at a call/result pair boundary — the older
// pairs are folded with the step's assistant row, the newest pair is kept
// whole — and the provider receives that pair as a call and its result.
func TestOversizedNewestRoundSplitsBetweenPairs(t *testing.T) {
	e := newEnv(t, envOptions{configEdit: smallWindow})
	var many llmtest.Reply
	for i := range 8 {
		many.ToolCalls = append(many.ToolCalls, call("write", map[string]any{"path": fmt.Sprintf("n%d.txt", i), "content": strings.Repeat(fmt.Sprintf("P%d ", i), 1300)}).ToolCalls...)
	}
	e.script.Add("planner@project", append([]llmtest.Reply{many}, finishRun()...)...)
	e.script.Add("summary", text("FOLD 1."), text("FOLD 2."), text("FOLD 3."), text("FOLD 4."), text("FOLD 5."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	segs, err := e.p.Sessions.Load(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project", state.TailTruncate)
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments = %d, %v", len(segs), err)
	}
	rows := segs[1]
	// summary, node marker, prompt, then the newest pair whole.
	if len(rows) < 5 || rows[0].Kind != "summary" || rows[3].Kind != "tool_call" || rows[4].Kind != "tool_result" || rows[3].CallID != rows[4].CallID ||
		rows[3].CallID != many.ToolCalls[7].ID {
		t.Fatalf("compacted segment does not keep the newest pair: %+v", rows[:min(len(rows), 5)])
	}
	var sum struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(rows[0].Content, &sum)
	var after string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" && sum.Text != "" && strings.Contains(string(r.Raw), "earlier conversation (older messages were compacted):\\n\\n"+sum.Text) {
			after = string(r.Raw)
			break
		}
	}
	if after == "" || strings.Contains(after, "P6 P6") || !strings.Contains(after, "P7 P7") ||
		strings.Count(after, many.ToolCalls[7].ID) != 2 {
		t.Errorf("the request after the split does not carry exactly the newest call and its result: %.2000s", after)
	}
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) == "planner@project" && (len(r.Raw)+3)/4 > 8000 {
			t.Errorf("a planner request of about %d tokens exceeds the usable input", (len(r.Raw)+3)/4)
		}
	}
}

// finalBlock returns the final system block of each planner request.
func finalBlocks(e *env) []string {
	var out []string
	for _, req := range plannerRequests(e) {
		last := req[len(req)-1]
		if !strings.HasPrefix(last, "system: ") {
			e.t.Fatalf("a planner request does not end with a system block: %.100q", last)
		}
		out = append(out, last)
	}
	return out
}

// TestStateBlockCarriesDescriptorsOnly: the final system block describes
// the node's records — locator, kind, version, size, the node's use — and
// never carries their content, which the agent reads with its tools; a
// compaction's genesis keeps those descriptors (latest_record_observations)
// and the request after it shows them with the summary, without bodies.
func TestStateBlockCarriesDescriptorsOnly(t *testing.T) {
	const marker, objective = "BODY-MARKER-7F3A", "Build a hello tool. OBJECTIVE-MARKER-91"
	e := newEnv(t, envOptions{objective: objective})
	plan := strings.Repeat("step "+marker+" ", 40)
	e.script.Add("planner@project", append([]llmtest.Reply{
		call("write", map[string]any{"path": "record:plan", "content": plan}),
		call("read", map[string]any{"path": "record:plan"}),
	}, append([]llmtest.Reply{{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"}}, finishRun()...)...)...)
	e.script.Add("summary", text("SUMMARY: wrote the plan."))
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	blocks := finalBlocks(e)
	if len(blocks) < 4 {
		t.Fatalf("planner requests = %d", len(blocks))
	}
	draft := fmt.Sprintf("- record:plan (mode continue, gate updated) — open draft (revision 2, on accepted version 0), %d bytes\n", len(plan))
	accepted := fmt.Sprintf("- record:objective (mode read, gate exists) — accepted version 1, %d bytes\n", len(objective))
	for i, b := range blocks {
		if strings.Contains(b, marker) || strings.Contains(b, "OBJECTIVE-MARKER") || strings.Contains(b, "hello tool") {
			t.Errorf("final block %d carries record content: %.300q", i, b)
		}
		if strings.Contains(b, "Node: plan.") && !strings.Contains(b, accepted) {
			t.Errorf("final block %d does not describe the objective %q:\n%s", i, accepted, b)
		}
	}
	if !strings.Contains(blocks[0], "- record:plan (mode continue, gate updated) — open draft (revision 1, on accepted version 0), 0 bytes\n") {
		t.Errorf("the first block does not describe the unchanged draft:\n%s", blocks[0])
	}
	if !strings.Contains(blocks[1], draft) {
		t.Errorf("the block after the write does not describe the written draft %q:\n%s", draft, blocks[1])
	}
	// The read tool returns the body: the agent reads through its tools.
	if reqs := plannerRequests(e); !strings.Contains(strings.Join(reqs[2], "\n"), "tool: ") || !strings.Contains(strings.Join(reqs[2], "\n"), marker) {
		t.Errorf("the read result does not carry the record body")
	}
	// The genesis keeps the descriptor, not the body.
	rows := e.rows("project", "planner")
	var g struct {
		Observations []map[string]any `json:"latest_record_observations"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &g) != nil || strings.Contains(string(rows[0].Content), marker) {
		t.Fatalf("genesis = %s", rows[0].Content)
	}
	var planObs map[string]any
	for _, o := range g.Observations {
		if o["record"] == "plan" {
			planObs = o
		}
	}
	if planObs == nil || planObs["locator"] != "record:plan" || planObs["kind"] != "draft" || planObs["bytes"] != float64(len(plan)) ||
		planObs["card"] != "project" || planObs["version"] != float64(0) || planObs["revision"] != float64(2) || len(g.Observations) != 2 {
		t.Fatalf("genesis observations = %+v", g.Observations)
	}
	for _, o := range g.Observations {
		for k := range o {
			if !strings.Contains(" locator card record kind version revision bytes mode gate ", " "+k+" ") {
				t.Errorf("genesis observation field %q is not a descriptor", k)
			}
		}
	}
	var after []string
	for _, req := range plannerRequests(e) {
		if strings.Contains(strings.Join(req, "\n"), "SUMMARY: wrote the plan.") {
			after = req
			break
		}
	}
	if after == nil || !strings.HasPrefix(after[2], "user: Summary of the earlier conversation") ||
		!strings.Contains(after[2], "Records as last observed before this compaction") || !strings.Contains(after[2], strings.TrimSuffix(draft, "\n")) || strings.Contains(after[2], marker) || strings.Contains(after[2], "OBJECTIVE-MARKER") {
		t.Errorf("the summary message after the compaction = %.600q", after)
	}
}

// TestStateBlockDescribesDescendantRecords: the project's assess node
// reviews its descendants' summary and review records through descriptors
// — exact-version locators with sizes — never their content.
func TestStateBlockDescribesDescendantRecords(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.script.Add("analyst",
		call("create_card", map[string]any{"parent_id": "project", "title": "Hello files", "records": map[string]string{"brief": "Write hello.txt and world.txt."}}),
		call("start_project", map[string]any{}),
		text("Started."),
	)
	scriptFlow(e.script)
	ctx := context.Background()
	if _, _, err := e.rt.Analyst().Submit(ctx, "Create a goal for the hello files and start."); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Analyst().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if sum := e.waitRunEnded(); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	var assess []string
	for _, b := range finalBlocks(e) {
		if strings.Contains(b, "Node: assess.") {
			assess = append(assess, b)
		}
	}
	if len(assess) == 0 {
		t.Fatal("no assess request")
	}
	for _, want := range []struct{ card, name string }{{"project.a.a", "summary"}, {"project.a.a", "review"}, {"project.a.b", "summary"}, {"project.a.b", "review"}} {
		content, v := e.record(want.card, want.name)
		line := fmt.Sprintf("- record:%s/%s@%d — accepted version %d, %d bytes\n", want.card, want.name, v, v, len(content))
		for _, b := range assess {
			if !strings.Contains(b, line) {
				t.Errorf("assess block does not describe %s/%s as %q:\n%s", want.card, want.name, line, b)
			}
			if strings.Contains(b, content) {
				t.Errorf("assess block carries the content of %s/%s", want.card, want.name)
			}
		}
	}
}
