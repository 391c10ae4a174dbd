package watch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// The four tables of watches.db (spec: Generic Watch Engine Internals).
var migrations = []string{`
CREATE TABLE watches (
	id               TEXT PRIMARY KEY,
	seq              INTEGER NOT NULL UNIQUE,      -- creation order
	source           TEXT NOT NULL,
	resource_ref     TEXT NOT NULL,
	rules            TEXT NOT NULL,                -- JSON []Rule
	instruction      TEXT NOT NULL,
	chat_id          TEXT NOT NULL,
	authorized_tools TEXT NOT NULL DEFAULT '[]',   -- legacy JSON; grants live in rules
	agent            INTEGER NOT NULL DEFAULT 0,   -- created by create_agent_watch
	status           TEXT NOT NULL,                -- active, stopped, expired, completed
	snapshot         TEXT,                         -- JSON, last observed state
	created_at       INTEGER NOT NULL,
	expires_at       INTEGER NOT NULL,
	last_check_at    INTEGER,
	last_error_at    INTEGER,
	last_error       TEXT,
	ended_at         INTEGER,
	parent_event_id  TEXT,                         -- continuation child of this event
	attempt          INTEGER NOT NULL DEFAULT 0,
	context          TEXT                          -- inherited event context (JSON)
);
CREATE INDEX watches_status ON watches(status, seq);
CREATE TABLE watch_events (
	id                TEXT PRIMARY KEY,
	event_key         TEXT NOT NULL UNIQUE,        -- <watchId>:<adapterEventKey>
	watch_id          TEXT NOT NULL REFERENCES watches(id),
	rule_id           TEXT NOT NULL,               -- compatibility: first matched rule
	rule              TEXT NOT NULL,               -- compatibility: its JSON
	matched_rules     TEXT NOT NULL,               -- JSON []Rule, all rules of this turn
	event             TEXT NOT NULL,               -- JSON Event
	notification_text TEXT,                        -- composed text, reused on retry
	chat_id           TEXT,                        -- where the chat copy was written
	message_id        TEXT,
	status            TEXT NOT NULL,               -- pending, delivered, failed
	attempts          INTEGER NOT NULL DEFAULT 0,  -- failed generations
	push_attempts     INTEGER NOT NULL DEFAULT 0,  -- all-failed push sends
	created_at        INTEGER NOT NULL,
	delivered_at      INTEGER,
	last_error        TEXT,
	last_error_at     INTEGER
);
CREATE INDEX watch_events_pending ON watch_events(status, created_at);
CREATE TABLE watch_event_rules (
	event_id TEXT NOT NULL REFERENCES watch_events(id),
	watch_id TEXT NOT NULL,
	rule_id  TEXT NOT NULL,
	PRIMARY KEY (event_id, rule_id)
);
CREATE INDEX watch_event_rules_once ON watch_event_rules(watch_id, rule_id);
CREATE TABLE watch_action_runs (
	id          INTEGER PRIMARY KEY,
	action_key  TEXT NOT NULL UNIQUE,              -- <eventId>:<ruleId>:<tool>
	event_id    TEXT NOT NULL,
	watch_id    TEXT NOT NULL,
	rule_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	args        TEXT,                              -- frozen arguments
	status      TEXT NOT NULL,                     -- claimed, succeeded, failed
	started_at  INTEGER NOT NULL,
	finished_at INTEGER,
	error       TEXT,
	outcome     TEXT
);
CREATE INDEX watch_action_runs_rule ON watch_action_runs(watch_id, rule_id, tool);
`}

// store is watches.db.
type store struct{ db *sql.DB }

func openStore(ctx context.Context, path string) (*store, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open watch store: %w", err)
	}
	return &store{db: db}, nil
}

func newID(prefix string) string {
	var b [9]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// stableID derives an id from parts, so a retried step inserts the same row.
func stableID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + "_" + hex.EncodeToString(h.Sum(nil)[:9])
}

