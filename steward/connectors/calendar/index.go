package calendar

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentstack/agentstack/search/indexfile"
	"github.com/agentstack/agentstack/search/trigram"
	"github.com/agentstack/agentstack/search/vecindex"
)

// migrations is the index schema, one step per user_version.
//
// events holds one row per item: single events, recurring masters and
// detached occurrences (parent_ref set). ref_id is Steward's own identity
// and survives UID changes; uid_aliases keeps every earlier UID of an
// identity so reads and later write confirmation can resolve them.
// seen_generation records the sync that last observed a row.
var migrations = []string{`
CREATE TABLE events (
	id              INTEGER PRIMARY KEY,
	ref_id          TEXT NOT NULL UNIQUE,
	parent_ref      TEXT,
	source          TEXT NOT NULL,
	account         TEXT NOT NULL,
	calendar        TEXT NOT NULL,
	calendar_id     TEXT NOT NULL,
	uid             TEXT NOT NULL,
	external_id     TEXT NOT NULL DEFAULT '',
	source_path     TEXT NOT NULL DEFAULT '',
	recurrence_id   INTEGER,
	title           TEXT NOT NULL DEFAULT '',
	location        TEXT NOT NULL DEFAULT '',
	notes           TEXT NOT NULL DEFAULT '',
	url             TEXT NOT NULL DEFAULT '',
	start_at        INTEGER NOT NULL,
	end_at          INTEGER NOT NULL,
	all_day         INTEGER NOT NULL DEFAULT 0,
	start_date      TEXT NOT NULL DEFAULT '',
	end_date        TEXT NOT NULL DEFAULT '',
	tzid            TEXT NOT NULL DEFAULT '',
	floating        INTEGER NOT NULL DEFAULT 0,
	status          TEXT NOT NULL DEFAULT '',
	transparent     INTEGER NOT NULL DEFAULT 0,
	rrule           TEXT NOT NULL DEFAULT '',
	rrule_canonical TEXT NOT NULL DEFAULT '',
	rrule_problem   TEXT NOT NULL DEFAULT '',
	rrule_expandable INTEGER NOT NULL DEFAULT 1,
	series_end      INTEGER,
	exdates         TEXT NOT NULL DEFAULT '[]',
	rdates          TEXT NOT NULL DEFAULT '[]',
	alarms          TEXT NOT NULL DEFAULT '[]',
	last_modified   INTEGER,
	content_hash    TEXT NOT NULL,
	embedded_hash   TEXT NOT NULL DEFAULT '',
	seen_generation INTEGER NOT NULL
);
CREATE INDEX events_uid ON events(uid);
CREATE INDEX events_parent ON events(parent_ref);
CREATE INDEX events_time ON events(start_at, end_at);
CREATE INDEX events_series ON events(rrule) WHERE rrule <> '';
CREATE INDEX events_match ON events(source, calendar_id, start_at);
CREATE TABLE uid_aliases (
	uid        TEXT NOT NULL,
	ref_id     TEXT NOT NULL REFERENCES events(ref_id) ON DELETE CASCADE,
	first_seen INTEGER NOT NULL,
	PRIMARY KEY (uid, ref_id)
);
CREATE TABLE sync_state (
	id           INTEGER PRIMARY KEY CHECK (id = 1),
	generation   INTEGER NOT NULL,
	completed_at INTEGER NOT NULL,
	complete     INTEGER NOT NULL,
	report       TEXT NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Text is stored folded (lower case, no diacritics) so plain trigram works
-- on every SQLite from 3.34, including the C CLI used as a benchmark baseline.
CREATE VIRTUAL TABLE events_fts USING fts5(title, location, notes, calendar, account, tokenize = 'trigram');
`}

// Index is the calendar index (STEWARD_HOME/calendar-index.sqlitedb).
type Index struct {
	db       *sql.DB
	text     *trigram.Index
	vectors  *vecindex.Store
	readOnly bool
	// beforeCommit runs inside the sync transaction just before commit;
	// tests use it to prove that a failure publishes nothing.
	beforeCommit func() error
}

// ErrNoIndex reports a read of an index that has not been built yet.
var ErrNoIndex = errors.New("calendar index not built yet: run `steward calendar sync`")

// files describes the index file to indexfile.
var files = indexfile.Options{Name: "calendar index", Migrations: migrations, NotBuilt: ErrNoIndex}

// OpenIndex opens (creating if needed) the index at path for syncing.
func OpenIndex(ctx context.Context, path string) (*Index, error) {
	db, err := indexfile.Open(ctx, path, files)
	if err != nil {
		return nil, err
	}
	return &Index{db: db, text: newText(db), vectors: newVectors(db)}, nil
}

// OpenIndexReadOnly opens an existing index for searching; it never writes.
func OpenIndexReadOnly(ctx context.Context, path string) (*Index, error) {
	db, err := indexfile.OpenReadOnly(ctx, path, files)
	if err != nil {
		return nil, err
	}
	return &Index{db: db, text: newText(db), vectors: newVectors(db), readOnly: true}, nil
}

// newText returns the keyword side of the index open in db. A query of
// punctuation alone constrains nothing.
func newText(db *sql.DB) *trigram.Index {
	return trigram.New(db, trigram.Options{
		Table: "events_fts", Columns: []string{"title", "location", "notes", "calendar", "account"},
		Weights: []float64{10, 4, 1, 2, 1}, ScanLimit: 100_000, TermlessMatchesAll: true,
	})
}

// Close closes the index.
func (x *Index) Close() error { return x.db.Close() }

// DB exposes the connection for benchmarks and diagnostics.
func (x *Index) DB() *sql.DB { return x.db }

// SyncState is the completed-sync marker.
type SyncState struct {
	Generation  int64     `json:"generation"`
	CompletedAt time.Time `json:"completedAt"`
	Complete    bool      `json:"complete"`
	Report      string    `json:"-"`
}

// State returns the last published sync marker, or nil before the first sync.
func (x *Index) State(ctx context.Context) (*SyncState, error) {
	m, err := indexfile.LastBuild(ctx, x.db)
	if m == nil || err != nil {
		return nil, err
	}
	return &SyncState{Generation: m.Generation, CompletedAt: m.CompletedAt, Complete: m.Complete, Report: m.Report}, nil
}

func (x *Index) meta(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// zone returns the display zone recorded by the last sync.
func (x *Index) zone(ctx context.Context) *time.Location {
	name, err := x.meta(ctx, x.db, "zone")
	if err != nil || name == "" {
		return time.Local
	}
	loc, err := resolveTZID(name)
	if err != nil {
		return time.Local
	}
	return loc
}
