package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/state"
)

// summarySystem instructs the summarizer.
const summarySystem = "You compact the conversation of an autonomous software agent so it can continue its work. " +
	"Write a faithful summary of the transcript you are given: the task and instructions, decisions taken, files and records changed, " +
	"commands run with their results, open problems and the next steps. Keep exact names, paths, identifiers and numbers. " +
	"When a summary so far is given, return it extended with the new transcript (one summary, not two). " +
	"Do not invent anything and do not address the agent."

// maxTranscriptRowChars bounds one row in the summarizer's transcript.
const maxTranscriptRowChars = 4000

// CompactionBlockedError is compaction-summary-blocked: the conversation
// had to be compacted and no candidate could be built (the summarizer
// failed for a reason other than a policy refusal or its call budget).
// Nothing was published; the node blocks with this reason.
type CompactionBlockedError struct{ Err error }

func (e *CompactionBlockedError) Error() string {
	return "compaction-summary-blocked: the conversation must be compacted and no summary could be made: " + e.Err.Error()
}

func (e *CompactionBlockedError) Unwrap() error { return e.Err }

func rowBytes(r conversations.Row) int {
	return len(r.ID) + len(r.Name) + len(r.CallID) + len(r.Content) + 32
}

// boundary reports whether a segment may start at rows[i]: never inside a
// call/result bundle (calls and results follow their assistant row).
func boundary(rows []conversations.Row, i int) bool {
	switch rows[i].Kind {
	case "user", "assistant", "summary", "marker":
		return true
	}
	return false
}

// roundStart reports whether rows[i] opens a round: an ingress (a marker,
// or a user row that no marker introduced) and everything the agent did
// until the next one.
func roundStart(rows []conversations.Row, i int) bool {
	switch rows[i].Kind {
	case "marker":
		return true
	case "user":
		return i == 0 || rows[i-1].Kind != "marker"
	}
	return false
}

// inherited is how many leading rows a segment inherited from the previous
// compaction as structure — its summary and the protected rows kept right
// after it (markers, the node's entry prompt): folding only those is no
// progress, and they would be protected again anyway.
func inherited(rows []conversations.Row) int {
	if len(rows) == 0 || rows[0].Kind != "summary" {
		return 0
	}
	n := 1
	for n < len(rows) && rows[n].Kind == "marker" {
		n++
		if n < len(rows) && rows[n].Kind == "user" && decodeContent(rows[n-1]).Type == markerNode {
			n++
		}
	}
	return n
}

// endpoints chooses a compaction's at most two positive endpoints over rows
// (rows[:cut] are folded, rows[cut:] kept): the preferred one keeps a tail
// of about tailBytes — whole fitting rounds when snap is set, otherwise (and
// when the newest round alone is larger) the row-level target snapped
// backward to an atomic boundary — and the fallback is the furthest legal
// cut, the latest atomic boundary. Both exceed lead (the inherited rows);
// -1 when no cut folds anything new. pref == fall when they coincide.
func endpoints(rows []conversations.Row, lead, tailBytes int, snap bool) (pref, fall int) {
	fall = -1
	for i := len(rows) - 1; i > lead; i-- {
		if boundary(rows, i) {
			fall = i
			break
		}
	}
	if fall < 0 {
		return -1, -1
	}
	// target: the longest suffix that fits the tail.
	target, size := len(rows), 0
	for i := len(rows) - 1; i > lead; i-- {
		if size += rowBytes(rows[i]); size > tailBytes {
			break
		}
		target = i
	}
	pref = -1
	if snap {
		for i := target; i <= fall; i++ {
			if roundStart(rows, i) {
				pref = i
				break
			}
		}
	}
	if pref < 0 {
		for i := min(target, fall); i > lead; i-- {
			if boundary(rows, i) {
				pref = i
				break
			}
		}
	}
	if pref < 0 {
		pref = fall
	}
	return pref, fall
}

