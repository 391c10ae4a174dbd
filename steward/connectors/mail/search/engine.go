// Package search answers questions over the mail mirror: structured SQL
// filters, FTS5 lexical ranking, trigram substring candidates and vector
// KNN, fused by reciprocal rank fusion and collapsed by thread, plus message
// and thread reads with bounded pages and the live fallback for bodies the
// mirror does not have.
//
// All of it runs on read-only connections kept warm, so a search never waits
// behind ingestion (another process writing through WAL).
package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/mail"
)

// Options configure an Engine.
type Options struct {
	// DBPath is the mirror's mail.db; it must exist (run a backfill first).
	DBPath string
	// Embedder embeds queries; nil means semantic search is off and every
	// query is answered lexically.
	Embedder mail.Embedder
	// SemanticOff explains why Embedder is nil ("MAIL_EMBED_ENDPOINT=off").
	SemanticOff string
	// Live reads a message from the mail client when the mirror has no
	// usable body (AppleScript on macOS); nil elsewhere.
	Live LiveMailReader
	// Conns is the number of read-only connections kept warm (default 4).
	Conns int
	// QueryTimeout bounds each search or read (default 30 s).
	QueryTimeout time.Duration
	Log          *slog.Logger
	Now          func() time.Time
}

// Engine answers searches and reads.
type Engine struct {
	db       *sql.DB
	embedder mail.Embedder
	semOff   string
	live     LiveMailReader
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time
	vec      vectorIndex
	conns    int // pooled read connections, all warmed by Prepare

	prepMu   sync.Mutex
	prepared *PrepareStats
}

// ErrNoMirror reports that the mirror database does not exist yet.
var ErrNoMirror = errors.New("the mail mirror does not exist yet; run 'steward mail backfill'")

// Open opens the mirror read-only.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if _, err := os.Stat(opts.DBPath); err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoMirror, opts.DBPath)
	}
	conns := opts.Conns
	if conns <= 0 {
		conns = 4
	}
	// A 2 GiB map and a 64 MiB cache per connection, so a large archive is
	// not re-read from disk.
	db, err := sqlitedb.Open(ctx, opts.DBPath, sqlitedb.Options{ReadOnly: true, MaxOpenConns: conns}.SearchTuning())
	if err != nil {
		return nil, fmt.Errorf("open mail mirror for search: %w", err)
	}
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	e := &Engine{db: db, conns: conns, embedder: opts.Embedder, semOff: opts.SemanticOff, live: opts.Live, timeout: opts.QueryTimeout, log: opts.Log, now: opts.Now}
	if e.timeout <= 0 {
		e.timeout = 30 * time.Second
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.embedder == nil && e.semOff == "" {
		e.semOff = "no embedding endpoint configured"
	}
	return e, nil
}

// Close closes the connections.
func (e *Engine) Close() error { return e.db.Close() }

// DB exposes the read-only pool (for benchmarks and diagnostics).
func (e *Engine) DB() *sql.DB { return e.db }

// PrepareStats reports what Prepare warmed.
type PrepareStats struct {
	Vectors   int `json:"vectors"`
	Dimension int `json:"dimension"`
	Messages  int `json:"messages"`
	// Connections is how many pooled read connections were warmed.
	Connections int           `json:"connections"`
	Duration    time.Duration `json:"durationNs"`
}

// Prepare warms the engine before the first request: it loads the vector
// index and runs one bounded KNN and small lexical and trigram lookups,
// returning no content. Calling it again only refreshes.
func (e *Engine) Prepare(ctx context.Context) (PrepareStats, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var st PrepareStats
	if _, err := e.vec.refresh(ctx, e.db); err != nil {
		return st, err
	}
	st.Vectors, st.Dimension = e.vec.size()
	if st.Dimension > 0 {
		probe := make([]float32, st.Dimension)
		probe[0] = 1
		if _, err := e.vec.search(probe, 50); err != nil {
			return st, err
		}
	}
	// Each pooled connection has its own page cache and FTS5 structure
	// cache, so each is warmed: holding them all at once makes the pool
	// hand out a different one every time.
	held := make([]*sql.Conn, 0, e.conns)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range e.conns {
		c, err := e.db.Conn(ctx)
		if err != nil {
			return st, fmt.Errorf("prepare mail search: %w", err)
		}
		held = append(held, c)
		if err := Warm(ctx, c); err != nil {
			return st, fmt.Errorf("prepare mail search: %w", err)
		}
	}
	st.Connections = len(held)
	// Counted once: a scan of the message table, not a per-connection warm-up.
	if err := held[0].QueryRowContext(ctx, "SELECT count(*) FROM messages WHERE deleted_at IS NULL").Scan(&st.Messages); err != nil {
		return st, fmt.Errorf("prepare mail search: count messages: %w", err)
	}
	st.Duration = time.Since(start)
	e.prepMu.Lock()
	e.prepared = &st
	e.prepMu.Unlock()
	return st, nil
}

// Querier is a connection Warm can run on (a *sql.Conn, *sql.DB or *sql.Tx).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Warm runs the small lookups Prepare runs on every read connection at
// start-up, so that the first interactive search finds the index structure,
// upper b-tree pages and the code paths of each stage warm. They return no
// source content.
func Warm(ctx context.Context, q Querier) error {
	for _, query := range []string{
		"SELECT rowid FROM message_fts WHERE message_fts MATCH 'steward' ORDER BY rank LIMIT 5",
		`SELECT rowid FROM message_tri WHERE message_tri MATCH '"ste"' ORDER BY rowid DESC LIMIT 5`,
		"SELECT id FROM messages WHERE seen = 0 AND deleted_at IS NULL ORDER BY id DESC LIMIT 5",
	} {
		rows, err := q.QueryContext(ctx, query)
		if err != nil {
			return fmt.Errorf("warm %q: %w", query, err)
		}
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("warm %q: %w", query, err)
		}
	}
	return nil
}

// Prepared returns the last preparation, or nil.
func (e *Engine) Prepared() *PrepareStats {
	e.prepMu.Lock()
	defer e.prepMu.Unlock()
	return e.prepared
}

// KNN returns the ids of the k messages nearest to vec (any state, no
// filters), nearest first: the raw vector stage of a search, for benchmarks
// and diagnostics.
func (e *Engine) KNN(ctx context.Context, vec []float32, k int) ([]int64, error) {
	if _, err := e.vec.refresh(ctx, e.db); err != nil {
		return nil, err
	}
	hits, err := e.vec.search(vec, k)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.id
	}
	return ids, nil
}
