package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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

// boundary reports whether a segment may start at rows[i] without
// separating an atomic bundle: before an ingress, a summary, a marker or an
// assistant row, or before a tool call once every call its step made so far
// has its result. A call and its result are atomic, and the assistant row
// (its text and private reasoning) travels with its step's first call.
func boundary(rows []conversations.Row, i int) bool {
	switch rows[i].Kind {
	case "user", "assistant", "summary", "marker":
		return true
	case "tool_call":
		results := map[string]bool{}
		for j := i - 1; j >= 0; j-- {
			switch rows[j].Kind {
			case "tool_result":
				results[rows[j].CallID] = true
			case "tool_call":
				if !results[rows[j].CallID] {
					return false
				}
			default:
				return j < i-1 // the step's start: at least one whole pair precedes
			}
		}
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
// compaction as structure (its genesis) — its summary and the protected
// rows kept right after it (node instructions, recovery/refusal facts):
// folding only those is no progress, and they would be protected again
// anyway. A summary records how many rows it protected; older summaries
// are followed by their markers and the node's entry prompt.
func inherited(rows []conversations.Row) int {
	if len(rows) == 0 || rows[0].Kind != "summary" {
		return 0
	}
	var s struct {
		Protected *int `json:"protected"`
	}
	if json.Unmarshal(rows[0].Content, &s) == nil && s.Protected != nil {
		return min(1+*s.Protected, len(rows))
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
// (rows[:cut] are folded, rows[cut:] kept). The preferred one keeps a tail
// of at most tailBytes: whole fitting rounds when snap is set; otherwise,
// and when the newest round alone is larger, the row-level target — the
// longest suffix within tailBytes — snapped to the atomic boundary the
// backward walk reached last, so the kept suffix is the largest legal one
// within the target and no call is parted from its result. The fallback is
// the furthest legal cut, the latest atomic boundary; it is also the
// preferred one when not even the newest bundle fits. Both exceed lead (the
// inherited rows); -1 when no cut folds anything new. pref == fall when
// they coincide.
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
	for i := target; i <= fall; i++ {
		if snap && roundStart(rows, i) {
			return i, fall
		}
	}
	for i := target; i <= fall; i++ {
		if boundary(rows, i) {
			return i, fall
		}
	}
	return fall, fall
}

// protectedRows are the rows of covered kept verbatim after the summary:
// the latest node instructions (its marker and entry prompt), the newest
// refusal marker and the newest recovery notice, in their original order.
func protectedRows(covered []conversations.Row) []conversations.Row {
	keep := map[int]bool{}
	node, refusal, recovery := false, false, false
	for i := len(covered) - 1; i >= 0 && !(node && refusal && recovery); i-- {
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
		case markerNotice:
			if !recovery && isFact(covered[i]) {
				recovery, keep[i] = true, true
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

// compactMode is why a compaction runs; it decides which candidate is
// published.
type compactMode int

const (
	// compactPreventive: the estimate reached the trigger before a call.
	// The smallest candidate by estimated tokens wins; the first that gets
	// under the trigger ends the search.
	compactPreventive compactMode = iota
	// compactLocalExact: the exact request does not fit the usable input.
	// The candidate with the fewest image-aware accounting bytes wins, a
	// tie going to the furthest endpoint.
	compactLocalExact
	// compactAuthoritative: the provider rejected the request as too long
	// for its context. The first candidate with fewer tokens wins.
	compactAuthoritative
)

func (m compactMode) String() string {
	return [...]string{"preventive", "local_exact", "authoritative"}[m]
}

// measureName names a mode's measure in events.
func (m compactMode) measureName() string {
	if m == compactLocalExact {
		return "accounting_bytes"
	}
	return "tokens"
}

// prefer reports whether cand, a qualifying candidate at a later endpoint
// than best, replaces it: when it is smaller, or for local-exact when it
// ties (a tie goes to the furthest endpoint). A completed ordinary
// candidate precedes a declared omission, however small.
func (m compactMode) prefer(best, cand *candidate) bool {
	if best == nil || best.omitted != cand.omitted {
		return best == nil || best.omitted
	}
	return cand.size < best.size || (m == compactLocalExact && cand.size == best.size)
}

// compaction is one compaction pass of a logical operation (one primary
// model call).
type compaction struct {
	mode compactMode
	// op is the operation's availability: its summary calls wait for,
	// update and respect the same cooling and finite budgets as its
	// primary attempts.
	op *callAvailability
	// rejected is the plan the provider rejected as too long (the
	// authoritative pass only): its member's own usable input is the
	// target.
	rejected *requestPlan
}

// maintain runs the compaction c asks for when it applies and returns the
// conversation to send: msgs unchanged (compacted false) when nothing was
// published. A preventive compaction applies when compaction is enabled
// and msgs reach the route's trigger; the other modes always try.
func (iv *invoker) maintain(ctx context.Context, c compaction, msgs []llm.Message, tools []llm.Tool) ([]llm.Message, bool, error) {
	if c.mode == compactPreventive && (!iv.rt.models.compaction.Enabled || !iv.route.Budget.Over(agent.EstimateTokens(msgs, tools))) {
		return msgs, false, nil
	}
	covered, err := iv.compact(ctx, c, tools)
	if err != nil || covered == 0 {
		return msgs, false, err
	}
	next, err := iv.messages(ctx)
	return next, err == nil, err
}

// request is the primary request for msgs: one canonical body, the same for
// local admission and the send.
func (iv *invoker) request(msgs []llm.Message, tools []llm.Tool) *llm.ChatRequest {
	return &llm.ChatRequest{Model: iv.route.Public, Messages: msgs, Tools: tools, MaxTokens: iv.route.MaxTokens, Temperature: iv.route.Temperature}
}

// candidate is one complete prospective segment.
type candidate struct {
	cut     int
	text    string
	omitted bool
	rows    []conversations.Row
	// size is the mode's measure: accounting bytes for local-exact,
	// estimated tokens otherwise.
	size int
}

// compact replaces the older part of the current segment with a summary in
// a new compacted segment. It tries the preferred endpoint, then the
// furthest legal one, folding the rows up to each with one sequential
// refine accumulator (the inherited summary is its start, each range is
// transported once) under agent.MaxSummaryCalls. Candidates are measured
// over the whole projection; one qualifies only when its measure is
// strictly smaller than the current conversation's. Preventive: the
// smallest qualifying candidate by estimated tokens, the first that reaches
// the trigger ending the search. Local-exact: the fewest accounting bytes
// of the exact request, a tie to the furthest endpoint. Authoritative
// (after a context rejection): the first with fewer tokens. No-smaller
// publishes nothing. Each summary request is admitted exactly against the
// summarizer's usable input (agent.Refine) and sent through the candidate
// availability of c's operation (send). After the summarizer's first
// policy refusal, when the call budget runs out or when no summary request
// can be admitted, no more summary calls are made and a declared omission
// stands at the same endpoints; any other summarizer failure with
// no candidate is a CompactionBlockedError. It returns how many rows were
// folded (0 when nothing was published).
func (iv *invoker) compact(ctx context.Context, c compaction, tools []llm.Tool) (int, error) {
	mode := c.mode
	cur, err := iv.sess.current()
	if err != nil {
		return 0, err
	}
	rows := cur.Rows
	lead := inherited(rows)
	comp := iv.rt.models.compaction
	desc := iv.descriptor(ctx)
	usable := iv.targetUsable(c, rows, desc, tools)
	tailBytes := int(comp.TailFraction * float64(usable) * 4)
	if mode == compactAuthoritative || tailBytes <= 0 {
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
		iv.rt.logEvent("compaction_skipped", map[string]any{"session": iv.sess.id, "mode": mode.String(), "reason": "no complete round beyond the inherited summary can be folded"})
		return 0, nil
	}
	measure := func(rs []conversations.Row) int {
		msgs := iv.project(rs, desc)
		if mode == compactLocalExact {
			return agent.Account(iv.request(msgs, tools)).Bytes()
		}
		return agent.EstimateTokens(msgs, tools)
	}
	before := measure(rows)
	// The accumulator starts from the inherited summary; the genesis keeps
	// the latest record descriptors, never bodies: the inherited ones, then
	// the records read in the folded rows, then the snapshot's, each newer
	// one replacing an older one of the same record.
	acc := ""
	var inheritedObs []recordObservation
	if lead > 0 {
		g := decodeContent(rows[0])
		acc, inheritedObs = g.Text, g.Observations
	}
	refine := &agent.Refine{Usable: iv.summaryUsable(), Request: iv.summaryRequest, Fits: iv.summaryFits,
		Send: func(ctx context.Context, req *llm.ChatRequest) (string, error) { return iv.foldSend(ctx, c.op, req) }}
	pos, unavailable := lead, ""
	var best *candidate
	var failure error
	ends := []int{pref}
	if fall != pref {
		ends = append(ends, fall)
	}
	unit := mode.measureName()
	for _, end := range ends {
		cand := &candidate{cut: end}
		folded := false
		if unavailable == "" && failure == nil {
			next, err := refine.Advance(ctx, acc, summarySource(iv.rt.p.StateDir, rows[pos:end], iv.summaryImages()))
			switch {
			case err == nil:
				acc, pos, folded = next, end, true
				cand.text = acc
			case ctx.Err() != nil:
				return 0, context.Cause(ctx)
			case errors.Is(err, agent.ErrSummaryBudget):
				unavailable = "budget"
			case errors.Is(err, agent.ErrSummaryInadmissible):
				unavailable = "inadmissible"
				iv.rt.logEvent("compaction_summary_inadmissible", map[string]any{"session": iv.sess.id, "calls": refine.Calls(), "error": err.Error()})
			case errors.Is(err, errSummaryRefused):
				unavailable = "refused"
				iv.rt.logEvent("compaction_summary_refused", map[string]any{"session": iv.sess.id, "calls": refine.Calls(), "error": iv.rt.redact(err.Error())})
			default:
				failure = err
			}
		}
		if folded && cand.text == "" {
			// A structural-only advance (its rows carry no summary source,
			// e.g. a node marker kept anyway) with nothing summarized yet:
			// no provider call, no invented summary, no candidate here.
			continue
		}
		if cand.text == "" {
			if unavailable == "" {
				break // an infrastructure failure: no further calls, no omission
			}
			cand.omitted = true
			cand.text = fmt.Sprintf("(%d earlier conversation rows were omitted to fit the model's context: the summary was unavailable (%s). "+
				"Concrete details of that work may be lost; check the current state of files and records before relying on memory.)", end, unavailableReason(unavailable))
		}
		kept := protectedRows(rows[:end])
		genesis := map[string]any{"text": cand.text, "covered_rows": end, "from_segment": cur.N, "omitted": cand.omitted,
			"summary_calls": refine.Calls(), "protected": len(kept), "mode": mode.String()}
		if obs := latestObservations(latestObservations(inheritedObs, readObservations(rows[lead:end])), desc.records); len(obs) > 0 {
			genesis["latest_record_observations"] = obs
		}
		summary := conversations.Row{ID: "compaction-" + state.NewUUID() + ":summary", Kind: "summary", Content: rawJSON(genesis)}
		cand.rows = append(append([]conversations.Row{summary}, kept...), rows[end:]...)
		cand.size = measure(cand.rows)
		if cand.size >= before {
			iv.rt.logEvent("compaction_not_smaller", map[string]any{"session": iv.sess.id, "mode": mode.String(), "cut": end,
				unit + "_before": before, unit + "_after": cand.size})
			continue
		}
		if mode.prefer(best, cand) {
			best = cand
		}
		if mode == compactAuthoritative || (mode == compactPreventive && !iv.route.Budget.Over(cand.size)) {
			break
		}
	}
	if best == nil {
		if failure != nil {
			return 0, &CompactionBlockedError{Err: failure}
		}
		return 0, nil
	}
	n, kept, err := iv.publishCompaction(cur, best.rows, len(rows))
	if err != nil || n == 0 {
		return 0, err
	}
	iv.rt.hint("conversation", iv.sess.id)
	iv.rt.logEvent("session_compacted", map[string]any{"session": iv.sess.id, "mode": mode.String(), "segment": n, "covered_rows": best.cut, "kept_rows": kept,
		unit + "_before": before, unit + "_after": best.size, "summary_calls": refine.Calls(), "omitted": best.omitted, "usable_input": usable})
	return best.cut, nil
}

// targetUsable is the usable input a compaction's tail target is a
// fraction of. Preventive maintenance uses the binding's: the largest
// positive usable input of the route's candidates, against which the
// actor-visible weight triggered it. The authoritative pass follows a
// provider's context rejection of one member's plan, and that member is
// retried first: it targets that member's own usable input floor(U×C)−O
// (with the output limit its plan carried), not the route's largest
// window. The local-exact pass runs because no capable candidate admitted
// its own plan, so it targets those candidates' own usable input — the
// largest of them — never a larger window of a candidate that cannot take
// the request. An unknown window falls back to the binding's.
func (iv *invoker) targetUsable(c compaction, rows []conversations.Row, snap stateSnapshot, tools []llm.Tool) int {
	switch c.mode {
	case compactPreventive:
		return iv.route.UsableInput
	case compactAuthoritative:
		if c.rejected != nil {
			if u := c.rejected.budget.UsableInput(); u > 0 {
				return u
			}
		}
		return iv.route.UsableInput
	}
	members, _ := capable(iv.route, iv.primary(iv.project(rows, snap), tools))
	usable := 0
	for _, m := range members {
		u := m.Budget.UsableInput()
		if u <= 0 {
			return iv.route.UsableInput // a window is unknown: no own bound
		}
		usable = max(usable, u)
	}
	if usable == 0 {
		return iv.route.UsableInput
	}
	return usable
}

func unavailableReason(why string) string {
	switch why {
	case "refused":
		return "the summarizer refused it under its content policy"
	case "inadmissible":
		return "no summary request fits the summarizer's context"
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

// summarySource renders rows as the summarizer's separately labeled
// source, one plain-text part per row it can read: the recovery and
// refusal facts first (RUNTIME FACT), then the history in order, a tool
// result followed by its images when images is set (each an atomic part).
// Rows are whole, never clipped: the refine accumulator transports the
// source once over disjoint ranges, cutting a row too large for one
// request between code points (agent.Refine), and a source that does not
// fit the call budget ends in a declared omission, not in a silently
// shortened summary.
func summarySource(stateDir string, rows []conversations.Row, images bool) []agent.SourcePart {
	var facts, history []agent.SourcePart
	text := func(s string) agent.SourcePart { return agent.SourcePart{Text: s} }
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
			switch {
			case isFact(r):
				facts = append(facts, text("RUNTIME FACT: "+factText(r)))
			case c.Type == markerNotice:
				s = "NOTICE: " + c.Text
			}
		}
		if s == "" {
			continue
		}
		history = append(history, text(s))
		if !images {
			continue
		}
		for _, d := range c.Images {
			if img, err := readImage(stateDir, d); err == nil {
				history = append(history, agent.SourcePart{Image: &img})
			}
		}
	}
	return append(facts, history...)
}

// recordRead is the record a successful read or read_record_version
// result showed, from the tool's structured result (its Data), never from
// the text; nil for any other result.
func recordRead(tool string, res agent.ToolResult) *recordObservation {
	if res.IsError || len(res.Data) == 0 || (tool != "read" && tool != "read_record_version") {
		return nil
	}
	var d struct {
		Observation *recordObservation `json:"record_observation"`
	}
	if json.Unmarshal(res.Data, &d) != nil {
		return nil
	}
	return d.Observation
}

// readObservations are the records the agent read in rows, as their read
// results described them: one per record, the latest read winning.
func readObservations(rows []conversations.Row) []recordObservation {
	var out []recordObservation
	for _, r := range rows {
		if r.Kind != "tool_result" {
			continue
		}
		if c := decodeContent(r); c.Record != nil && !c.IsError {
			out = latestObservations(out, []recordObservation{*c.Record})
		}
	}
	return out
}

// errSummaryRefused marks a summary call the provider refused under its
// content policy.
var errSummaryRefused = errors.New("the summarizer refused the request under its content policy")

// summaryBinding is the binding summary requests are planned for: the
// summarizer's members, or the session route's.
func (iv *invoker) summaryBinding() RouteBinding {
	if iv.rt.models.summarizer != "" {
		return iv.rt.models.summary
	}
	return iv.route
}

// summaryUsable bounds summaryFits from above: the largest usable input a
// member has for a summary request (its window with the summary's output
// limit); 0 — no bound — when a member's window is unknown.
func (iv *invoker) summaryUsable() int {
	usable := 0
	for _, m := range iv.summaryBinding().Members {
		b := m.Budget
		b.MaxOutput = outputLimit(m.Caps, summaryMaxTokens)
		u := b.UsableInput()
		if b.ContextWindow <= 0 {
			return 0
		}
		usable = max(usable, u, 1)
	}
	return usable
}

// summaryFits admits a summary request as send will: a plan of it for each
// capable member, one of which fits its own usable input.
func (iv *invoker) summaryFits(req *llm.ChatRequest) bool {
	members, _ := capable(iv.summaryBinding(), req)
	a, err := plans(members, req)
	return err == nil && len(a.admitted) > 0
}

// summaryImages reports whether the summary source carries images: when
// every member takes them.
func (iv *invoker) summaryImages() bool {
	return !slices.ContainsFunc(iv.summaryBinding().Members, func(m RouteMember) bool { return m.Wire.NoImages })
}

// summaryRequest is one refine step's request to the summarizer
// (compaction.summarizer_candidate, or the session's route): extend acc
// with source. The request admitted is the request sent.
func (iv *invoker) summaryRequest(acc string, source []agent.SourcePart, correction bool) *llm.ChatRequest {
	model := iv.route.Public
	if iv.rt.models.summarizer != "" {
		model = iv.rt.models.summarizer
	}
	return &llm.ChatRequest{Model: model, MaxTokens: summaryMaxTokens, Messages: []llm.Message{
		{Role: "system", Content: summarySystem}, agent.RefineMessage(acc, source, correction)}}
}

// foldSend sends one admitted summary request. An empty reply, a tool call
// or a reply cut at its length limit returns "" so Refine may correct it
// once.
func (iv *invoker) foldSend(ctx context.Context, op *callAvailability, req *llm.ChatRequest) (string, error) {
	resp, attempts, err := iv.send(ctx, op, req, nil, "summary")
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
