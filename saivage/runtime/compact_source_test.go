package runtime_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/saivage/state"
)

// summarizerWindow keeps the route's 128,000-token window and makes
// gateway/tier-3 the summarizer with window tokens and 2,000 output
// tokens: summary requests are admitted against floor(window × 0.9) − 2000.
func summarizerWindow(window int) func(string) string {
	return func(cfg string) string {
		cfg = strings.Replace(cfg, "    capabilities:\n      contextWindowTokens: 128000",
			fmt.Sprintf("    modelCapabilities:\n      tier-3: {contextWindowTokens: %d, maxOutputTokens: 2000, toolsMode: native}\n    capabilities:\n      contextWindowTokens: 128000", window), 1)
		return strings.Replace(cfg, "compaction:\n", "compaction:\n  summarizer_candidate: {provider: gateway, model: tier-3}\n", 1)
	}
}

// longFile writes a file of lines distinct by their number (each under
// the read tool's line limit), size bytes in all, and returns the line
// markers.
func longFile(t *testing.T, dir, name string, size int) []string {
	t.Helper()
	var b strings.Builder
	var marks []string
	for i := 0; b.Len() < size; i++ {
		m := fmt.Sprintf("line-%05d", i)
		marks = append(marks, m)
		b.WriteString(m + " Grüße 世界 " + strings.Repeat("x", 40) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return marks
}

// longReadScript reads the long file, writes two small notes, then the
// provider rejects the conversation as too long: the authoritative
// compaction folds the read (its result is more than half the history).
func longReadScript(e *env, name string) {
	reject := llmtest.Reply{Status: 400, ErrorCode: "context_length_exceeded", ErrorMessage: "too many tokens"}
	e.script.Add("planner@project", append([]llmtest.Reply{
		call("read", map[string]any{"path": name}),
		call("write", map[string]any{"path": "a.txt", "content": "note a"}),
		call("write", map[string]any{"path": "b.txt", "content": "note b"}),
		reject,
	}, finishRun()...)...)
}

// summaryRanges returns the new source each summary request carried (its
// last message without the accumulator wrapper), and checks each request
// against the summarizer's usable input on the bytes received.
func summaryRanges(t *testing.T, e *env, usable int) []string {
	t.Helper()
	var ranges []string
	for _, r := range e.srv.Requests() {
		if runtimeKey(r) != "summary" {
			continue
		}
		if tok := (len(r.Raw) + 3) / 4; tok > usable {
			t.Errorf("summary request %d received with %d tokens, more than %d", len(ranges), tok, usable)
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
	return ranges
}

// readResult returns the content of the session's first read result, as
// recorded (the folded segment's row).
func readResult(t *testing.T, e *env) string {
	t.Helper()
	segs, err := e.p.Sessions.Load(e.p.Cards.SessionDir("project", "planner"), "agent:planner:project", state.TailTruncate)
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		for _, r := range seg {
			if r.Kind == "tool_result" && r.Name == "read" {
				var c struct{ Content string }
				if err := json.Unmarshal(r.Content, &c); err != nil {
					t.Fatal(err)
				}
				return c.Content
			}
		}
	}
	t.Fatal("no read result in the session")
	return ""
}

// TestLongRowTravelsWholeAcrossRefineCalls: a 30,000-byte tool result is
// part of the summary source whole — no per-row clip — and, larger than
// one summary request may be, it is cut between code points across
// sequential refine calls: joined, the ranges carry the row exactly once
// (every line of the file once), each request within the summarizer's
// usable input, within the 16-call budget.
func TestLongRowTravelsWholeAcrossRefineCalls(t *testing.T) {
	const window = 6000
	usable := window*9/10 - 2000 // 3,400 tokens, about 13,600 bytes
	e := newEnv(t, envOptions{configEdit: summarizerWindow(window)})
	marks := longFile(t, e.dir, "long.txt", 30000)
	longReadScript(e, "long.txt")
	var folds []llmtest.Reply
	for i := range agent.MaxSummaryCalls {
		folds = append(folds, text(fmt.Sprintf("FOLD-%d: read long.txt.", i)))
	}
	e.script.Add("summary", folds...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	result := readResult(t, e)
	if len(result) < 30000 {
		t.Fatalf("the read result is %d bytes, want the whole file", len(result))
	}
	ranges := summaryRanges(t, e, usable)
	cs := compactions(e)
	if len(cs) != 1 || cs[0]["omitted"] == true {
		t.Fatalf("compactions = %+v", cs)
	}
	if n := int(cs[0]["summary_calls"].(float64)); n != len(ranges) || n > agent.MaxSummaryCalls {
		t.Fatalf("summary calls = %d, requests received = %d", n, len(ranges))
	}
	joined := strings.Join(ranges, "")
	if n := strings.Count(joined, "TOOL RESULT read: "+result); n != 1 {
		t.Fatalf("the whole read result travelled %d times", n)
	}
	carriers := 0
	for _, r := range ranges {
		if strings.Contains(r, "line-") {
			carriers++
		}
	}
	if carriers < 2 {
		t.Errorf("the read result travelled in %d request(s), want it cut across several", carriers)
	}
	for _, m := range marks {
		if n := strings.Count(joined, m); n != 1 {
			t.Fatalf("%s reached the summarizer %d times", m, n)
		}
	}
	if strings.Contains(joined, "…[truncated]") {
		t.Error("a source row was clipped")
	}
}

// TestLongRowBeyondTheCallBudgetIsOmitted: a tool result too large to
// travel in 16 summary requests of the summarizer's window (16 × 700
// tokens is less than the row) is not clipped to fit: the 16 logical
// calls are spent, no 17th is made, and a declared omission stands.
func TestLongRowBeyondTheCallBudgetIsOmitted(t *testing.T) {
	const window = 3000
	usable := window*9/10 - 2000 // 700 tokens, 2,800 bytes
	e := newEnv(t, envOptions{configEdit: summarizerWindow(window)})
	longFile(t, e.dir, "long.txt", 48000)
	longReadScript(e, "long.txt")
	var folds []llmtest.Reply
	for i := range agent.MaxSummaryCalls + 4 {
		folds = append(folds, text(fmt.Sprintf("F%d.", i)))
	}
	e.script.Add("summary", folds...)
	if sum := runToEnd(t, e); sum.Outcome != "done" {
		t.Fatalf("run = %+v", sum)
	}
	ranges := summaryRanges(t, e, usable)
	if len(ranges) != agent.MaxSummaryCalls {
		t.Errorf("summary requests = %d, want the whole budget of %d and no more", len(ranges), agent.MaxSummaryCalls)
	}
	joined := strings.Join(ranges, "")
	if !strings.Contains(joined, "line-00000") || strings.Contains(joined, "…[truncated]") {
		t.Errorf("the read result did not travel unclipped from its first line")
	}
	cs := compactions(e)
	if len(cs) != 1 || cs[0]["omitted"] != true || cs[0]["summary_calls"].(float64) != agent.MaxSummaryCalls {
		t.Fatalf("compactions = %+v", cs)
	}
	rows := e.rows("project", "planner")
	var c struct {
		Text    string `json:"text"`
		Omitted bool   `json:"omitted"`
	}
	if rows[0].Kind != "summary" || json.Unmarshal(rows[0].Content, &c) != nil || !c.Omitted ||
		!strings.Contains(c.Text, fmt.Sprintf("%d-call budget", agent.MaxSummaryCalls)) {
		t.Fatalf("compacted segment starts with %+v", rows[0])
	}
}
