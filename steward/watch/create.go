package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CreateRequest describes a new watch.
type CreateRequest struct {
	Source      string
	ResourceRef string
	Instruction string
	ChatID      string
	Rules       []Rule
	// ExpiresAt overrides the adapter's default expiry.
	ExpiresAt time.Time
	// Agent allows grants (create_agent_watch, after approval).
	Agent bool
}

// Prepared is a validated request with its initial snapshot, ready to store
// or to show in an approval.
type Prepared struct {
	CreateRequest
	Snapshot json.RawMessage
}

// Prepare validates req, freezes relative references (a relative time
// becomes an instant now, before any approval), reads the initial snapshot
// and checks the rules against it. It stores nothing.
func (e *Engine) Prepare(ctx context.Context, req CreateRequest) (*Prepared, error) {
	now := e.clock.Now()
	a, ok := e.adapters[req.Source]
	if !ok {
		return nil, fmt.Errorf("unknown watch source %q (available: %s)", req.Source, strings.Join(e.Sources(), ", "))
	}
	req.Instruction = strings.TrimSpace(req.Instruction)
	if req.Instruction == "" || len([]rune(req.Instruction)) > MaxInstruction {
		return nil, fmt.Errorf("instruction must be the user's request in 1–%d characters", MaxInstruction)
	}
	if strings.TrimSpace(req.ChatID) == "" {
		return nil, errors.New("a watch needs its originating chat")
	}
	if err := validateRules(req.Rules); err != nil {
		return nil, err
	}
	// Rules are stored as JSON: give adapters the same decoded form (numbers
	// as float64) whether they came from a tool call or from Go code.
	b, err := json.Marshal(req.Rules)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	req.Rules = nil
	if err := json.Unmarshal(b, &req.Rules); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	hasGrants := false
	for _, r := range req.Rules {
		hasGrants = hasGrants || len(r.Grants) > 0
	}
	switch {
	case hasGrants && !req.Agent:
		return nil, errors.New("rules with grants need create_agent_watch, which asks the user's approval")
	case hasGrants:
		if err := e.opts.Capabilities.validateGrants(req.Rules); err != nil {
			return nil, err
		}
	}
	if p, ok := a.(RefPreparer); ok {
		ref, err := p.PrepareRef(req.ResourceRef, now)
		if err != nil {
			return nil, err
		}
		req.ResourceRef = ref
	}
	if strings.TrimSpace(req.ResourceRef) == "" || len(req.ResourceRef) > 4096 {
		return nil, errors.New("resourceRef is required (at most 4096 characters)")
	}
	snap, err := a.Snapshot(ctx, req.ResourceRef)
	if err != nil {
		return nil, fmt.Errorf("read the initial state: %w", err)
	}
	if a.IsTerminal(snap) {
		return nil, errors.New("there is nothing left to watch: the resource is already in a final state")
	}
	if c, ok := a.(RuleChecker); ok {
		if req.Rules, err = c.CheckRules(req.Rules, snap); err != nil {
			return nil, err
		}
	}
	for _, r := range req.Rules {
		if r.Trigger != nil {
			if _, ok := timestampAt(decode(snap), r.Trigger.Field); !ok {
				return nil, fmt.Errorf("rule %q: %s is not a timestamp of the watched state", r.ID, r.Trigger.Field)
			}
		}
	}
	if req.ExpiresAt.IsZero() {
		req.ExpiresAt = a.DefaultExpiry(snap, now)
	}
	switch {
	case !req.ExpiresAt.After(now):
		return nil, errors.New("the expiry is already past")
	case req.ExpiresAt.Sub(now) > MaxExpiry:
		return nil, fmt.Errorf("a watch expires within %s", MaxExpiry)
	}
	return &Prepared{CreateRequest: req, Snapshot: snap}, nil
}

// Create prepares and stores a watch with its initial snapshot.
func (e *Engine) Create(ctx context.Context, req CreateRequest) (*Watch, error) {
	p, err := e.Prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.store(ctx, p, newID("w"), "", 0, nil)
}

func (e *Engine) store(ctx context.Context, p *Prepared, id, parentEvent string, attempt int, wctx json.RawMessage) (*Watch, error) {
	now := e.clock.Now()
	w := &Watch{ID: id, Source: p.Source, ResourceRef: p.ResourceRef, Rules: p.Rules, Instruction: p.Instruction,
		ChatID: p.ChatID, Agent: p.Agent, Status: StatusActive, Snapshot: p.Snapshot, CreatedAt: now, ExpiresAt: p.ExpiresAt,
		LastCheckAt: now, ParentEventID: parentEvent, Attempt: attempt, Context: wctx}
	inserted, err := e.st.insertWatch(ctx, w)
	if err != nil {
		return nil, err
	}
	if !inserted {
		return e.st.getWatch(ctx, id)
	}
	e.mu.Lock()
	e.nextDue[w.ID] = now.Add(e.interval(w, now))
	e.mu.Unlock()
	e.emit(ctx, Lifecycle{Type: "watch.created", WatchID: w.ID, ChatID: w.ChatID,
		Summary: fmt.Sprintf("%s watch with %d rules", w.Source, len(w.Rules)),
		Payload: map[string]any{"source": w.Source, "rules": w.Rules, "agent": w.Agent, "expiresAt": w.ExpiresAt, "parentEventId": parentEvent}})
	e.kick()
	return w, nil
}

// Stop moves an active watch to stopped. Stopping an ended watch changes
// nothing and is not an error; it returns the watch's status.
func (e *Engine) Stop(ctx context.Context, id string) (string, error) {
	now := e.clock.Now()
	ended, err := e.st.endWatch(ctx, id, StatusStopped, now)
	if err != nil {
		return "", err
	}
	w, err := e.st.getWatch(ctx, id)
	if err != nil {
		return "", err
	}
	if ended {
		e.forget(id)
		e.emit(ctx, Lifecycle{Type: "watch.stopped", WatchID: id, ChatID: w.ChatID, Summary: "watch stopped"})
	}
	return w.Status, nil
}

// Get returns a watch.
func (e *Engine) Get(ctx context.Context, id string) (*Watch, error) { return e.st.getWatch(ctx, id) }

// List returns the watches of chatID (every chat when empty), active only
// unless all.
func (e *Engine) List(ctx context.Context, chatID string, all bool) ([]*Watch, error) {
	where, args := "1 = 1", []any{}
	if chatID != "" {
		where, args = "chat_id = ?", append(args, chatID)
	}
	if !all {
		where += " AND status = 'active'"
	}
	return e.st.listWatches(ctx, where, args...)
}
