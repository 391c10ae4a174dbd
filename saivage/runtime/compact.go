package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/agent"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// summarySystem instructs the summarizer.
const summarySystem = "You compact the conversation of an autonomous software agent so it can continue its work. " +
	"Write a faithful summary of the transcript you are given: the task and instructions, decisions taken, files and records changed, " +
	"commands run with their results, open problems and the next steps. Keep exact names, paths, identifiers and numbers. " +
	"Do not invent anything and do not address the agent."

// maxTranscriptRowChars bounds one row in the summarizer's transcript.
const maxTranscriptRowChars = 4000

func rowBytes(r conversations.Row) int {
	return len(r.ID) + len(r.Name) + len(r.CallID) + len(r.Content) + 32
}

// boundary reports whether a segment may start at rows[i]: never inside a
// call/result pair (results and calls follow their assistant row).
func boundary(rows []conversations.Row, i int) bool {
	switch rows[i].Kind {
	case "user", "assistant", "summary":
		return true
	case "marker":
		return true
	}
	return false
}

// sessionCompactor is Saivage's agent.Compactor: the spec's compaction
// rules applied to the persisted session (the single source of truth), the
// conversation then rebuilt from it. Before a step it compacts when
// compaction is enabled and the estimate reaches the route's trigger; after
// a provider's context rejection it always tries.
type sessionCompactor struct{ iv *invoker }

// Compact implements agent.Compactor.
func (c sessionCompactor) Compact(ctx context.Context, step agent.CompactStep) (*agent.Compaction, error) {
	iv := c.iv
	if !step.Rejected && (!iv.rt.models.compaction.Enabled || !iv.route.Budget.Over(agent.EstimateTokens(step.Messages, step.Tools))) {
		return nil, nil
	}
	covered, summary, err := iv.compact(ctx, step.Rejected)
	if err != nil || covered == 0 {
		return nil, err
	}
	msgs, err := iv.messages(ctx)
	if err != nil {
		return nil, err
	}
	return &agent.Compaction{Messages: msgs, Summary: summary, Covered: covered}, nil
}

// compact replaces the older part of the current segment with a summary in
// a new compacted segment, keeping a tail of recent rows (tail_fraction of
// the usable input, snapped back to an atomic boundary; at most half the
// current history after a provider's context rejection) and the latest
// node instructions. It returns how many rows the summary covers (0 when
// nothing can be compacted) and the summary.
func (iv *invoker) compact(ctx context.Context, rejected bool) (int, string, error) {
	cur, err := iv.sess.current()
	if err != nil {
		return 0, "", err
	}
	rows := cur.Rows
	if len(rows) < 2 {
		return 0, "", nil
	}
	tailBudget := int(iv.rt.models.compaction.TailFraction * float64(iv.route.UsableInput) * 4)
	if rejected {
		total := 0
		for _, r := range rows {
			total += rowBytes(r)
		}
		tailBudget = min(tailBudget, total/2)
	}
	cut, size := -1, 0
	for i := len(rows) - 1; i > 0; i-- {
		size += rowBytes(rows[i])
		if size > tailBudget {
			break
		}
		if boundary(rows, i) {
			cut = i
		}
	}
	if cut < 0 {
		// The newest round alone exceeds the tail: keep the latest boundary.
		for i := len(rows) - 1; i > 0; i-- {
			if boundary(rows, i) {
				cut = i
				break
			}
		}
	}
	if cut <= 0 {
		return 0, "", nil
	}
	covered, kept := rows[:cut], rows[cut:]
	// Protect the latest node instructions (marker + entry prompt).
	var protected []conversations.Row
	for i := len(covered) - 1; i >= 0; i-- {
		if covered[i].Kind == "marker" && decodeContent(covered[i]).Type == markerNode {
			protected = append(protected, covered[i])
			if i+1 < len(covered) && covered[i+1].Kind == "user" {
				protected = append(protected, covered[i+1])
			}
			break
		}
	}
	text, err := iv.summarize(ctx, covered)
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", context.Cause(ctx)
		}
		iv.rt.log.Warn("compaction summary failed; omitting older history", "session", iv.sess.id, "err", err)
		text = fmt.Sprintf("(%d earlier conversation rows were omitted to fit the model's context; no summary could be produced.)", len(covered))
	}
	src := "compaction-" + state.NewUUID()
	next := []conversations.Row{{ID: src + ":summary", Kind: "summary",
		Content: rawJSON(map[string]any{"text": text, "covered_rows": len(covered), "from_segment": cur.N})}}
	next = append(next, protected...)
	next = append(next, kept...)
	iv.sess.mu.Lock()
	n, err := iv.rt.p.Sessions.Compact(iv.sess.dir, iv.sess.id, next)
	iv.sess.mu.Unlock()
	if err != nil {
		return 0, "", err
	}
	iv.rt.hint("conversation", iv.sess.id)
	iv.rt.logEvent("session_compacted", map[string]any{"session": iv.sess.id, "segment": n, "covered_rows": len(covered), "kept_rows": len(kept)})
	return len(covered), text, nil
}

// transcript renders rows as plain text for the summarizer.
func transcript(rows []conversations.Row, budget int) string {
	var parts []string
	for _, r := range rows {
		c := decodeContent(r)
		var s string
		switch r.Kind {
		case "user":
			s = "USER: " + c.Text
		case "assistant":
			s = "ASSISTANT: " + c.Text
		case "tool_call":
			s = fmt.Sprintf("TOOL CALL %s %s", r.Name, c.Arguments)
		case "tool_result":
			s = fmt.Sprintf("TOOL RESULT %s: %s", r.Name, c.Content)
		case "summary":
			s = "EARLIER SUMMARY: " + c.Text
		case "marker":
			if c.Type == markerNotice {
				s = "NOTICE: " + c.Text
			}
		}
		if s == "" {
			continue
		}
		parts = append(parts, agent.TruncateMarked(s, maxTranscriptRowChars))
	}
	// Keep the newest rows when the transcript is over budget.
	return agent.JoinNewest(parts, budget)
}

// summarize asks the summarizer (or the session's route) for a summary.
func (iv *invoker) summarize(ctx context.Context, rows []conversations.Row) (string, error) {
	budget := max(iv.route.UsableInput*4*3/4, 16<<10)
	model := iv.route.Public
	if iv.rt.models.summarizer != "" {
		model = iv.rt.models.summarizer
	}
	req := &llm.ChatRequest{Model: model, MaxTokens: summaryMaxTokens, Messages: []llm.Message{
		{Role: "system", Content: summarySystem},
		{Role: "user", Content: transcript(rows, budget)},
	}}
	resp, _, err := iv.send(ctx, req, nil, "summary")
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(resp.Choices[0].Message.Content)
	if text == "" {
		return "", fmt.Errorf("the summarizer returned no text")
	}
	return text, nil
}