// protectedRows are the rows of covered kept verbatim after the summary:
// the latest node instructions (its marker and entry prompt) and the newest
// refusal marker, in their original order.
func protectedRows(covered []conversations.Row) []conversations.Row {
	keep := map[int]bool{}
	node, refusal := false, false
	for i := len(covered) - 1; i >= 0 && !(node && refusal); i-- {
		if covered[i].Kind != "marker" {
			continue
		}
		switch decodeContent(covered[i]).Type {
		case markerNode:
			if !node {
				node, keep[i] = true, true
				if i+1 < len(covered) && covered[i+1].Kind == "user" {
					keep[i+1] = true
				}
			}
		case markerRefusal:
			if !refusal {
				refusal, keep[i] = true, true
			}
		}
	}
	var out []conversations.Row
	for i, r := range covered {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out
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
	covered, summary, err := iv.compact(ctx, step.Rejected, step.Tools)
	if err != nil || covered == 0 {
		return nil, err
	}
	msgs, err := iv.messages(ctx)
	if err != nil {
		return nil, err
	}
	return &agent.Compaction{Messages: msgs, Summary: summary, Covered: covered}, nil
}

// candidate is one complete prospective segment.
type candidate struct {
	cut     int
	text    string
	omitted bool
	rows    []conversations.Row
	tokens  int
}

// compact replaces the older part of the current segment with a summary in
// a new compacted segment. It tries the preferred endpoint, then the
// furthest legal one, folding the rows up to each with one sequential
// refine accumulator (the inherited summary is its start, each range is
// transported once) under agent.MaxSummaryCalls. A candidate qualifies only
// when its estimate is strictly smaller than the current conversation's: a
// preventive compaction publishes the smallest qualifying candidate (the
// first that reaches the trigger target ends the search), a compaction after
// a context rejection the first. No-smaller publishes nothing. After the
// summarizer's first policy refusal, or when the call budget runs out, no
// more summary calls are made and a declared omission stands at the same
// endpoints; any other summarizer failure with no candidate is a
// CompactionBlockedError. It returns how many rows were folded (0 when
// nothing was published) and the summary.
func (iv *invoker) compact(ctx context.Context, rejected bool, tools []llm.Tool) (int, string, error) {
	cur, err := iv.sess.current()
	if err != nil {
		return 0, "", err
	}
	rows := cur.Rows
	lead := inherited(rows)
	comp := iv.rt.models.compaction
	tailBytes := int(comp.TailFraction * float64(iv.route.UsableInput) * 4)
	if rejected || tailBytes <= 0 {
		total := 0
		for _, r := range rows {
			total += rowBytes(r)
		}
		if tailBytes <= 0 {
			tailBytes = total / 2
		}
		tailBytes = min(tailBytes, total/2)
	}
	pref, fall := endpoints(rows, lead, tailBytes, comp.Snap)
	if pref < 0 {
		iv.rt.logEvent("compaction_skipped", map[string]any{"session": iv.sess.id, "reason": "no complete round beyond the inherited summary can be folded"})
		return 0, "", nil
	}
	estimate := func(rs []conversations.Row) int {
		msgs := append([]llm.Message{{Role: "system", Content: iv.system()}}, rowsToMessages(rs)...)
		attachImages(iv.rt.p.StateDir, msgs, rs)
		return agent.EstimateTokens(msgs, tools)
	}
	before := estimate(rows)
	acc := ""
	if lead > 0 {
		acc = decodeContent(rows[0]).Text
	}
	refine := &agent.Refine{ChunkBytes: max(iv.route.UsableInput*4*3/4, 16<<10) / 2, Call: iv.foldCall}
	pos, unavailable := lead, ""
	var best *candidate
	var failure error
	ends := []int{pref}
	if fall != pref {
		ends = append(ends, fall)
	}
	for _, end := range ends {
		cand := &candidate{cut: end}
		if unavailable == "" && failure == nil {
			next, err := refine.Advance(ctx, acc, transcriptParts(rows[pos:end]))
			switch {
			case err == nil:
				acc, pos = next, end
				cand.text = acc
			case ctx.Err() != nil:
				return 0, "", context.Cause(ctx)
			case errors.Is(err, agent.ErrSummaryBudget):
				unavailable = "budget"
			case errors.Is(err, errSummaryRefused):
				unavailable = "refused"
				iv.rt.logEvent("compaction_summary_refused", map[string]any{"session": iv.sess.id, "calls": refine.Calls(), "error": iv.rt.redact(err.Error())})
			default:
				failure = err
			}
		}
		if cand.text == "" {
			if unavailable == "" {
				break // an infrastructure failure: no further calls, no omission
			}
			cand.omitted = true
			cand.text = fmt.Sprintf("(%d earlier conversation rows were omitted to fit the model's context: the summary was unavailable (%s). "+
				"Concrete details of that work may be lost; check the current state of files and records before relying on memory.)", end, unavailableReason(unavailable))
		}
		summary := conversations.Row{ID: "compaction-" + state.NewUUID() + ":summary", Kind: "summary",
			Content: rawJSON(map[string]any{"text": cand.text, "covered_rows": end, "from_segment": cur.N, "omitted": cand.omitted, "summary_calls": refine.Calls()})}
		cand.rows = append(append([]conversations.Row{summary}, protectedRows(rows[:end])...), rows[end:]...)
		cand.tokens = estimate(cand.rows)
		if cand.tokens >= before {
			iv.rt.logEvent("compaction_not_smaller", map[string]any{"session": iv.sess.id, "cut": end, "tokens_before": before, "tokens_after": cand.tokens})
			continue
		}
		if best == nil || cand.tokens < best.tokens {
			best = cand
		}
		if rejected || !iv.route.Budget.Over(cand.tokens) {
			break
		}
	}
	if best == nil {
		if failure != nil {
			return 0, "", &CompactionBlockedError{Err: failure}
		}
		return 0, "", nil
	}
	n, kept, err := iv.publishCompaction(cur, best.rows, len(rows))
	if err != nil || n == 0 {
		return 0, "", err
	}
	iv.rt.hint("conversation", iv.sess.id)
	iv.rt.logEvent("session_compacted", map[string]any{"session": iv.sess.id, "segment": n, "covered_rows": best.cut, "kept_rows": kept,
		"tokens_before": before, "tokens_after": best.tokens, "summary_calls": refine.Calls(), "omitted": best.omitted})
	return best.cut, best.text, nil
}

func unavailableReason(why string) string {
	if why == "refused" {
		return "the summarizer refused it under its content policy"
	}
	return fmt.Sprintf("its %d-call budget ran out", agent.MaxSummaryCalls)
}

// publishCompaction publishes the candidate as a new compacted segment,
// appending the rows written to the current segment since it was read (the
// physical suffix) so nothing recorded during the summary calls is lost.
// It publishes nothing (n == 0) when another compaction replaced the
// segment meanwhile.
func (iv *invoker) publishCompaction(read conversations.Current, next []conversations.Row, seen int) (n, kept int, err error) {
	iv.sess.mu.Lock()
	defer iv.sess.mu.Unlock()
	now, err := iv.rt.p.Sessions.LoadCurrent(iv.sess.dir, iv.sess.id, state.TailTruncate)
	if err != nil {
		return 0, 0, err
	}
	if now.N != read.N || len(now.Rows) < seen {
		iv.rt.logEvent("compaction_superseded", map[string]any{"session": iv.sess.id, "segment": now.N})
		return 0, 0, nil
	}
	next = append(next, now.Rows[seen:]...)
	n, err = iv.rt.p.Sessions.Compact(iv.sess.dir, iv.sess.id, next)
	return n, len(next), err
}

// transcriptParts renders rows as plain text parts for the summarizer, one
// per row it can read.
func transcriptParts(rows []conversations.Row) []string {
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
		if s != "" {
			parts = append(parts, agent.TruncateMarked(s, maxTranscriptRowChars))
		}
	}
	return parts
}

