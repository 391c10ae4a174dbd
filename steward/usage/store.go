// Package usage is Steward's usage ledger (STEWARD_HOME/usage.db): one
// terminal row per gateway request, diagnostic rows per provider attempt,
// and one row per tool call, with the reports the CLI and the Usage page show.
package usage

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentstack/agentstack/batchwrite"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/sqlitedb"
)

var migrations = []string{`
CREATE TABLE requests (
	id                 TEXT PRIMARY KEY,
	ts                 INTEGER NOT NULL, -- unix milliseconds
	service            TEXT NOT NULL,
	action             TEXT NOT NULL,
	endpoint           TEXT NOT NULL,
	public_model       TEXT NOT NULL,
	provider           TEXT NOT NULL,
	upstream_model     TEXT NOT NULL,
	stream             INTEGER NOT NULL,
	outcome            TEXT NOT NULL,
	status             INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	output_tokens      INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	cost_usd           REAL NOT NULL,    -- at the rates in force when recorded
	latency_ms         REAL NOT NULL,
	ttfb_ms            REAL NOT NULL,
	attempts           INTEGER NOT NULL,
	error              TEXT NOT NULL
);
CREATE INDEX requests_ts ON requests(ts);
CREATE TABLE attempts (
	request_id         TEXT NOT NULL,
	seq                INTEGER NOT NULL,
	ts                 INTEGER NOT NULL,
	provider           TEXT NOT NULL,
	upstream_model     TEXT NOT NULL,
	stream             INTEGER NOT NULL,
	status             INTEGER NOT NULL,
	outcome            TEXT NOT NULL,
	time_to_headers_ms REAL NOT NULL,
	error              TEXT NOT NULL,
	PRIMARY KEY (request_id, seq)
);
CREATE TABLE tool_calls (
	id          INTEGER PRIMARY KEY,
	ts          INTEGER NOT NULL,
	service     TEXT NOT NULL,
	action      TEXT NOT NULL,
	chat_id     TEXT NOT NULL,
	tool        TEXT NOT NULL,
	duration_ms REAL NOT NULL,
	ok          INTEGER NOT NULL,
	error       TEXT NOT NULL
);
CREATE INDEX tool_calls_ts ON tool_calls(ts);
`}

// ToolCall is one executed tool call for the tool ledger.
type ToolCall struct {
	Time     time.Time
	Service  string // e.g. "host"
	Action   string // e.g. "chat", "watch-poll"
	ChatID   string
	Tool     string
	Duration time.Duration
	OK       bool
	Error    string
}

// Options configures a Store.
type Options struct {
	Logger *slog.Logger
}

// Store is the usage ledger. Records are queued and written in batches by
// the shared batched writer so that recording never sits on a request's
// path: it never blocks, drops (and counts) what does not fit or comes after
// Close; Flush waits for the queue and Close drains it.
type Store struct {
	db *sql.DB
	w  *batchwrite.Writer[any]

	insReq, insAtt, insTool *sql.Stmt
}

// Open opens (creating) the ledger at path and starts its writer.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open usage ledger: %w", err)
	}
	s := &Store{db: db}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.insReq, `INSERT OR REPLACE INTO requests VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{&s.insAtt, `INSERT OR REPLACE INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?)`},
		{&s.insTool, `INSERT INTO tool_calls(ts, service, action, chat_id, tool, duration_ms, ok, error) VALUES (?,?,?,?,?,?,?,?)`},
	} {
		if *p.dst, err = db.PrepareContext(ctx, p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("prepare usage ledger statements: %w", err)
		}
	}
	s.w = batchwrite.New(batchwrite.Options[any]{Write: s.write, Window: batchWindow, MaxBatch: 512, QueueSize: 4096,
		Name: "usage ledger", Noun: "rows", Logger: opts.Logger})
	return s, nil
}

// DB exposes the database for read-only reporting by other packages' tests.
func (s *Store) DB() *sql.DB { return s.db }

// RecordRequest queues a gateway request row (implements gateway.Ledger).
func (s *Store) RecordRequest(_ context.Context, r gateway.RequestRecord) { s.w.Add(r) }

// RecordAttempt queues a provider attempt row (implements gateway.Ledger).
func (s *Store) RecordAttempt(_ context.Context, a gateway.AttemptRecord) { s.w.Add(a) }

// RecordTool queues a tool-call row.
func (s *Store) RecordTool(_ context.Context, c ToolCall) { s.w.Add(c) }

// Stats counts the rows queued, written, dropped (queue full or ledger
// closed) and lost in failed writes since Open.
func (s *Store) Stats() batchwrite.Stats { return s.w.Stats() }

// Flush waits until every record queued before the call is written.
func (s *Store) Flush(ctx context.Context) error { return s.w.Flush(ctx) }

// Close writes what is queued and closes the database.
func (s *Store) Close() error {
	s.w.Close()
	return s.db.Close()
}

// batchWindow is how long the writer gathers records into one transaction:
// one commit per window instead of one per request keeps the ledger off the
// gateway's CPU budget under load.
const batchWindow = 20 * time.Millisecond

func (s *Store) write(batch []any) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	insReq, insAtt, insTool := tx.Stmt(s.insReq), tx.Stmt(s.insAtt), tx.Stmt(s.insTool)
	for _, it := range batch {
		var err error
		switch r := it.(type) {
		case gateway.RequestRecord:
			t := r.Tokens
			_, err = insReq.Exec(r.ID, r.Time.UnixMilli(), r.Service, r.Action, r.Endpoint, r.PublicModel, r.Provider, r.UpstreamModel,
				r.Stream, string(r.Outcome), r.Status, t.Input, t.Output, t.CacheRead, t.CacheWrite, r.CostUSD,
				ms(r.Latency), ms(r.TTFB), r.Attempts, r.Error)
		case gateway.AttemptRecord:
			_, err = insAtt.Exec(r.RequestID, r.Seq, r.Time.UnixMilli(), r.Provider, r.UpstreamModel, r.Stream, r.Status,
				string(r.Outcome), ms(r.TimeToHeaders), r.Error)
		case ToolCall:
			if r.Time.IsZero() {
				r.Time = time.Now()
			}
			_, err = insTool.Exec(r.Time.UnixMilli(), label(r.Service), label(r.Action), r.ChatID, r.Tool, ms(r.Duration), r.OK, r.Error)
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func label(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
