package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		b      agent.Budget
		usable int
		over   int // smallest token count that triggers
	}{
		{agent.Budget{ContextWindow: 8192, MaxOutput: 1024}, 6348, 5079},
		{agent.Budget{ContextWindow: 100_000, Utilization: 0.5, Trigger: 0.5, MaxOutput: 10_000}, 40_000, 20_000},
		{agent.Budget{ContextWindow: 4000}, 0, -1}, // the default output reserve leaves nothing
		{agent.Budget{}, 0, -1},
	} {
		if got := tc.b.UsableInput(); got != tc.usable {
			t.Errorf("%+v: usable %d, want %d", tc.b, got, tc.usable)
		}
		if tc.over < 0 {
			if tc.b.Over(1 << 30) {
				t.Errorf("%+v: over without a usable budget", tc.b)
			}
			continue
		}
		if tc.b.Over(tc.over-1) || !tc.b.Over(tc.over) {
			t.Errorf("%+v: trigger is not at %d", tc.b, tc.over)
		}
	}
}

// history builds n rounds of a conversation, each with a tool call and its result.
func history(n int) []llm.Message {
	msgs := []llm.Message{{Role: "system", Content: "be brief"}}
	for i := range n {
		id := "c" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
		msgs = append(msgs,
			llm.Message{Role: "user", Content: "question " + strings.Repeat("word ", 60)},
			llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{call(id, "lookup", `{"q":"x"}`)}},
			llm.Message{Role: "tool", ToolCallID: id, Content: "result " + strings.Repeat("data ", 60)},
			llm.Message{Role: "assistant", Content: "answer " + strings.Repeat("text ", 30)},
		)
	}
	return msgs
}

func paired(t *testing.T, msgs []llm.Message) {
	t.Helper()
	if err := agent.CheckPairing(msgs); err != nil {
		t.Fatal(err)
	}
}

func TestSummaryCompactorBeforeAStep(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("summarizer", llmtest.Reply{Content: "The user asked many questions; lookup found data each time."})
	srv.Enqueue("tier-5", llmtest.Reply{Content: "Here you are."})
	msgs := append(history(16), llm.Message{Role: "user", Content: "and now?"})
	b := agent.Budget{ContextWindow: 6000, MaxOutput: 1000}
	if !b.Over(agent.EstimateTokens(msgs, nil)) {
		t.Fatalf("the test conversation (%d tokens) does not exceed the budget", agent.EstimateTokens(msgs, nil))
	}
	rec := &recorder{}
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs, OnEvent: rec.on,
		Compactor: &agent.SummaryCompactor{Budget: b, SummaryModel: "summarizer"}})
	if err != nil || res.Text != "Here you are." {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if got := rec.kinds(); got != "Compacted AssistantDelta AssistantMessage Done" {
		t.Fatalf("events %s", got)
	}
	if len(res.Compactions) != 1 || res.History == nil {
		t.Fatalf("compactions %d, history %d", len(res.Compactions), len(res.History))
	}
	h := res.History
	if h[0].Content != "be brief" || !agent.IsSummary(h[1]) || !strings.Contains(h[1].Content, "lookup found data") {
		t.Fatalf("history starts %+v %+v", h[0], h[1])
	}
	if last := h[len(h)-1]; last.Content != "Here you are." || h[len(h)-2].Content != "and now?" {
		t.Fatalf("history ends %+v", h[len(h)-2:])
	}
	paired(t, h)
	if c := res.Compactions[0]; c.Covered+len(h)-2 != len(msgs) {
		t.Fatalf("covered %d of %d messages, kept %d", c.Covered, len(msgs), len(h)-3)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Model != "summarizer" || !strings.Contains(string(reqs[0].Raw), "TOOL CALL") {
		t.Fatalf("requests %+v", reqs)
	}
	if n := agent.EstimateTokens(h[:len(h)-1], nil); b.Over(n) {
		t.Fatalf("the compacted conversation (%d tokens) is still over the budget", n)
	}
}

func TestContextRejectionCompactsAndRetries(t *testing.T) {
	srv, client := setup(t)
	srv.ContextWindow = 5000
	srv.Enqueue("tier-5", llmtest.Reply{Content: "summary of it all"}, llmtest.Reply{Content: "answered"})
	msgs := append(history(22), llm.Message{Role: "user", Content: "and now?"})
	rec := &recorder{}
	// No window known: only the provider's rejection compacts.
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs, OnEvent: rec.on,
		Compactor: &agent.SummaryCompactor{}})
	if err != nil || res.Text != "answered" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if got := rec.kinds(); got != "Compacted AssistantDelta AssistantMessage Done" {
		t.Fatalf("events %s", got)
	}
	paired(t, res.History)
	if len(res.History) >= len(msgs) {
		t.Fatalf("history %d messages, was %d", len(res.History), len(msgs))
	}
}

