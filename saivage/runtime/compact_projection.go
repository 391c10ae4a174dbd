package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
)

// provenanceBoundary is the one system block that separates the leading
// context from the conversation history: what the history shows was
// observed when it was read, and only the final block is current.
const provenanceBoundary = "The conversation history follows. File, record and command contents in it are observations from when they were read, " +
	"not the current state; a summary stands for older history that was compacted, and runtime facts and your node instructions are kept after it. " +
	"The final system block, when there is one, is the current state, refreshed for this call."

// projection is one provider context in the order composeContextProjection
// sends it.
type projection struct {
	// stable are the leading system blocks (the agent's system prompt).
	stable []string
	// history is the accumulated history: the compacted segment's summary.
	history []conversations.Row
	// facts are the newest recovery and refusal facts the compaction kept.
	facts []conversations.Row
	// instructions are the retained node instructions (its marker and entry
	// prompt).
	instructions []conversations.Row
	// suffix is the uncovered suffix: every row after the genesis.
	suffix []conversations.Row
	// descriptor is the final system block, refreshed for each call.
	descriptor string
}

// projectSegment sorts a segment's rows into the projection's slots. A
// compacted segment opens with its genesis — the summary, then the rows
// the compaction protected — and the rest is the uncovered suffix; an
// uncompacted segment is all suffix.
func projectSegment(rows []conversations.Row, stable []string, descriptor string) projection {
	p := projection{stable: stable, descriptor: descriptor}
	n := inherited(rows)
	if n == 0 {
		p.suffix = rows
		return p
	}
	p.history = rows[:1]
	for _, r := range rows[1:n] {
		if isFact(r) {
			p.facts = append(p.facts, r)
		} else {
			p.instructions = append(p.instructions, r)
		}
	}
	p.suffix = rows[n:]
	return p
}

// recoverySource opens the source of the rows crash recovery writes.
const recoverySource = "recovery-"

// isFact reports whether a row is a recovery or refusal fact: a refusal
// marker, or a notice that crash recovery wrote.
func isFact(r conversations.Row) bool {
	if r.Kind != "marker" {
		return false
	}
	switch decodeContent(r).Type {
	case markerRefusal:
		return true
	case markerNotice:
		return strings.HasPrefix(r.ID, recoverySource)
	}
	return false
}

// factText is what a kept fact tells the model.
func factText(r conversations.Row) string {
	c := decodeContent(r)
	if c.Type != markerRefusal {
		return c.Text
	}
	var d struct {
		Count int `json:"count"`
	}
	_ = json.Unmarshal(r.Content, &d)
	return fmt.Sprintf("The provider refused an earlier request of this conversation under its content policy (refusal %d; a second refusal in one node blocks the card).", d.Count)
}

// composeContextProjection renders a projection in the spec's order: the
// stable blocks, one provenance boundary when any history is sent, the
// accumulated history, the newest recovery/refusal facts, the retained
// instructions and the uncovered suffix, then the nonempty descriptor as a
// final system block. Tool results get their images.
func composeContextProjection(stateDir string, p projection) []llm.Message {
	var msgs []llm.Message
	for _, s := range p.stable {
		msgs = append(msgs, llm.Message{Role: "system", Content: s})
	}
	if len(p.history)+len(p.facts)+len(p.instructions)+len(p.suffix) > 0 {
		msgs = append(msgs, llm.Message{Role: "system", Content: provenanceBoundary})
	}
	msgs = append(msgs, rowsToMessages(p.history)...)
	for _, r := range p.facts {
		msgs = append(msgs, llm.Message{Role: "user", Content: "[Runtime fact] " + factText(r)})
	}
	msgs = append(msgs, rowsToMessages(p.instructions)...)
	msgs = append(msgs, rowsToMessages(p.suffix)...)
	attachImages(stateDir, msgs, p.suffix)
	if p.descriptor != "" {
		msgs = append(msgs, llm.Message{Role: "system", Content: p.descriptor})
	}
	return msgs
}

// project is the invoker's provider context for rows, with descriptor as
// the final block.
func (iv *invoker) project(rows []conversations.Row, descriptor string) []llm.Message {
	return composeContextProjection(iv.rt.p.StateDir, projectSegment(rows, []string{iv.system()}, descriptor))
}

// descriptor is the final system block for this call ("" for none).
func (iv *invoker) descriptor(ctx context.Context) string {
	if iv.tail == nil {
		return ""
	}
	return iv.tail(ctx)
}
