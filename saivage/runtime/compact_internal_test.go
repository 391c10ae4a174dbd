package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
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

func TestEndpoints(t *testing.T) {
	// Three node rounds of ten steps (two 500-byte results each), then a
	// newest round whose single step is 40 KB.
	var h history
	for n := range 3 {
		h.node(n)
		for s := range 10 {
			h.step(n*100+s, 2, 500)
		}
	}
	rounds := h.rows
	h.node(9)
	h.step(900, 20, 2000)
	oversized := h.rows
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
		{"inherited summary", append([]conversations.Row{{ID: "s", Kind: "summary", Content: rawJSON(map[string]string{"text": "earlier"})}}, rounds...), 1, 5000, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pref, fall := endpoints(tc.rows, tc.lead, tc.tail, tc.snap)
			if pref <= tc.lead || fall < pref || fall >= len(tc.rows) {
				t.Fatalf("endpoints = %d, %d over %d rows", pref, fall, len(tc.rows))
			}
			for _, i := range []int{pref, fall} {
				if !boundary(tc.rows, i) {
					t.Errorf("endpoint %d is inside a call/result bundle (%s)", i, tc.rows[i].Kind)
				}
			}
			// The fallback is the furthest legal cut: no later boundary.
			for i := fall + 1; i < len(tc.rows); i++ {
				if boundary(tc.rows, i) {
					t.Errorf("boundary %d lies beyond the fallback %d", i, fall)
				}
			}
			if got := roundStart(tc.rows, pref); got != tc.wantRound {
				t.Errorf("preferred endpoint %d (%s) opens a round: %v", pref, tc.rows[pref].Kind, got)
			}
			if tc.snap && tc.wantRound {
				// Whole rounds that fit: the round before does not.
				if suffixBytes(tc.rows, pref) > tc.tail {
					t.Errorf("snapped tail %d exceeds %d", suffixBytes(tc.rows, pref), tc.tail)
				}
				for i := pref - 1; i > 0; i-- {
					if roundStart(tc.rows, i) {
						if suffixBytes(tc.rows, i) <= tc.tail {
							t.Errorf("a further fitting round starts at %d", i)
						}
						break
					}
				}
			} else if pref != fall {
				// Row-level target snapped backward: the kept suffix is at
				// least the tail, and the next boundary no longer reaches it.
				if suffixBytes(tc.rows, pref) < tc.tail && pref > tc.lead+1 {
					next := pref + 1
					for next < len(tc.rows) && !boundary(tc.rows, next) {
						next++
					}
					if suffixBytes(tc.rows, next) > tc.tail {
						t.Errorf("target not snapped backward at %d", pref)
					}
				}
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
		r := &agent.Refine{ChunkBytes: 24 << 10, Call: func(_ context.Context, acc, src string, _ bool) (string, error) {
			seen += len(src)
			return agent.Truncate(acc+" | folded "+fmt.Sprint(len(src)), 2000), nil
		}}
		parts := summarySource(h.rows[lead:pref])
		next, err := r.Advance(context.Background(), acc, parts)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if want := len(strings.Join(parts, "\n\n")); seen < want-2*len(parts) {
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