func TestCompactorKeepsPairsInsideATurn(t *testing.T) {
	srv, client := setup(t)
	// A turn whose own tool results push it over: the second step compacts.
	big := strings.Repeat("data ", 1500)
	srv.Enqueue("tier-5", llmtest.Reply{ToolCalls: []llm.ToolCall{call("t1", "lookup", `{"q":"a"}`), call("t2", "lookup", `{"q":"b"}`)}})
	srv.Enqueue("tier-5", llmtest.Reply{Content: "summary"}, llmtest.Reply{Content: "done"})
	tool := agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "lookup"}, Fn: func(context.Context, json.RawMessage) (agent.ToolResult, error) {
		return agent.ToolResult{Content: big}, nil
	}}
	msgs := append(history(4), llm.Message{Role: "user", Content: "go"})
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs, Tools: []agent.Tool{tool},
		Compactor: &agent.SummaryCompactor{Budget: agent.Budget{ContextWindow: 6000, MaxOutput: 1000}}})
	if err != nil || res.Text != "done" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if len(res.Messages) != 4 { // call, two results, answer
		t.Fatalf("run messages %d", len(res.Messages))
	}
	paired(t, res.History)
	paired(t, res.Messages)
}

func TestRefine(t *testing.T) {
	parts := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("row%02d %s", i, strings.Repeat("x", 90)))
		}
		return out
	}
	t.Run("sequential disjoint folds", func(t *testing.T) {
		var sources []string
		r := &agent.Refine{ChunkBytes: 250, Call: func(_ context.Context, acc, src string, _ bool) (string, error) {
			sources = append(sources, src)
			return acc + "+" + strings.Fields(src)[0], nil
		}}
		acc, err := r.Advance(context.Background(), "S", parts(5))
		if err != nil || acc != "S+row00+row02+row04" || r.Calls() != 3 {
			t.Fatalf("acc = %q, calls %d, %v", acc, r.Calls(), err)
		}
		if strings.Count(strings.Join(sources, "\n\n"), "row") != 5 {
			t.Errorf("a row travelled twice or not at all: %q", sources)
		}
	})
	t.Run("one correction of an empty reply", func(t *testing.T) {
		var corrections []bool
		r := &agent.Refine{Call: func(_ context.Context, acc, src string, c bool) (string, error) {
			corrections = append(corrections, c)
			if len(corrections) == 1 || len(corrections) == 3 {
				return " ", nil
			}
			return "ok", nil
		}}
		if acc, err := r.Advance(context.Background(), "", parts(1)); err != nil || acc != "ok" {
			t.Fatalf("first advance = %q, %v", acc, err)
		}
		if _, err := r.Advance(context.Background(), "ok", parts(1)); err == nil || !strings.Contains(err.Error(), "after its correction") {
			t.Fatalf("second empty reply = %v", err)
		}
		if fmt.Sprint(corrections) != "[false true false]" {
			t.Errorf("corrections = %v", corrections)
		}
	})
	t.Run("16-call budget", func(t *testing.T) {
		r := &agent.Refine{ChunkBytes: 1, Call: func(_ context.Context, acc, _ string, _ bool) (string, error) { return acc + ".", nil }}
		acc, err := r.Advance(context.Background(), "", parts(agent.MaxSummaryCalls+1))
		if !errors.Is(err, agent.ErrSummaryBudget) || acc != "" || r.Calls() != agent.MaxSummaryCalls {
			t.Fatalf("acc = %q, calls %d, %v", acc, r.Calls(), err)
		}
	})
	t.Run("call error", func(t *testing.T) {
		boom := errors.New("boom")
		r := &agent.Refine{Call: func(context.Context, string, string, bool) (string, error) { return "", boom }}
		if _, err := r.Advance(context.Background(), "", parts(2)); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestSummaryCompactorNoSmallerChangesNothing: a summary longer than what
// it replaces is no compaction; the conversation is sent as it was.
func TestSummaryCompactorNoSmallerChangesNothing(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("summarizer", llmtest.Reply{Content: strings.Repeat("an overlong summary ", 3000)})
	srv.Enqueue("tier-5", llmtest.Reply{Content: "Here you are."})
	msgs := append(history(16), llm.Message{Role: "user", Content: "and now?"})
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs,
		Compactor: &agent.SummaryCompactor{Budget: agent.Budget{ContextWindow: 6000, MaxOutput: 1000}, SummaryModel: "summarizer"}})
	if err != nil || res.Text != "Here you are." || len(res.Compactions) != 0 || res.History != nil {
		t.Fatalf("run = %+v, %v", res, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || strings.Contains(string(reqs[1].Raw), "overlong summary") {
		t.Fatalf("the primary request carries the refused summary (%d requests)", len(reqs))
	}
}

// TestSummaryCompactorRefinesALongTranscript: covered messages larger than
// the summarizer's input are folded in sequential calls, the second one
// carrying the first summary and only newer messages, not cut.
func TestSummaryCompactorRefinesALongTranscript(t *testing.T) {
	srv, client := setup(t)
	srv.Enqueue("summarizer", llmtest.Reply{Content: "FIRST PART"}, llmtest.Reply{Content: "BOTH PARTS"}, llmtest.Reply{Content: "ALL PARTS"})
	srv.Enqueue("tier-5", llmtest.Reply{Content: "ok"})
	msgs := []llm.Message{{Role: "system", Content: "be brief"}}
	for i := range 12 {
		msgs = append(msgs, llm.Message{Role: "user", Content: fmt.Sprintf("note%02d %s", i, strings.Repeat("x", 3900))},
			llm.Message{Role: "assistant", Content: "noted"})
	}
	msgs = append(msgs, llm.Message{Role: "user", Content: "and now?"})
	// Usable input 10,000 tokens: the summarizer's chunk is 30,000 bytes.
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs,
		Compactor: &agent.SummaryCompactor{Budget: agent.Budget{ContextWindow: 12000, MaxOutput: 800, Utilization: 0.9, Trigger: 0.5}, SummaryModel: "summarizer"}})
	if err != nil || len(res.Compactions) != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	var sums []string
	for _, r := range srv.Requests() {
		if r.Model == "summarizer" {
			sums = append(sums, string(r.Raw))
		}
	}
	if len(sums) < 2 || strings.Contains(sums[0], "SUMMARY SO FAR") || !strings.Contains(sums[0], "note00") ||
		!strings.Contains(sums[1], `SUMMARY SO FAR:\nFIRST PART`) || strings.Contains(sums[1], "note00") {
		t.Fatalf("summary calls = %d: %.200q / %.200q", len(sums), sums[0], sums[min(1, len(sums)-1)])
	}
	if s := res.Compactions[0].Summary; s != map[int]string{2: "BOTH PARTS", 3: "ALL PARTS"}[len(sums)] {
		t.Errorf("summary = %q after %d calls", s, len(sums))
	}
}