func ms(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromMs(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

const watchColumns = `id, source, resource_ref, rules, instruction, chat_id, agent, status, snapshot, created_at, expires_at,
	last_check_at, last_error_at, last_error, ended_at, parent_event_id, attempt, context`

type scanner interface{ Scan(...any) error }

func scanWatch(sc scanner) (*Watch, error) {
	var w Watch
	var rules string
	var snap, lastErr, parent, wctx sql.NullString
	var created, expires int64
	var checked, errAt, ended sql.NullInt64
	if err := sc.Scan(&w.ID, &w.Source, &w.ResourceRef, &rules, &w.Instruction, &w.ChatID, &w.Agent, &w.Status, &snap,
		&created, &expires, &checked, &errAt, &lastErr, &ended, &parent, &w.Attempt, &wctx); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(rules), &w.Rules); err != nil {
		return nil, fmt.Errorf("watch %s has damaged rules: %w", w.ID, err)
	}
	if snap.Valid {
		w.Snapshot = json.RawMessage(snap.String)
	}
	if wctx.Valid {
		w.Context = json.RawMessage(wctx.String)
	}
	w.CreatedAt, w.ExpiresAt = time.UnixMilli(created), time.UnixMilli(expires)
	w.LastCheckAt, w.LastErrorAt, w.EndedAt = fromMs(checked), fromMs(errAt), fromMs(ended)
	w.LastError, w.ParentEventID = lastErr.String, parent.String
	return &w, nil
}

func (s *store) insertWatch(ctx context.Context, w *Watch) (inserted bool, err error) {
	rules, _ := json.Marshal(w.Rules)
	var wctx any
	if len(w.Context) > 0 {
		wctx = string(w.Context)
	}
	r, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO watches(id, seq, source, resource_ref, rules, instruction, chat_id, agent,
		status, snapshot, created_at, expires_at, last_check_at, parent_event_id, attempt, context)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM watches), ?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		w.ID, w.Source, w.ResourceRef, string(rules), w.Instruction, w.ChatID, w.Agent, w.Status, string(w.Snapshot),
		w.CreatedAt.UnixMilli(), w.ExpiresAt.UnixMilli(), ms(w.CreatedAt), nullString(w.ParentEventID), w.Attempt, wctx)
	if err != nil {
		return false, fmt.Errorf("save watch: %w", err)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ErrNotFound reports an unknown watch.
var ErrNotFound = errors.New("no such watch")

func (s *store) getWatch(ctx context.Context, id string) (*Watch, error) {
	w, err := scanWatch(s.db.QueryRowContext(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read watch %s: %w", id, err)
	}
	return w, nil
}

func (s *store) listWatches(ctx context.Context, where string, args ...any) ([]*Watch, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+watchColumns+` FROM watches WHERE `+where+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("list watches: %w", err)
	}
	defer rows.Close()
	var out []*Watch
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// endWatch moves an active watch to a final status; it reports whether it did.
func (s *store) endWatch(ctx context.Context, id, status string, at time.Time) (bool, error) {
	r, err := s.db.ExecContext(ctx, `UPDATE watches SET status = ?, ended_at = ? WHERE id = ? AND status = 'active'`, status, at.UnixMilli(), id)
	if err != nil {
		return false, fmt.Errorf("end watch %s: %w", id, err)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}

// storedEvent is a row of watch_events.
type storedEvent struct {
	row          int64
	ID           string
	WatchID      string
	Rules        []Rule
	Event        Event
	Text         string
	ChatID       string
	MessageID    string
	Attempts     int
	PushAttempts int
}

// pendingAfter reads up to limit pending events inserted after rowid
// afterRow, oldest first.
func (s *store) pendingAfter(ctx context.Context, afterRow int64, limit int) ([]*storedEvent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT rowid, id, watch_id, matched_rules, event, COALESCE(notification_text, ''), COALESCE(chat_id, ''),
		COALESCE(message_id, ''), attempts, push_attempts
		FROM watch_events WHERE status = 'pending' AND rowid > ? ORDER BY rowid LIMIT ?`, afterRow, limit)
	if err != nil {
		return nil, fmt.Errorf("read pending watch events: %w", err)
	}
	defer rows.Close()
	var out []*storedEvent
	for rows.Next() {
		var e storedEvent
		var rules, ev string
		if err := rows.Scan(&e.row, &e.ID, &e.WatchID, &rules, &ev, &e.Text, &e.ChatID, &e.MessageID, &e.Attempts, &e.PushAttempts); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(rules), &e.Rules); err != nil {
			return nil, fmt.Errorf("watch event %s has damaged rules: %w", e.ID, err)
		}
		if err := json.Unmarshal([]byte(ev), &e.Event); err != nil {
			return nil, fmt.Errorf("watch event %s is damaged: %w", e.ID, err)
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}

func (s *store) exec(ctx context.Context, what, q string, args ...any) error {
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
