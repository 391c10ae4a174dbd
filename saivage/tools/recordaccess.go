package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/records"
)

// recordView is a record's content with where it came from.
type recordView struct {
	Path      string
	Card      string
	Name      string
	Content   string
	Selection string // baseline, draft, accepted, or "version" for exact reads
	Version   int
	Revision  int // a draft's revision
}

// RecordObservation is the structured part of a successful record read
// (the result's Data, under "record_observation"): which record, which
// version of it and how large — never its content. The runtime keeps it
// with the result, so a compaction that folds the read can still describe
// what the agent saw.
type RecordObservation struct {
	Locator  string `json:"locator"`
	Card     string `json:"card"`
	Record   string `json:"record"`
	Kind     string `json:"kind"` // accepted, draft or baseline
	Version  int    `json:"version"`
	Revision int    `json:"revision,omitempty"`
	Bytes    int    `json:"bytes"`
}

// result is the read's tool result: text for the model, the observation
// as Data.
func (v recordView) result(text string) agent.ToolResult {
	o := RecordObservation{Locator: v.Path, Card: v.Card, Record: v.Name, Kind: records.SelAccepted, Version: v.Version, Bytes: len(v.Content)}
	switch {
	case v.Selection == records.SelDraft:
		o.Kind, o.Revision = records.SelDraft, v.Revision
	case v.Version == 0:
		o.Kind = records.SelBaseline
	}
	data, _ := json.Marshal(map[string]RecordObservation{"record_observation": o})
	return agent.ToolResult{Content: text, Data: data}
}

func (v recordView) describe() string {
	switch v.Selection {
	case records.SelDraft:
		return fmt.Sprintf("%s (open draft targeting version %d)", v.Path, v.Version+1)
	case records.SelAccepted:
		return fmt.Sprintf("%s (accepted version %d)", v.Path, v.Version)
	case records.SelBaseline:
		return fmt.Sprintf("%s (baseline, no accepted version yet)", v.Path)
	}
	return fmt.Sprintf("%s (immutable version %d)", v.Path, v.Version)
}

// readRecord returns the current effective content or an exact version.
func (e *Env) readRecord(ctx context.Context, rp recordPath) (recordView, error) {
	ref, err := e.Cards.RecordRef(ctx, rp.Card, rp.Name)
	if err != nil {
		return recordView{}, err
	}
	rs := e.Cards.Records()
	if rp.Version >= 0 {
		c, err := rs.Content(ref, rp.Version)
		if err != nil {
			return recordView{}, err
		}
		return recordView{Path: rp.String(), Card: rp.Card, Name: rp.Name, Content: c, Selection: "version", Version: rp.Version}, nil
	}
	cur, err := rs.Current(ref)
	if err != nil {
		return recordView{}, err
	}
	return recordView{Path: rp.String(), Card: rp.Card, Name: rp.Name, Content: cur.Content, Selection: cur.Head.Selection, Version: cur.Version,
		Revision: cur.Head.Revision}, nil
}

// writeRecord replaces a record's content within the caller's authority: a
// card caller writes its own open node draft; a global caller with a
// matching record_writes glob accepts directly (cards that are blocked,
// done or failed reopen as changed) when the runtime admits intervention.
func (e *Env) writeRecord(ctx context.Context, rp recordPath, content string) (string, error) {
	if rp.Version >= 0 {
		return "", fmt.Errorf("%s is an immutable accepted version; write to record:%s/%s instead", rp, rp.Card, rp.Name)
	}
	if !e.Caller.Has("write") {
		return "", fmt.Errorf("changing records needs the write tool, which %s does not hold", e.Caller.Agent)
	}
	ref, err := e.Cards.RecordRef(ctx, rp.Card, rp.Name)
	if err != nil {
		return "", err
	}
	e.RecordMu.Lock()
	defer e.RecordMu.Unlock()
	if !e.Caller.Global() {
		if rp.Card != e.Caller.Card {
			return "", fmt.Errorf("%s belongs to card %s; %s may write only records of its own card %s", rp, rp.Card, e.Caller.Agent, e.Caller.Card)
		}
		if !slices.Contains(e.Caller.DraftRecords, rp.Name) {
			return "", fmt.Errorf("node %s does not write record %q (writable here: %v)", e.Caller.Node, rp.Name, e.Caller.DraftRecords)
		}
		h, err := e.Cards.Records().WriteDraft(ref, content, e.Caller.Author())
		if err != nil {
			return "", err
		}
		e.hint("card", rp.Card)
		return fmt.Sprintf("wrote %d bytes to the draft of %s (revision %d); it is accepted when the node's result is accepted", len(content), rp, h.Revision), nil
	}
	if e.Caller.RecordWrites == nil || !e.Caller.RecordWrites(rp.Name) {
		return "", fmt.Errorf("record %q is not matched by %s's record_writes", rp.Name, e.Caller.Agent)
	}
	if e.Runtime != nil {
		if err := e.Runtime.InterventionAllowed(); err != nil {
			return "", err
		}
	}
	a, err := e.Cards.EditRecord(ctx, rp.Card, rp.Name, content, e.Caller.Author())
	if err != nil {
		return "", err
	}
	e.hint("card", rp.Card)
	e.logEvent("record_edited", map[string]any{"card": rp.Card, "record": rp.Name, "version": a.Version, "author": e.Caller.Author()})
	return fmt.Sprintf("accepted %s as version %d", rp, a.Version), nil
}
