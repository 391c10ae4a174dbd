package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
)

// history generates rounds of a node session: a node marker and prompt,
// then steps of an assistant row, calls and results of size bytes each.
type history struct{ rows []conversations.Row }

func (h *history) node(n int) {
	h.rows = append(h.rows,
		conversations.Row{ID: fmt.Sprintf("m%d", n), Kind: "marker", Content: rawJSON(map[string]string{"type": markerNode})},
		conversations.Row{ID: fmt.Sprintf("u%d", n), Kind: "user", Content: rawJSON(map[string]string{"text": "node prompt"})})
}

func (h *history) step(n, calls, size int) {
	h.rows = append(h.rows, conversations.Row{ID: fmt.Sprintf("a%d", n), Kind: "assistant", Content: rawJSON(map[string]string{"text": "step"})})
	for c := range calls {
		id := fmt.Sprintf("c%d.%d", n, c)
		h.rows = append(h.rows,
			conversations.Row{ID: id, Kind: "tool_call", Name: "read", CallID: id, Content: rawJSON(map[string]string{"arguments": "{}"})},
			conversations.Row{ID: id + "r", Kind: "tool_result", Name: "read", CallID: id, Content: rawJSON(map[string]string{"content": strings.Repeat("x", size)})})
	}
}

func suffixBytes(rows []conversations.Row, i int) int {
	n := 0
	for _, r := range rows[i:] {
		n += rowBytes(r)
	}
	return n
}

// parallelStep is one step whose calls ran in parallel pairs: two calls
// start, then both results arrive.
func (h *history) parallelStep(n, pairs, size int) {
	h.rows = append(h.rows, conversations.Row{ID: fmt.Sprintf("a%d", n), Kind: "assistant", Content: rawJSON(map[string]string{"text": "step"})})
	for p := range pairs {
		ids := []string{fmt.Sprintf("c%d.%da", n, p), fmt.Sprintf("c%d.%db", n, p)}
		for _, id := range ids {
			h.rows = append(h.rows, conversations.Row{ID: id, Kind: "tool_call", Name: "read", CallID: id, Content: rawJSON(map[string]string{"arguments": "{}"})})
		}
		for _, id := range ids {
			h.rows = append(h.rows, conversations.Row{ID: id + "r", Kind: "tool_result", Name: "read", CallID: id, Content: rawJSON(map[string]string{"content": strings.Repeat("x", size)})})
		}
	}
}

// separated reports whether cutting before rows[i] parts a call from its
// result.
func separated(rows []conversations.Row, i int) bool {
	before := map[string]bool{}
	for _, r := range rows[:i] {
		if r.Kind == "tool_call" {
			before[r.CallID] = true
		}
	}
	for _, r := range rows[i:] {
		if r.Kind == "tool_result" && before[r.CallID] {
			return true
		}
	}
	return false
}

// legalCut is the oracle for an atomic boundary: no call parted from its
// result, and no assistant row parted from its step's first call.
func legalCut(rows []conversations.Row, i int) bool {
	return rows[i].Kind != "tool_result" && !separated(rows, i) && !(rows[i].Kind == "tool_call" && rows[i-1].Kind == "assistant")
}