// pngOf encodes a w×h PNG.
func pngOf(t *testing.T, w, h int) llm.Image {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return llm.Image{MIME: "image/png", Data: b.Bytes()}
}

// TestAccount: the exact local accounting is the canonical body (images
// travel beside it) plus 2·⌈w/32⌉·⌈h/32⌉ tokens per image: ceil(bytes/4)
// for admission, four accounting bytes per raster token for local-exact.
func TestAccount(t *testing.T) {
	for _, tc := range []struct {
		name       string
		images     []llm.Image
		wantRaster int
	}{
		{"text only", nil, 0},
		{"one 64×64 image", []llm.Image{pngOf(t, 64, 64)}, 8},
		{"two images, one partial tile", []llm.Image{pngOf(t, 64, 64), pngOf(t, 33, 1)}, 8 + 4},
		{"unreadable image reserves nothing", []llm.Image{{MIME: "image/png", Data: []byte("not a png")}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "system", Content: "sys"}, {Role: "tool", ToolCallID: "c1", Content: "é result", Images: tc.images}}}
			a := agent.Account(req)
			body, _ := json.Marshal(req)
			if !bytes.Equal(a.Body, body) || bytes.Contains(a.Body, []byte("PNG")) {
				t.Fatalf("body = %s", a.Body)
			}
			if a.Raster != tc.wantRaster {
				t.Errorf("raster = %d, want %d", a.Raster, tc.wantRaster)
			}
			if want := (len(body)+3)/4 + tc.wantRaster; a.Tokens() != want {
				t.Errorf("tokens = %d, want %d", a.Tokens(), want)
			}
			if want := len(body) + 4*tc.wantRaster; a.Bytes() != want {
				t.Errorf("accounting bytes = %d, want %d", a.Bytes(), want)
			}
		})
	}
}
