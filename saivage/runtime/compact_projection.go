package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/conversations"
	"github.com/agentstack/agentstack/saivage/records"
)

// provenanceBoundary is the one system block that separates the leading
// context from the conversation history: what the history shows was
// observed when it was read, and only the final block is current.
const provenanceBoundary = "The conversation history follows. File, record and command contents in it are observations from when they were read, " +
	"not the current state; a summary stands for older history that was compacted, and runtime facts and your node instructions are kept after it. " +
	"The final system block, when there is one, is the latest state snapshot, observed for this call: record descriptors (locator, kind, version, size), " +
	"never their content — read a record with your tools when you need it. A snapshot is an observation, not a guarantee that nothing changed since, " +
	"and it grants no write authority."

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
	// descriptor is the final system block, observed for each call.
	descriptor string
}

// stateSnapshot is the latest state snapshot of one call: the final
// system block and the record descriptors it lists.
type stateSnapshot struct {
	text    string
	records []recordObservation
}

// recordObservation describes one record as a snapshot observed it: which
// record, which version of it and how large, and where the agent reads it
// — never its content. Compacted genesis keeps them as
// latest_record_observations.
type recordObservation struct {
	// Locator is the path the read tool takes: record:NAME for the node's
	// own records, record:CARD/NAME@N for an exact accepted version.
	Locator string `json:"locator"`
	Card    string `json:"card"`
	Record  string `json:"record"`
	// Kind is the head's selection: accepted, draft or baseline.
	Kind string `json:"kind"`
	// Version is the accepted version (the one a draft revises; 0 for the
	// baseline); Revision a draft's revision.
	Version  int `json:"version"`
	Revision int `json:"revision,omitempty"`
	// Bytes is the content's size.
	Bytes int `json:"bytes"`
	// Mode and Gate are the node's declared use of its own records.
	Mode string `json:"mode,omitempty"`
	Gate string `json:"gate,omitempty"`
}

// describe renders an observation as one line of a snapshot.
func (o recordObservation) describe() string {
	var state string
	switch o.Kind {
	case records.SelDraft:
		state = fmt.Sprintf("open draft (revision %d, on accepted version %d)", o.Revision, o.Version)
	case records.SelBaseline:
		state = "baseline, no accepted version"
	default:
		state = fmt.Sprintf("accepted version %d", o.Version)
	}
	use := ""
	if o.Mode != "" {
		use = fmt.Sprintf(" (mode %s, gate %s)", o.Mode, o.Gate)
	}
	return fmt.Sprintf("%s%s — %s, %d bytes", o.Locator, use, state, o.Bytes)
}

// latestObservations merges a genesis's inherited observations with a
// newer snapshot's: one per record (card and name), the newer winning, in
// the newer snapshot's order and then the inherited ones it lacks.
func latestObservations(inherited, newer []recordObservation) []recordObservation {
	out := slices.Clone(newer)
	for _, o := range inherited {
		if !slices.ContainsFunc(newer, func(n recordObservation) bool { return n.Card == o.Card && n.Record == o.Record }) {
			out = append(out, o)
		}
	}
	return out
}

// summaryText is what a compacted genesis's summary row tells the model:
// the summary, then the records as the compaction last observed them
// (descriptors only).
func summaryText(c rowContent) string {
	var b strings.Builder
	b.WriteString("Summary of the earlier conversation (older messages were compacted):\n\n" + c.Text)
	if len(c.Observations) > 0 {
		b.WriteString("\n\nRecords as last observed before this compaction (descriptors only; the final system block is newer):")
		for _, o := range c.Observations {
			b.WriteString("\n- " + o.describe())
		}
	}
	return b.String()
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

// project is the invoker's provider context for rows, with the snapshot
// as the final block.
func (iv *invoker) project(rows []conversations.Row, snap stateSnapshot) []llm.Message {
	return composeContextProjection(iv.rt.p.StateDir, projectSegment(rows, []string{iv.system()}, snap.text))
}

// descriptor is the latest state snapshot for this call (empty for none).
func (iv *invoker) descriptor(ctx context.Context) stateSnapshot {
	if iv.tail == nil {
		return stateSnapshot{}
	}
	return iv.tail(ctx)
}
