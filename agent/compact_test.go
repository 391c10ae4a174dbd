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
	"unicode/utf8"

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

func TestSummaryUsable(t *testing.T) {
	for _, tc := range []struct {
		window int
		u      float64
		want   int
	}{
		{0, 0.9, 0},        // unknown: Refine's default applies
		{10000, 0.9, 7000}, // floor(10000 × 0.9) − 2000
		{10000, 0, 7000},   // the default utilisation
		{2000, 0.9, 1},     // known, no room: nothing is admitted
		{3001, 0.5, 1},     // floor(1500.5) − 2000 < 0
		{100000, 0.5, 48000},
	} {
		if got := agent.SummaryUsable(tc.window, tc.u, agent.SummaryOutputTokens); got != tc.want {
			t.Errorf("SummaryUsable(%d, %v) = %d, want %d", tc.window, tc.u, got, tc.want)
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

// refineRequest is a minimal summary request for Refine tests.
func refineRequest(acc string, src []agent.SourcePart, correction bool) *llm.ChatRequest {
	return &llm.ChatRequest{Model: "s", MaxTokens: agent.SummaryOutputTokens, Messages: []llm.Message{
		{Role: "system", Content: "sum"}, agent.RefineMessage(acc, src, correction)}}
}

// sourceOf returns the new source a refine request carries (its text after
// the accumulator's wrapper) and its images.
func sourceOf(req *llm.ChatRequest) (string, []llm.Image) {
	m := req.Messages[len(req.Messages)-1]
	text := m.Content
	if _, after, ok := strings.Cut(text, "(extend the summary with it):\n"); ok {
		text = after
	}
	return text, m.Images
}

func TestRefine(t *testing.T) {
	textParts := func(texts ...string) []agent.SourcePart {
		var out []agent.SourcePart
		for _, s := range texts {
			out = append(out, agent.SourcePart{Text: s})
		}
		return out
	}
	rows := func(n int) []agent.SourcePart {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("row%02d %s", i, strings.Repeat("x", 90)))
		}
		return textParts(out...)
	}
	// usableFor is the usable input that admits exactly acc plus src.
	usableFor := func(acc string, src []agent.SourcePart) int {
		return agent.Account(refineRequest(acc, src, false)).Tokens()
	}
	t.Run("a source that fits travels in one call", func(t *testing.T) {
		var reqs []*llm.ChatRequest
		src := rows(5)
		r := &agent.Refine{Usable: usableFor("", src), Request: refineRequest, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			reqs = append(reqs, req)
			return "all", nil
		}}
		if acc, err := r.Advance(context.Background(), "", src); err != nil || acc != "all" || len(reqs) != 1 {
			t.Fatalf("acc %q, %d calls, %v", acc, len(reqs), err)
		}
		if got, _ := sourceOf(reqs[0]); strings.Count(got, "row") != 5 {
			t.Errorf("source = %q", got)
		}
	})
	t.Run("sequential disjoint folds of the largest fitting prefix", func(t *testing.T) {
		src := rows(9)
		// Room for the accumulator and three whole rows, not four.
		usable := usableFor("S+row00", src[:3])
		var sources []string
		r := &agent.Refine{Usable: usable, Request: refineRequest, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			if tok := agent.Account(req).Tokens(); tok > usable {
				t.Errorf("a request of %d tokens exceeds %d", tok, usable)
			}
			got, _ := sourceOf(req)
			sources = append(sources, got)
			return "S+" + got[:5], nil
		}}
		acc, err := r.Advance(context.Background(), "S", src)
		if err != nil {
			t.Fatal(err)
		}
		var whole []string
		for _, p := range src {
			whole = append(whole, p.Text)
		}
		if strings.Join(sources, "") != strings.Join(whole, "\n\n") {
			t.Errorf("the ranges are not the source split once, in order:\n%q", sources)
		}
		if acc == "S" || r.Calls() != len(sources) || r.Calls() < 3 || r.Calls() > agent.MaxSummaryCalls {
			t.Errorf("acc %q after %d calls", acc, r.Calls())
		}
	})
	t.Run("code-point refinement inside the next text", func(t *testing.T) {
		// One row larger than the window: it is cut, never inside a code
		// point, and the pieces are the row exactly.
		row := strings.Repeat("é€😀a", 400)
		usable := usableFor("ACCUMULATED", textParts(row[:700]))
		var pieces []string
		r := &agent.Refine{Usable: usable, Request: refineRequest, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			if tok := agent.Account(req).Tokens(); tok > usable {
				t.Errorf("a request of %d tokens exceeds %d", tok, usable)
			}
			got, _ := sourceOf(req)
			pieces = append(pieces, got)
			return "ACCUMULATED", nil
		}}
		if _, err := r.Advance(context.Background(), "", textParts(row)); err != nil {
			t.Fatal(err)
		}
		if strings.Join(pieces, "") != row || len(pieces) < 3 {
			t.Fatalf("%d pieces do not make the row", len(pieces))
		}
		for i, p := range pieces {
			if !utf8.ValidString(p) {
				t.Errorf("piece %d is cut inside a code point", i)
			}
		}
		// The cut is the largest that fits: one more code point does not.
		first := pieces[1]
		rest := row[len(pieces[0])+len(first):]
		_, size := utf8.DecodeRuneInString(rest)
		if usableFor("ACCUMULATED", textParts(first+rest[:size])) <= usable {
			t.Errorf("the second range %d bytes is not the largest fitting prefix", len(first))
		}
	})
	t.Run("images stay atomic", func(t *testing.T) {
		img := pngOf(t, 256, 256)
		src := []agent.SourcePart{{Text: strings.Repeat("a", 300)}, {Image: &img}, {Text: "after"}}
		// The text and the image do not fit together: the text goes
		// alone, then the image whole with what follows.
		usable := usableFor("acc", src[1:])
		var got [][]llm.Image
		r := &agent.Refine{Usable: usable, Request: refineRequest, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			_, imgs := sourceOf(req)
			got = append(got, imgs)
			return "acc", nil
		}}
		if _, err := r.Advance(context.Background(), "", src); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(got[0]) != 0 || len(got[1]) != 1 || !bytes.Equal(got[1][0].Data, img.Data) {
			t.Fatalf("images per call = %v", got)
		}
		// An image that alone exceeds the window is not admitted.
		r = &agent.Refine{Usable: usableFor("", src[:1]), Request: refineRequest, Send: func(context.Context, *llm.ChatRequest) (string, error) { return "x", nil }}
		if _, err := r.Advance(context.Background(), "", src[1:]); !errors.Is(err, agent.ErrSummaryInadmissible) || r.Calls() != 0 {
			t.Fatalf("oversized image: %v after %d calls", err, r.Calls())
		}
	})
	t.Run("one correction of an empty reply", func(t *testing.T) {
		var corrections []bool
		r := &agent.Refine{Request: refineRequest, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			corrections = append(corrections, strings.Contains(req.Messages[1].Content, "no usable summary text"))
			if len(corrections) == 1 || len(corrections) == 3 {
				return " ", nil
			}
			return "ok", nil
		}}
		if acc, err := r.Advance(context.Background(), "", rows(1)); err != nil || acc != "ok" {
			t.Fatalf("first advance = %q, %v", acc, err)
		}
		if _, err := r.Advance(context.Background(), "ok", rows(1)); err == nil || !strings.Contains(err.Error(), "after its correction") {
			t.Fatalf("second empty reply = %v", err)
		}
		if fmt.Sprint(corrections) != "[false true false]" {
			t.Errorf("corrections = %v", corrections)
		}
	})
	t.Run("16-call budget", func(t *testing.T) {
		// One row per call (the first, without an accumulator, has room
		// for two): two more rows than calls.
		src := rows(agent.MaxSummaryCalls + 2)
		r := &agent.Refine{Usable: usableFor("ACC", src[:1]), Request: refineRequest,
			Send: func(_ context.Context, req *llm.ChatRequest) (string, error) { return "ACC", nil }}
		acc, err := r.Advance(context.Background(), "", src)
		if !errors.Is(err, agent.ErrSummaryBudget) || acc != "" || r.Calls() != agent.MaxSummaryCalls {
			t.Fatalf("acc = %q, calls %d, %v", acc, r.Calls(), err)
		}
	})
	t.Run("call error", func(t *testing.T) {
		boom := errors.New("boom")
		r := &agent.Refine{Request: refineRequest, Send: func(context.Context, *llm.ChatRequest) (string, error) { return "", boom }}
		if _, err := r.Advance(context.Background(), "", rows(2)); !errors.Is(err, boom) {
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

// TestSummaryCompactorAdmitsEachRequestExactly: a transcript larger than
// the summarizer's window — multibyte text and an image — is folded over
// sequential disjoint ranges. Every request the provider receives fits the
// summarizer's usable input measured on the bytes received (ceil(bytes/4)
// plus the image's raster reservation, 2000 output tokens reserved); the
// ranges are the transcript exactly, cut only between code points; the
// image travels whole in one request; at most 16 calls.
func TestSummaryCompactorAdmitsEachRequestExactly(t *testing.T) {
	srv, client := setup(t)
	for i := range agent.MaxSummaryCalls {
		srv.Enqueue("summarizer", llmtest.Reply{Content: fmt.Sprintf("FOLD %d: notes so far.", i)})
	}
	srv.Enqueue("tier-5", llmtest.Reply{Content: "ok"})
	img := pngOf(t, 320, 320)
	msgs := []llm.Message{{Role: "system", Content: "be brief"}}
	for i := range 12 {
		m := llm.Message{Role: "user", Content: fmt.Sprintf("note%02d %s", i, strings.Repeat("Grüße, 世界 😀 ", 150))}
		if i == 5 {
			m.Images = []llm.Image{img}
		}
		msgs = append(msgs, m, llm.Message{Role: "assistant", Content: "noted"})
	}
	msgs = append(msgs, llm.Message{Role: "user", Content: "and now?"})
	b := agent.Budget{ContextWindow: 6000, MaxOutput: 500, Utilization: 0.9, Trigger: 0.5}
	usable := agent.Budget{ContextWindow: 6000, MaxOutput: agent.SummaryOutputTokens, Utilization: 0.9}.UsableInput()
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs,
		Compactor: &agent.SummaryCompactor{Budget: b, SummaryModel: "summarizer"}})
	if err != nil || len(res.Compactions) != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	var ranges []string
	var images [][]string
	for _, sr := range summarizerRequests(t, srv) {
		r, user := sr.Request, sr.user
		raster := 0
		var urls []string
		for _, im := range user.Images {
			raster += agent.RasterTokens(im)
			urls = append(urls, im.DataURL())
		}
		if got := (len(r.Raw)+3)/4 + raster; got > usable {
			t.Errorf("summary request %d received with %d tokens, more than the usable %d", len(ranges), got, usable)
		}
		text := user.Content
		if _, after, ok := strings.Cut(text, "(extend the summary with it):\n"); ok {
			text = after
		} else if len(ranges) > 0 {
			t.Errorf("request %d does not carry the accumulator", len(ranges))
		}
		if len(ranges) > 0 && !strings.HasPrefix(user.Content, fmt.Sprintf("SUMMARY SO FAR:\nFOLD %d:", len(ranges)-1)) {
			t.Errorf("request %d is not folded onto the previous summary: %.60q", len(ranges), user.Content)
		}
		ranges, images = append(ranges, text), append(images, urls)
	}
	if len(ranges) < 3 || len(ranges) > agent.MaxSummaryCalls {
		t.Fatalf("%d summary calls", len(ranges))
	}
	// The concatenated ranges are the transcript of the covered messages,
	// each byte once; a cut inside a code point would have reached the
	// provider as U+FFFD.
	whole := strings.Join(ranges, "")
	covered := res.Compactions[0].Covered
	var want []string
	for _, m := range msgs[1 : 1+covered] {
		want = append(want, strings.ToUpper(m.Role)+": "+m.Content)
		if len(m.Images) > 0 {
			want = append(want, "[image 1 of this message]")
		}
	}
	if strings.ContainsRune(whole, utf8.RuneError) || whole != strings.Join(want, "\n\n") {
		t.Fatalf("the ranges are not the transcript split once between code points (%d bytes, want %d)", len(whole), len(strings.Join(want, "\n\n")))
	}
	cuts := 0
	for _, r := range ranges[:len(ranges)-1] {
		if !strings.HasSuffix(r, "noted") {
			cuts++ // a range that ends inside a row: a code-point cut
		}
	}
	carried := 0
	for _, urls := range images {
		for _, u := range urls {
			if u != img.DataURL() {
				t.Error("an image reached the provider altered")
			}
			carried++
		}
	}
	if carried != 1 || cuts == 0 {
		t.Errorf("image sent %d times (want once, whole); %d ranges end inside a row (want some)", carried, cuts)
	}
}

// BenchmarkRefineAdmission folds an 800 KB source (200 rows of 4,000 bytes,
// multibyte) with the default usable input: what exact admission costs —
// serialising every probe of the actual request — beside the calls.
func BenchmarkRefineAdmission(b *testing.B) {
	var src []agent.SourcePart
	for i := range 200 {
		src = append(src, agent.SourcePart{Text: agent.Truncate(fmt.Sprintf("TOOL RESULT %d: %s", i, strings.Repeat("Grüße, 世界 ", 400)), 4000)})
	}
	probes, calls := 0, 0
	for b.Loop() {
		r := &agent.Refine{Request: func(acc string, s []agent.SourcePart, c bool) *llm.ChatRequest {
			probes++
			return refineRequest(acc, s, c)
		}, Send: func(context.Context, *llm.ChatRequest) (string, error) { return strings.Repeat("summary ", 1000), nil }}
		if _, err := r.Advance(context.Background(), "", src); err != nil {
			b.Fatal(err)
		}
		calls += r.Calls()
	}
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
	b.ReportMetric(float64(probes)/float64(calls), "serialisations/call")
}

// TestRefineFitsHook: a caller's own admission rule (per-candidate request
// plans) decides every probe, and the range chosen is the largest it
// admits.
func TestRefineFitsHook(t *testing.T) {
	var src []agent.SourcePart
	for i := range 10 {
		src = append(src, agent.SourcePart{Text: fmt.Sprintf("row%02d %s", i, strings.Repeat("y", 200))})
	}
	const limit = 1000 // body bytes the caller's rule admits
	probes := 0
	var sizes []int
	r := &agent.Refine{Request: refineRequest,
		Fits: func(req *llm.ChatRequest) bool {
			probes++
			return len(agent.Account(req).Body) <= limit
		},
		Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			sizes = append(sizes, len(agent.Account(req).Body))
			return "A", nil
		}}
	if _, err := r.Advance(context.Background(), "", src); err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		if n > limit || (i < len(sizes)-1 && n < limit-1) {
			t.Errorf("call %d sent %d bytes: not the largest range within %d", i, n, limit)
		}
	}
	if probes == 0 || len(sizes) < 3 {
		t.Errorf("%d probes, %d calls", probes, len(sizes))
	}
}