// errSummaryRefused marks a summary call the provider refused under its
// content policy.
var errSummaryRefused = errors.New("the summarizer refused the request under its content policy")

// foldCall is one refine step: the summarizer (compaction.summarizer_candidate,
// or the session's route) extends acc with source. An empty reply, a tool
// call or a reply cut at its length limit returns "" so Refine may correct
// it once.
func (iv *invoker) foldCall(ctx context.Context, acc, source string, correction bool) (string, error) {
	model := iv.route.Public
	if iv.rt.models.summarizer != "" {
		model = iv.rt.models.summarizer
	}
	req := &llm.ChatRequest{Model: model, MaxTokens: summaryMaxTokens, Messages: []llm.Message{
		{Role: "system", Content: summarySystem},
		{Role: "user", Content: agent.RefineInput(acc, source, correction)},
	}}
	resp, attempts, err := iv.send(ctx, req, nil, "summary")
	if err != nil {
		if classify(err, attempts) == agent.ErrContentPolicy {
			return "", fmt.Errorf("%w: %w", errSummaryRefused, err)
		}
		return "", err
	}
	if len(resp.Choices) == 0 {
		return "", nil
	}
	ch := resp.Choices[0]
	switch {
	case ch.FinishReason == "content_filter":
		return "", errSummaryRefused
	case ch.FinishReason == "length" || len(ch.Message.ToolCalls) > 0:
		return "", nil
	}
	return ch.Message.Content, nil
}