func TestEndpoints(t *testing.T) {
	// Three node rounds of ten steps (two 500-byte results each), then a
	// newest round whose single step has twenty 2 KB results.
	var h history
	for n := range 3 {
		h.node(n)
		for s := range 10 {
			h.step(n*100+s, 2, 500)
		}
	}
	rounds := slices.Clone(h.rows)
	h.node(9)
	h.step(900, 20, 2000)
	oversized := slices.Clone(h.rows)
	var p history
	p.rows = slices.Clone(rounds)
	p.node(9)
	p.parallelStep(900, 10, 2000)
	parallel := p.rows
	summary := conversations.Row{ID: "s", Kind: "summary", Content: rawJSON(map[string]any{"text": "earlier", "protected": 0})}
	for _, tc := range []struct {
		name      string
		rows      []conversations.Row
		lead      int
		tail      int
		snap      bool
		wantRound bool // the preferred endpoint opens a round
	}{
		{"row-level", rounds, 0, 5000, false, false},
		{"snapped whole rounds", rounds, 0, 14000, true, true},
		{"oversized newest round, snapped", oversized, 0, 14000, true, false},
		{"oversized newest round, row-level", oversized, 0, 9000, false, false},
		{"oversized newest round, parallel calls", parallel, 0, 9000, true, false},
		{"tail smaller than one pair", oversized, 0, 1000, true, false},
		{"inherited summary", append([]conversations.Row{summary}, rounds...), 1, 5000, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := tc.rows
			pref, fall := endpoints(rows, tc.lead, tc.tail, tc.snap)
			if pref <= tc.lead || fall < pref || fall >= len(rows) {
				t.Fatalf("endpoints = %d, %d over %d rows", pref, fall, len(rows))
			}
			for _, i := range []int{pref, fall} {
				if !legalCut(rows, i) || !boundary(rows, i) {
					t.Errorf("endpoint %d (%s) parts an atomic bundle", i, rows[i].Kind)
				}
			}
			// boundary agrees with the oracle everywhere.
			for i := tc.lead + 1; i < len(rows); i++ {
				if boundary(rows, i) != legalCut(rows, i) {
					t.Errorf("boundary(%d, %s) = %v, the oracle says %v", i, rows[i].Kind, boundary(rows, i), legalCut(rows, i))
				}
			}
			// The fallback is the furthest legal cut.
			for i := fall + 1; i < len(rows); i++ {
				if legalCut(rows, i) {
					t.Errorf("legal cut %d lies beyond the fallback %d", i, fall)
				}
			}
			if got := roundStart(rows, pref); got != tc.wantRound {
				t.Errorf("preferred endpoint %d (%s) opens a round: %v", pref, rows[pref].Kind, got)
			}
			fits := func(i int) bool { return suffixBytes(rows, i) <= tc.tail }
			if !fits(pref) {
				// Only when not even the newest bundle fits.
				if pref != fall || fits(fall) {
					t.Errorf("kept suffix %d bytes exceeds the target %d", suffixBytes(rows, pref), tc.tail)
				}
				return
			}
			// The largest legal suffix within the target: no earlier cut of
			// the same kind (a round start when snapped) fits too.
			for i := pref - 1; i > tc.lead; i-- {
				if tc.wantRound && !roundStart(rows, i) || !legalCut(rows, i) {
					continue
				}
				if fits(i) {
					t.Errorf("the cut at %d keeps a larger suffix (%d bytes) within the target than %d", i, suffixBytes(rows, i), pref)
				}
				break
			}
		})
	}
	// Nothing beyond the inherited summary and its protected node prompt:
	// no endpoint, so no summary call.
	var only history
	only.rows = []conversations.Row{{ID: "s", Kind: "summary", Content: rawJSON(map[string]string{"text": "earlier"})}}
	only.node(1)
	only.rows = append(only.rows, conversations.Row{ID: "x", Kind: "tool_call"})
	if lead := inherited(only.rows); lead != 3 {
		t.Errorf("inherited = %d, want the summary, marker and prompt", lead)
	}
	if p, f := endpoints(only.rows, inherited(only.rows), 100, false); p != -1 || f != -1 {
		t.Errorf("structural-only endpoints = %d, %d", p, f)
	}
}