// TestSummaryCompactorCarriesLongMessagesWhole: a tool result far larger
// than one summary request reaches the summarizer whole, cut only between
// requests (Refine), never clipped: the joined ranges carry the rendered
// message exactly once and each of its numbered lines exactly once.
func TestSummaryCompactorCarriesLongMessagesWhole(t *testing.T) {
	srv, client := setup(t)
	for i := range agent.MaxSummaryCalls {
		srv.Enqueue("summarizer", llmtest.Reply{Content: fmt.Sprintf("FOLD %d.", i)})
	}
	srv.Enqueue("tier-5", llmtest.Reply{Content: "ok"})
	var log strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&log, "line %04d: %s\n", i, strings.Repeat("é", 20))
	}
	result := log.String() // about 51,000 bytes: more than one summary request takes
	msgs := []llm.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "read the log"},
		{Role: "assistant", ToolCalls: []llm.ToolCall{call("c1", "read", `{"path":"build.log"}`)}},
		{Role: "tool", ToolCallID: "c1", Content: result}, {Role: "assistant", Content: "read it"}}
	for i := range 3 {
		msgs = append(msgs, llm.Message{Role: "user", Content: fmt.Sprintf("step %d %s", i, strings.Repeat("y", 1500))},
			llm.Message{Role: "assistant", Content: "done"})
	}
	msgs = append(msgs, llm.Message{Role: "user", Content: "and now?"})
	// Usable input 8,800 tokens for a summary request (2,000 output
	// reserved): about 35,000 bytes, so the log spans two requests.
	b := agent.Budget{ContextWindow: 12000, MaxOutput: 500, Utilization: 0.9, Trigger: 0.5}
	res, err := agent.Run(context.Background(), agent.RunOptions{Model: client, ModelName: "tier-5", Messages: msgs,
		Compactor: &agent.SummaryCompactor{Budget: b, SummaryModel: "summarizer"}})
	// The three messages up to the log's result are covered.
	if err != nil || len(res.Compactions) != 1 || res.Compactions[0].Covered < 3 {
		t.Fatalf("run: %d compactions, %v", len(res.Compactions), err)
	}
	var ranges []string
	for _, sr := range summarizerRequests(t, srv) {
		text := sr.user.Content
		if _, after, ok := strings.Cut(text, "(extend the summary with it):\n"); ok {
			text = after
		}
		ranges = append(ranges, text)
	}
	whole := strings.Join(ranges, "")
	if n := strings.Count(whole, "TOOL RESULT c1: "+result); n != 1 {
		t.Fatalf("the log travelled %d times whole across %d summary requests (want once)", n, len(ranges))
	}
	for i := range 1000 {
		if n := strings.Count(whole, fmt.Sprintf("line %04d: ", i)); n != 1 {
			t.Fatalf("line %d reached the summarizer %d times", i, n)
		}
	}
	if len(ranges) < 2 || len(ranges) > agent.MaxSummaryCalls || strings.Contains(whole, "[truncated]") {
		t.Errorf("%d summary requests; clipped: %v", len(ranges), strings.Contains(whole, "[truncated]"))
	}
}

// summarizerRequest is one request the scripted provider received for the
// "summarizer" model, with its last message (the summary prompt).
type summarizerRequest struct {
	llmtest.Request
	user llm.Message
}

// summarizerRequests returns the summary requests srv received, in order.
func summarizerRequests(t *testing.T, srv *llmtest.Server) []summarizerRequest {
	t.Helper()
	var out []summarizerRequest
	for _, r := range srv.Requests() {
		if r.Model != "summarizer" {
			continue
		}
		var body struct {
			Messages []llm.Message `json:"messages"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, summarizerRequest{Request: r, user: body.Messages[len(body.Messages)-1]})
	}
	return out
}
