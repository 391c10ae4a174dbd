package actions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/steward/audit"
)

// Flow is an explicit, reusable personal procedure the user saved. Flows
// guide planning; they never execute writes by themselves.
type Flow struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Trigger    string `json:"trigger"`    // the triggering situation
	Guidance   string `json:"guidance"`   // what to propose
	Exclusions string `json:"exclusions"` // when not to apply it
	Enabled    bool   `json:"enabled"`
	Version    int    `json:"version"`
}

// Bounds of a flow's fields.
const (
	maxFlowName = 120
	maxFlowText = 4000
)

func (f Flow) validate() error {
	var errs []error
	if strings.TrimSpace(f.Name) == "" || len(f.Name) > maxFlowName {
		errs = append(errs, fmt.Errorf("name: required, at most %d characters", maxFlowName))
	}
	if strings.TrimSpace(f.Trigger) == "" || len(f.Trigger) > maxFlowText {
		errs = append(errs, fmt.Errorf("trigger: required, at most %d characters", maxFlowText))
	}
	if strings.TrimSpace(f.Guidance) == "" || len(f.Guidance) > maxFlowText {
		errs = append(errs, fmt.Errorf("guidance: required, at most %d characters", maxFlowText))
	}
	if len(f.Exclusions) > maxFlowText {
		errs = append(errs, fmt.Errorf("exclusions: at most %d characters", maxFlowText))
	}
	return errors.Join(errs...)
}

// CreateFlow saves a new flow at version 1.
func (s *Store) CreateFlow(ctx context.Context, f Flow) (*Flow, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("create flow: %w", err)
	}
	now := s.opts.Now().UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("create flow: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO flows(name, trigger, guidance, exclusions, enabled, version, created_at, updated_at)
		VALUES (?,?,?,?,1,1,?,?)`, f.Name, f.Trigger, f.Guidance, f.Exclusions, now, now)
	if err != nil {
		return nil, fmt.Errorf("create flow: %w", err)
	}
	id, _ := res.LastInsertId()
	if err := recordVersion(ctx, tx, id, 1, f, now); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("create flow: %w", err)
	}
	s.audit(ctx, "action.flow_created", "Flow saved: "+f.Name, audit.RiskLow, map[string]any{"flowId": id, "version": 1})
	return s.Flow(ctx, id)
}

func recordVersion(ctx context.Context, tx *sql.Tx, id int64, v int, f Flow, now int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO flow_versions(flow_id, version, name, trigger, guidance, exclusions, created_at)
		VALUES (?,?,?,?,?,?,?)`, id, v, f.Name, f.Trigger, f.Guidance, f.Exclusions, now); err != nil {
		return fmt.Errorf("record flow %d version %d: %w", id, v, err)
	}
	return nil
}

// FlowUpdate is a partial update; nil fields keep their value.
type FlowUpdate struct {
	Name, Trigger, Guidance, Exclusions *string
	Enabled                             *bool
}

// UpdateFlow applies u. A change of content makes a new version (the old one
// stays readable for the items that applied it); enabling or disabling does not.
func (s *Store) UpdateFlow(ctx context.Context, id int64, u FlowUpdate) (*Flow, error) {
	f, err := s.Flow(ctx, id)
	if err != nil {
		return nil, err
	}
	next := *f
	for _, p := range []struct {
		v   *string
		dst *string
	}{{u.Name, &next.Name}, {u.Trigger, &next.Trigger}, {u.Guidance, &next.Guidance}, {u.Exclusions, &next.Exclusions}} {
		if p.v != nil {
			*p.dst = *p.v
		}
	}
	if u.Enabled != nil {
		next.Enabled = *u.Enabled
	}
	if err := next.validate(); err != nil {
		return nil, fmt.Errorf("update flow %d: %w", id, err)
	}
	contentChanged := next.Name != f.Name || next.Trigger != f.Trigger || next.Guidance != f.Guidance || next.Exclusions != f.Exclusions
	if contentChanged {
		next.Version++
	}
	now := s.opts.Now().UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update flow %d: %w", id, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE flows SET name=?, trigger=?, guidance=?, exclusions=?, enabled=?, version=?, updated_at=? WHERE id=?`,
		next.Name, next.Trigger, next.Guidance, next.Exclusions, next.Enabled, next.Version, now, id); err != nil {
		return nil, fmt.Errorf("update flow %d: %w", id, err)
	}
	if contentChanged {
		if err := recordVersion(ctx, tx, id, next.Version, next, now); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update flow %d: %w", id, err)
	}
	s.audit(ctx, "action.flow_updated", "Flow updated: "+next.Name, audit.RiskLow, map[string]any{"flowId": id, "version": next.Version, "enabled": next.Enabled})
	return &next, nil
}

