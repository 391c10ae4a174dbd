package watch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

func (e *Engine) expire(ctx context.Context, now time.Time, c *Cycle) error {
	due, err := e.st.listWatches(ctx, "status = 'active' AND expires_at <= ?", now.UnixMilli())
	if err != nil {
		return err
	}
	for _, w := range due {
		ended, err := e.st.endWatch(ctx, w.ID, StatusExpired, now)
		if err != nil {
			return err
		}
		if ended {
			c.Expired++
			e.forget(w.ID)
			e.emit(ctx, Lifecycle{Type: "watch.expired", WatchID: w.ID, ChatID: w.ChatID, Summary: "watch expired",
				Payload: map[string]any{"expiresAt": w.ExpiresAt}})
		}
	}
	return nil
}

// polled is one watch's read.
type polled struct {
	w    *Watch
	snap json.RawMessage
	err  error
}

func (e *Engine) poll(ctx context.Context, now time.Time, c *Cycle) error {
	active, err := e.st.listWatches(ctx, "status = 'active'")
	if err != nil {
		return err
	}
	var due []*polled
	e.mu.Lock()
	for _, w := range active {
		if next, ok := e.nextDue[w.ID]; !ok || !next.After(now) {
			due = append(due, &polled{w: w})
		}
	}
	e.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	// Read concurrently; apply in creation order.
	sem := make(chan struct{}, e.opts.Concurrency)
	var wg sync.WaitGroup
	for _, p := range due {
		a, ok := e.adapters[p.w.Source]
		if !ok {
			p.err = fmt.Errorf("no adapter is registered for source %q", p.w.Source)
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p.snap, p.err = a.Snapshot(ctx, p.w.ResourceRef)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	tx, err := e.st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("poll watches: %w", err)
	}
	defer tx.Rollback()
	var notes []Lifecycle
	for _, p := range due {
		c.Polled++
		n, err := e.apply(ctx, tx, p, now, c)
		if err != nil {
			return err
		}
		notes = append(notes, n...)
		e.mu.Lock()
		if p.w.Status == StatusActive {
			e.nextDue[p.w.ID] = now.Add(e.interval(p.w, now))
		} else {
			delete(e.nextDue, p.w.ID)
		}
		e.mu.Unlock()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("poll watches: %w", err)
	}
	for _, n := range notes {
		e.emit(ctx, n)
	}
	return nil
}

// apply records one watch's read: a failure keeps the old snapshot; a
// success enqueues the matched events, then saves the snapshot, then ends a
// terminal watch.
func (e *Engine) apply(ctx context.Context, tx *sql.Tx, p *polled, now time.Time, c *Cycle) ([]Lifecycle, error) {
	w := p.w
	var events []Event
	if p.err == nil {
		a := e.adapters[w.Source]
		if string(p.snap) != string(w.Snapshot) {
			events, p.err = a.Events(w.Snapshot, p.snap)
		}
	}
	if p.err != nil {
		c.Failed++
		msg := p.err.Error()
		// last_check_at stays at the last successful read, so a before_time
		// deadline that passed during an outage is still seen afterwards.
		if _, err := tx.ExecContext(ctx, `UPDATE watches SET last_error = ?, last_error_at = ? WHERE id = ?`,
			msg, now.UnixMilli(), w.ID); err != nil {
			return nil, fmt.Errorf("record poll failure of watch %s: %w", w.ID, err)
		}
		if msg == w.LastError {
			return nil, nil // already reported
		}
		return []Lifecycle{{Type: "watch.poll_failed", WatchID: w.ID, ChatID: w.ChatID, Summary: "polling failed; the last snapshot is kept",
			Payload: map[string]any{"error": msg}}}, nil
	}
	events = append(events, triggerEvents(w, p.snap, now)...)
	var notes []Lifecycle
	if len(events) > 0 {
		queued, err := e.enqueue(ctx, tx, w, events, now)
		if err != nil {
			return nil, err
		}
		c.Queued += len(queued)
		notes = append(notes, queued...)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE watches SET snapshot = ?, last_check_at = ?, last_error = NULL, last_error_at = NULL WHERE id = ?`,
		string(p.snap), now.UnixMilli(), w.ID); err != nil {
		return nil, fmt.Errorf("save snapshot of watch %s: %w", w.ID, err)
	}
	w.Snapshot, w.LastCheckAt = p.snap, now
	if e.adapters[w.Source].IsTerminal(p.snap) {
		if _, err := tx.ExecContext(ctx, `UPDATE watches SET status = 'completed', ended_at = ? WHERE id = ? AND status = 'active'`,
			now.UnixMilli(), w.ID); err != nil {
			return nil, fmt.Errorf("complete watch %s: %w", w.ID, err)
		}
		w.Status = StatusCompleted
		c.Completed++
		notes = append(notes, Lifecycle{Type: "watch.completed", WatchID: w.ID, ChatID: w.ChatID, Summary: "the watched resource reached a final state"})
	}
	return notes, nil
}

// triggerEvents fires before_time rules whose deadline (the live timestamp
// minus the minutes) passed since the previous check while the timestamp
// itself is still ahead: a stale window after a restart sends nothing.
func triggerEvents(w *Watch, snap json.RawMessage, now time.Time) []Event {
	var doc any
	var out []Event
	prev := w.LastCheckAt
	if prev.IsZero() {
		prev = w.CreatedAt
	}
	for _, r := range w.Rules {
		t := r.Trigger
		if t == nil {
			continue
		}
		if doc == nil {
			doc = decode(snap)
		}
		target, ok := timestampAt(doc, t.Field)
		if !ok {
			continue
		}
		deadline := target.Add(-time.Duration(t.Minutes * float64(time.Minute)))
		if !deadline.After(prev) || deadline.After(now) || !target.After(now) {
			continue
		}
		out = append(out, Event{
			Key: fmt.Sprintf("before_time:%s:%d", r.ID, deadline.Unix()/60), Type: EventBeforeTime, At: now, RuleID: r.ID,
			Data: map[string]any{"ruleId": r.ID, "field": t.Field, "minutes": t.Minutes,
				"deadline": deadline.UTC().Format(time.RFC3339), "target": target.UTC().Format(time.RFC3339),
				"deadlineMs": deadline.UnixMilli(), "targetMs": target.UnixMilli()},
			Current:      snap,
			FallbackText: fmt.Sprintf("Reminder: %g minutes before %s (%s).", t.Minutes, t.Field, target.Local().Format("15:04")),
		})
	}
	return out
}

// matches reports whether rule r takes event ev: the exact type, then every
// where entry deep-equal to the event data at its dot path.
func matches(r Rule, ev Event, data any) bool {
	if r.Trigger != nil {
		return ev.Type == EventBeforeTime && ev.RuleID == r.ID
	}
	if r.Event != ev.Type {
		return false
	}
	for k, want := range r.Where {
		got, ok := lookup(data, k)
		if !ok || !jsonEqual(got, want) {
			return false
		}
	}
	return true
}

// enqueue inserts each event that matched rules as one pending row for all
// of them, recording each rule's participation; once rules that already
// participated are skipped, and INSERT OR IGNORE drops a transition seen
// before (another poll, another process life).
func (e *Engine) enqueue(ctx context.Context, tx *sql.Tx, w *Watch, events []Event, now time.Time) ([]Lifecycle, error) {
	var used map[string]bool
	var notes []Lifecycle
	for _, ev := range events {
		b, _ := json.Marshal(ev.Data)
		var data any
		json.Unmarshal(b, &data)
		ev.Data, _ = data.(map[string]any)
		var matched []Rule
		for _, r := range w.Rules {
			if !matches(r, ev, data) {
				continue
			}
			if r.Once {
				if used == nil {
					var err error
					if used, err = onceUsed(ctx, tx, w.ID); err != nil {
						return nil, err
					}
				}
				if used[r.ID] {
					continue
				}
			}
			matched = append(matched, r)
		}
		if len(matched) == 0 {
			continue
		}
		if ev.At.IsZero() {
			ev.At = now
		}
		if len(ev.Current) == 0 {
			ev.Current = w.Snapshot
		}
		evJSON, _ := json.Marshal(ev)
		rulesJSON, _ := json.Marshal(matched)
		firstJSON, _ := json.Marshal(matched[0])
		id := newID("wev")
		r, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO watch_events(id, event_key, watch_id, rule_id, rule, matched_rules, event, status, created_at)
			VALUES (?,?,?,?,?,?,?,'pending',?)`, id, w.ID+":"+ev.Key, w.ID, matched[0].ID, string(firstJSON), string(rulesJSON), string(evJSON), now.UnixMilli())
		if err != nil {
			return nil, fmt.Errorf("queue event of watch %s: %w", w.ID, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			continue
		}
		var ids []string
		for _, m := range matched {
			if _, err := tx.ExecContext(ctx, `INSERT INTO watch_event_rules(event_id, watch_id, rule_id) VALUES (?,?,?)`, id, w.ID, m.ID); err != nil {
				return nil, fmt.Errorf("record rule %s of watch %s: %w", m.ID, w.ID, err)
			}
			if used != nil {
				used[m.ID] = true
			}
			ids = append(ids, m.ID)
		}
		notes = append(notes, Lifecycle{Type: "watch.event_queued", WatchID: w.ID, ChatID: w.ChatID, EventID: id,
			Summary: fmt.Sprintf("%s matched %s", ev.Type, strings.Join(ids, ", ")), Payload: map[string]any{"key": ev.Key, "rules": ids}})
	}
	return notes, nil
}

func onceUsed(ctx context.Context, tx *sql.Tx, watchID string) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT rule_id FROM watch_event_rules WHERE watch_id = ?`, watchID)
	if err != nil {
		return nil, fmt.Errorf("read rules already used by watch %s: %w", watchID, err)
	}
	defer rows.Close()
	used := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		used[id] = true
	}
	return used, rows.Err()
}
