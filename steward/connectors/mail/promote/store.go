package promote

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// Outcomes of one thread in a run. Only filtered, skipped and promoted are
// recorded; deferred leaves the thread's state as it was, so a later run
// tries again. Unchanged threads (same hash as recorded) are not looked at.
const (
	OutcomeFiltered  = "filtered"
	OutcomeSkipped   = "skipped"
	OutcomePromoted  = "promoted"
	OutcomeDeferred  = "deferred"
	OutcomeUnchanged = "unchanged"
	// OutcomeTriage is a dry run's candidate for the model.
	OutcomeTriage = "would-triage"
)

var migrations = []string{`
CREATE TABLE threads(
  key         TEXT PRIMARY KEY,      -- thread:<id>
  thread_id   INTEGER NOT NULL,
  hash        TEXT NOT NULL,         -- SHA-256 of the ordered subjects and bodies
  outcome     TEXT NOT NULL,         -- filtered, skipped, promoted
  reason      TEXT NOT NULL DEFAULT '',
  note        TEXT NOT NULL DEFAULT '', -- vault path of the canonical note, once written
  attachments TEXT NOT NULL DEFAULT '[]', -- SavedAttachment list of the note
  message_ids TEXT NOT NULL DEFAULT '[]',
  categories  TEXT NOT NULL DEFAULT '[]',
  updated_at  INTEGER NOT NULL
);
CREATE TABLE runs(
  id          INTEGER PRIMARY KEY,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  dry_run     INTEGER NOT NULL DEFAULT 0,
  candidates  INTEGER NOT NULL DEFAULT 0,
  unchanged   INTEGER NOT NULL DEFAULT 0,
  filtered    INTEGER NOT NULL DEFAULT 0,
  skipped     INTEGER NOT NULL DEFAULT 0,
  promoted    INTEGER NOT NULL DEFAULT 0,
  deferred    INTEGER NOT NULL DEFAULT 0,
  model_calls INTEGER NOT NULL DEFAULT 0,
  rescan      TEXT NOT NULL DEFAULT '',
  error       TEXT NOT NULL DEFAULT ''
);
`}

// Store is the promotion state (STEWARD_HOME/mail-promoter/state.db): one
// row per thread that reached a final outcome, and one per run.
type Store struct{ db *sql.DB }

// OpenStore opens (creating) the state database at path.
func OpenStore(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open promotion state: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// State is a thread's recorded promotion state.
type State struct {
	Key         string            `json:"key"`
	ThreadID    int64             `json:"threadId"`
	Hash        string            `json:"hash"`
	Outcome     string            `json:"outcome"`
	Reason      string            `json:"reason,omitempty"`
	Note        string            `json:"note,omitempty"`
	Attachments []SavedAttachment `json:"attachments,omitempty"`
	MessageIDs  []string          `json:"messageIds,omitempty"`
	Categories  []string          `json:"categories,omitempty"`
	UpdatedAt   time.Time         `json:"updatedAt"`
}

// Hashes returns every recorded thread key with its hash.
func (s *Store) Hashes(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, hash FROM threads`)
	if err != nil {
		return nil, fmt.Errorf("read promotion hashes: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			return nil, err
		}
		out[k] = h
	}
	return out, rows.Err()
}

// Get returns a thread's state, or nil when none is recorded.
func (s *Store) Get(ctx context.Context, key string) (*State, error) {
	var st State
	var atts, ids, cats string
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT key, thread_id, hash, outcome, reason, note, attachments, message_ids, categories, updated_at
		FROM threads WHERE key = ?`, key).Scan(&st.Key, &st.ThreadID, &st.Hash, &st.Outcome, &st.Reason, &st.Note, &atts, &ids, &cats, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read promotion state of %s: %w", key, err)
	}
	json.Unmarshal([]byte(atts), &st.Attachments)
	json.Unmarshal([]byte(ids), &st.MessageIDs)
	json.Unmarshal([]byte(cats), &st.Categories)
	st.UpdatedAt = time.UnixMilli(at)
	return &st, nil
}