// DeleteFlow removes a flow and its versions; items keep the name and
// version they recorded.
func (s *Store) DeleteFlow(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM flows WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete flow %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delete flow %d: %w", id, ErrNotFound)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM flow_versions WHERE flow_id = ?`, id); err != nil {
		return fmt.Errorf("delete flow %d versions: %w", id, err)
	}
	s.audit(ctx, "action.flow_deleted", fmt.Sprintf("Flow %d deleted", id), audit.RiskLow, map[string]any{"flowId": id})
	return nil
}

const flowCols = `id, name, trigger, guidance, exclusions, enabled, version`

// Flow returns one flow's current version.
func (s *Store) Flow(ctx context.Context, id int64) (*Flow, error) {
	var f Flow
	err := s.db.QueryRowContext(ctx, `SELECT `+flowCols+` FROM flows WHERE id = ?`, id).
		Scan(&f.ID, &f.Name, &f.Trigger, &f.Guidance, &f.Exclusions, &f.Enabled, &f.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read flow %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read flow %d: %w", id, err)
	}
	return &f, nil
}

// FlowVersion returns a flow as it was at version v.
func (s *Store) FlowVersion(ctx context.Context, id int64, v int) (*Flow, error) {
	f := Flow{ID: id, Version: v}
	err := s.db.QueryRowContext(ctx, `SELECT name, trigger, guidance, exclusions FROM flow_versions WHERE flow_id = ? AND version = ?`, id, v).
		Scan(&f.Name, &f.Trigger, &f.Guidance, &f.Exclusions)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read flow %d version %d: %w", id, v, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read flow %d version %d: %w", id, v, err)
	}
	return &f, nil
}

// Flows lists flows (only enabled ones when enabledOnly).
func (s *Store) Flows(ctx context.Context, enabledOnly bool) ([]Flow, error) {
	q := `SELECT ` + flowCols + ` FROM flows`
	if enabledOnly {
		q += ` WHERE enabled = 1`
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list flows: %w", err)
	}
	defer rows.Close()
	out := []Flow{}
	for rows.Next() {
		var f Flow
		if err := rows.Scan(&f.ID, &f.Name, &f.Trigger, &f.Guidance, &f.Exclusions, &f.Enabled, &f.Version); err != nil {
			return nil, fmt.Errorf("list flows: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// MaxRetrievedFlows is how many flows planning may consider (spec: at most two).
const MaxRetrievedFlows = 2

// FlowEmbedder embeds texts for flow retrieval; nil uses the lexical ranking only.
type FlowEmbedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// RetrieveFlows ranks enabled flows against text and returns at most two
// whose triggering situation may match: by cosine similarity of local
// embeddings when emb works, otherwise (or when it fails) by lexical overlap
// of the trigger and name with text. A flow with no overlap is never returned.
func (s *Store) RetrieveFlows(ctx context.Context, text string, emb FlowEmbedder) ([]Flow, error) {
	flows, err := s.Flows(ctx, true)
	if err != nil || len(flows) == 0 {
		return nil, err
	}
	type scored struct {
		f     Flow
		score float64
	}
	words := tokenSet(text)
	var ranked []scored
	for _, f := range flows {
		if sc := overlap(words, tokenSet(f.Name+" "+f.Trigger)); sc > 0 {
			ranked = append(ranked, scored{f, sc})
		}
	}
	if emb != nil {
		texts := []string{text}
		for _, f := range flows {
			texts = append(texts, f.Name+"\n"+f.Trigger)
		}
		if vecs, err := emb.Embed(ctx, texts); err == nil && len(vecs) == len(texts) {
			ranked = ranked[:0]
			for i, f := range flows {
				if sc := search.Cosine(vecs[0], vecs[i+1]); sc >= 0.35 {
					ranked = append(ranked, scored{f, sc})
				}
			}
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].score > ranked[j].score })
	var out []Flow
	for i := 0; i < len(ranked) && i < MaxRetrievedFlows; i++ {
		out = append(out, ranked[i].f)
	}
	return out, nil
}

var stopwords = map[string]bool{"the": true, "and": true, "for": true, "with": true, "from": true, "that": true, "this": true,
	"when": true, "you": true, "your": true, "una": true, "per": true, "con": true, "del": true, "della": true, "che": true}

func tokenSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range search.Terms(s) {
		if len([]rune(w)) >= 3 && !stopwords[w] {
			out[w] = true
		}
	}
	return out
}

// overlap is the share of the flow's words present in the text.
func overlap(text, flow map[string]bool) float64 {
	if len(flow) == 0 {
		return 0
	}
	n := 0
	for w := range flow {
		if text[w] {
			n++
		}
	}
	return float64(n) / float64(len(flow))
}