// TestFiveHundredRoundsStayWithinBudget replays a 500-round session against
// the compaction algorithm (endpoints, refine accumulator under its 16-call
// budget, strict reduction): whenever the session reaches the trigger it is
// compacted, and it never exceeds the usable input.
func TestFiveHundredRoundsStayWithinBudget(t *testing.T) {
	const usableBytes, trigger, tailBytes = 200_000, 160_000, 60_000
	var h history
	h.node(0)
	compactions, maxCalls := 0, 0
	size := func(rows []conversations.Row) int { return suffixBytes(rows, 0) }
	for round := range 500 {
		if round%50 == 49 {
			h.node(round)
		}
		h.step(round, 1+round%3, 300+(round*37)%2500)
		if size(h.rows) > usableBytes {
			t.Fatalf("round %d: %d bytes exceed the usable input", round, size(h.rows))
		}
		if size(h.rows) < trigger {
			continue
		}
		lead := inherited(h.rows)
		pref, _ := endpoints(h.rows, lead, tailBytes, round%2 == 0)
		if pref < 0 {
			t.Fatalf("round %d: nothing to fold", round)
		}
		acc := ""
		if lead > 0 {
			acc = decodeContent(h.rows[0]).Text
		}
		seen := 0
		const summaryUsable = 6 << 10 // a summarizer with a 9,000-token window
		r := &agent.Refine{Usable: summaryUsable, Request: func(acc string, src []agent.SourcePart, correction bool) *llm.ChatRequest {
			return &llm.ChatRequest{Model: "s", Messages: []llm.Message{{Role: "system", Content: summarySystem}, agent.RefineMessage(acc, src, correction)}}
		}, Send: func(_ context.Context, req *llm.ChatRequest) (string, error) {
			if tok := agent.Account(req).Tokens(); tok > summaryUsable {
				t.Fatalf("round %d: a summary request of %d tokens", round, tok)
			}
			n := len(req.Messages[1].Content)
			seen += n
			return agent.Truncate(fmt.Sprintf("folded %d", n)+strings.Repeat(" detail", 300), 2000), nil
		}}
		parts := summarySource("", h.rows[lead:pref], false)
		next, err := r.Advance(context.Background(), acc, parts)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		want := 0
		for _, p := range parts {
			want += len(p.Text)
		}
		if seen < want {
			t.Fatalf("round %d: source transported %d bytes, want each part once (%d)", round, seen, want)
		}
		maxCalls = max(maxCalls, r.Calls())
		cand := append([]conversations.Row{{ID: "sum", Kind: "summary", Content: rawJSON(map[string]any{"text": next})}}, protectedRows(h.rows[:pref])...)
		cand = append(cand, h.rows[pref:]...)
		if size(cand) >= size(h.rows) {
			t.Fatalf("round %d: candidate not smaller", round)
		}
		h.rows = cand
		compactions++
	}
	if compactions < 10 || maxCalls > agent.MaxSummaryCalls {
		t.Errorf("compactions = %d, max calls = %d", compactions, maxCalls)
	}
	t.Logf("500 rounds: %d compactions, at most %d summary calls each", compactions, maxCalls)
}

// TestCompactModePrefer: candidates arrive in endpoint order (preferred,
// then furthest); a later one replaces the best when it is smaller, and
// for local-exact also on a tie (furthest endpoint).
func TestCompactModePrefer(t *testing.T) {
	for _, tc := range []struct {
		mode  compactMode
		sizes []int
		want  int // index of the published candidate
	}{
		{compactPreventive, []int{90, 80}, 1},
		{compactPreventive, []int{80, 80}, 0},
		{compactPreventive, []int{70, 80}, 0},
		{compactLocalExact, []int{80, 80}, 1},
		{compactLocalExact, []int{70, 80}, 0},
		{compactLocalExact, []int{90, 80}, 1},
		{compactAuthoritative, []int{80, 80}, 0},
	} {
		var best *candidate
		for i, s := range tc.sizes {
			if c := (&candidate{cut: i, size: s}); tc.mode.prefer(best, c) {
				best = c
			}
		}
		if best.cut != tc.want {
			t.Errorf("%s %v: published %d, want %d", tc.mode, tc.sizes, best.cut, tc.want)
		}
	}
}