// Record stores a final outcome. A thread's note and attachments, once
// written, stay recorded when a later version is filtered or skipped: the
// note remains in the wiki.
func (s *Store) Record(ctx context.Context, st State) error {
	if st.Outcome != OutcomeFiltered && st.Outcome != OutcomeSkipped && st.Outcome != OutcomePromoted {
		return fmt.Errorf("record promotion state of %s: %q is not a final outcome", st.Key, st.Outcome)
	}
	atts, _ := json.Marshal(orEmpty(st.Attachments))
	ids, _ := json.Marshal(orEmpty(st.MessageIDs))
	cats, _ := json.Marshal(orEmpty(st.Categories))
	_, err := s.db.ExecContext(ctx, `INSERT INTO threads(key, thread_id, hash, outcome, reason, note, attachments, message_ids, categories, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(key) DO UPDATE SET hash = excluded.hash, outcome = excluded.outcome, reason = excluded.reason,
		  note = CASE WHEN excluded.note != '' THEN excluded.note ELSE threads.note END,
		  attachments = CASE WHEN excluded.note != '' THEN excluded.attachments ELSE threads.attachments END,
		  message_ids = excluded.message_ids,
		  categories = CASE WHEN excluded.note != '' THEN excluded.categories ELSE threads.categories END,
		  updated_at = excluded.updated_at`,
		st.Key, st.ThreadID, st.Hash, st.Outcome, st.Reason, st.Note, string(atts), string(ids), string(cats), st.UpdatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("record promotion state of %s: %w", st.Key, err)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Run is one recorded run.
type Run struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	DryRun     bool      `json:"dryRun,omitempty"`
	Counts
	Rescan string `json:"rescan,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Counts are a run's threads per outcome.
type Counts struct {
	Candidates int `json:"candidates"`
	Unchanged  int `json:"unchanged"`
	Filtered   int `json:"filtered"`
	Skipped    int `json:"skipped"`
	Promoted   int `json:"promoted"`
	Deferred   int `json:"deferred"`
	ModelCalls int `json:"modelCalls"`
	// WouldTriage counts a dry run's threads that would go to the model.
	WouldTriage int `json:"wouldTriage,omitempty"`
}

// RecordRun stores a finished run.
func (s *Store) RecordRun(ctx context.Context, r Run) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO runs(started_at, finished_at, dry_run, candidates, unchanged, filtered, skipped, promoted, deferred, model_calls, rescan, error)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.StartedAt.UnixMilli(), r.FinishedAt.UnixMilli(), r.DryRun,
		r.Candidates, r.Unchanged, r.Filtered, r.Skipped, r.Promoted, r.Deferred, r.ModelCalls, r.Rescan, r.Error)
	if err != nil {
		return fmt.Errorf("record promotion run: %w", err)
	}
	return nil
}

// Summary is what the System page shows: threads per recorded outcome and
// the last run.
type Summary struct {
	Threads map[string]int `json:"threads"`
	LastRun *Run           `json:"lastRun,omitempty"`
}

// ReadSummary reads the summary from the state database at path, read-only.
func ReadSummary(ctx context.Context, path string) (*Summary, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return summary(ctx, db)
}

// Summary returns the summary of this store.
func (s *Store) Summary(ctx context.Context) (*Summary, error) { return summary(ctx, s.db) }

func summary(ctx context.Context, db *sql.DB) (*Summary, error) {
	sum := &Summary{Threads: map[string]int{}}
	rows, err := db.QueryContext(ctx, `SELECT outcome, count(*) FROM threads GROUP BY outcome`)
	if err != nil {
		return nil, fmt.Errorf("read promotion summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			return nil, err
		}
		sum.Threads[o] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var r Run
	var started, finished int64
	err = db.QueryRowContext(ctx, `SELECT started_at, finished_at, dry_run, candidates, unchanged, filtered, skipped, promoted, deferred, model_calls, rescan, error
		FROM runs WHERE dry_run = 0 ORDER BY id DESC LIMIT 1`).Scan(&started, &finished, &r.DryRun, &r.Candidates, &r.Unchanged,
		&r.Filtered, &r.Skipped, &r.Promoted, &r.Deferred, &r.ModelCalls, &r.Rescan, &r.Error)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read the last promotion run: %w", err)
	default:
		r.StartedAt, r.FinishedAt = time.UnixMilli(started), time.UnixMilli(finished)
		sum.LastRun = &r
	}
	return sum, nil
}