// TestComposeContextProjection: generated sessions project in the spec's
// order; the boundary appears only when history follows, and a compacted
// segment's kept facts precede its node instructions.
func TestComposeContextProjection(t *testing.T) {
	var h history
	h.node(1)
	h.step(1, 1, 10)
	refusal := markerRow("refusal-x", markerRefusal, map[string]any{"count": 1})
	recovery := noticeRow(recoverySource+"x", "The runtime stopped during your previous turn.")
	other := noticeRow("turn-x", "The previous turn ended with an error.")
	h.rows = append(h.rows, refusal, recovery, other)
	h.step(2, 1, 10)
	uncompacted := slices.Clone(h.rows)
	cut := len(h.rows) - 3 // the newest step stays
	kept := protectedRows(h.rows[:cut])
	summary := conversations.Row{ID: "s", Kind: "summary", Content: rawJSON(map[string]any{"text": "EARLIER", "protected": len(kept)})}
	compacted := append(append([]conversations.Row{summary}, kept...), h.rows[cut:]...)
	for _, tc := range []struct {
		name string
		rows []conversations.Row
		desc string
		want []string
	}{
		{"no history, no state", nil, "", []string{"system: SYS"}},
		{"no history", nil, "STATE", []string{"system: SYS", "system: STATE"}},
		{"uncompacted", uncompacted, "STATE", []string{"system: SYS", "system: " + provenanceBoundary, "user: node prompt",
			"assistant: step", "tool: xxxxxxxxxx", "user: [Runtime notice] The runtime stopped", "user: [Runtime notice] The previous turn",
			"assistant: step", "tool: xxxxxxxxxx", "system: STATE"}},
		{"compacted", compacted, "STATE", []string{"system: SYS", "system: " + provenanceBoundary, "user: Summary of the earlier conversation",
			"user: [Runtime fact] The provider refused", "user: [Runtime fact] The runtime stopped", "user: node prompt",
			"assistant: step", "tool: xxxxxxxxxx", "system: STATE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := composeContextProjection(t.TempDir(), projectSegment(tc.rows, []string{"SYS"}, tc.desc))
			if len(msgs) != len(tc.want) {
				t.Fatalf("%d messages, want %d: %+v", len(msgs), len(tc.want), msgs)
			}
			for i, m := range msgs {
				if got := m.Role + ": " + m.Content; !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("message %d = %.80q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
	// The kept facts are the newest refusal and recovery notice only; the
	// other notice is folded.
	if len(kept) != 4 || kept[2].ID != refusal.ID || kept[3].ID != recovery.ID {
		t.Errorf("protected rows = %+v", kept)
	}
	// The summarizer's source lists the facts before the history.
	src := summarySource("", h.rows[:cut], true)
	if !strings.HasPrefix(src[0].Text, "RUNTIME FACT: The provider refused") || !strings.HasPrefix(src[1].Text, "RUNTIME FACT: The runtime stopped") ||
		src[2].Text != "USER: node prompt" {
		t.Errorf("summary source = %+v", src)
	}
}

// BenchmarkCompactionEndpoints measures choosing the endpoints over a
// 2,000-row session whose newest step made 200 calls (every pair boundary
// inside it is checked), and projecting the session.
func BenchmarkCompactionEndpoints(b *testing.B) {
	var h history
	for n := range 20 {
		h.node(n)
		for s := range 20 {
			h.step(n*100+s, 2, 400)
		}
	}
	h.node(99)
	h.step(9900, 200, 400)
	b.Logf("%d rows", len(h.rows))
	b.Run("endpoints", func(b *testing.B) {
		for b.Loop() {
			if p, f := endpoints(h.rows, 0, 30_000, true); p < 0 || f < p {
				b.Fatal(p, f)
			}
		}
	})
	b.Run("projection", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			if msgs := composeContextProjection(dir, projectSegment(h.rows, []string{"SYS"}, "STATE")); len(msgs) < 1000 {
				b.Fatal(len(msgs))
			}
		}
	})
}
