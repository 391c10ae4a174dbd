// Package actions is Steward's Action Center: a background inbox of work that
// may need the user, with ready-to-approve proposals. It holds the store
// (STEWARD_HOME/action-center/actions.db: items, the seen ledger, settings
// metadata and versioned flows), the two producers (the mail scanner and the
// deterministic calendar reminders), the settings route and the MCP tools.
package actions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
)

// Path returns the store's file under STEWARD_HOME.
func Path(home string) string { return filepath.Join(home, "action-center", "actions.db") }

// List bounds (spec: "Performance, Bounding And Backpressure").
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// Status is an item's review state.
type Status string

// Statuses. Done and dismissed are "handled": sticky across scans.
const (
	StatusNew       Status = "new"
	StatusRead      Status = "read"
	StatusDone      Status = "done"
	StatusDismissed Status = "dismissed"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusNew, StatusRead, StatusDone, StatusDismissed:
		return true
	}
	return false
}

// Handled reports whether s is closed by the user (done or dismissed).
func (s Status) Handled() bool { return s == StatusDone || s == StatusDismissed }

// Priorities.
const (
	PriorityLow    = "low"
	PriorityNormal = "normal"
	PriorityHigh   = "high"
)

// Step is one proposed step: a tool step names a concrete MCP tool (its
// agent name, mcp__<server>__<tool>) and arguments ready for policy
// evaluation; a manual step explains work Steward cannot automate safely.
type Step struct {
	Label string          `json:"label"`
	Type  string          `json:"type"` // "tool" or "manual"
	Tool  string          `json:"tool,omitempty"`
	Args  json.RawMessage `json:"args,omitempty"`
	Links []string        `json:"links,omitempty"`
	Notes string          `json:"notes,omitempty"`
}

// Alternative is one executable proposal with its confidence.
type Alternative struct {
	Summary    string  `json:"summary"`
	Confidence float64 `json:"confidence"`
	Steps      []Step  `json:"steps"`
}

// FlowRef records the exact flow version applied to an item.
type FlowRef struct {
	ID      int64  `json:"id"`
	Version int    `json:"version"`
	Name    string `json:"name"`
}

// Snapshot is the context an item was planned from, so that refinement
// never silently reinterprets the trigger or a later edit of a flow.
type Snapshot struct {
	Trigger      json.RawMessage   `json:"trigger,omitempty"` // the triggering mail or event
	Context      []json.RawMessage `json:"context,omitempty"` // read-tool observations
	Rationale    string            `json:"rationale,omitempty"`
	Flows        []FlowRef         `json:"flows,omitempty"`
	Revisions    []string          `json:"revisions,omitempty"` // instructions of revise_action, oldest first
	CrossThreads []string          `json:"crossThreads,omitempty"`
}

// Item is one Action Center item.
type Item struct {
	ID          int64         `json:"id"`
	SourceKey   string        `json:"sourceKey"` // mail:thread:<id> or calendar:<refId>
	Kind        string        `json:"kind"`
	Title       string        `json:"title"`
	Summary     string        `json:"summary"`
	Priority    string        `json:"priority"`
	DueAt       *time.Time    `json:"dueAt,omitempty"`
	Status      Status        `json:"status"`
	CreatedAt   time.Time     `json:"createdAt"`
	UpdatedAt   time.Time     `json:"updatedAt"`
	SourceAt    time.Time     `json:"sourceAt"` // newest source activity it reflects
	Proposal    []Alternative `json:"proposal,omitempty"`
	Diagnostics []string      `json:"diagnostics,omitempty"`
	Snapshot    Snapshot      `json:"snapshot,omitzero"`
	Notified    bool          `json:"notified"`

	// reminder, when set, is the event a calendar reminder was built from:
	// the row stores it in place of the proposal and snapshot, which
	// reading rebuilds from it.
	reminder *reminderTrigger
}

// Auditor receives the redacted lifecycle events; *audit.Ledger is one.
type Auditor interface {
	Record(ctx context.Context, e audit.Event)
}

// Options configures a Store.
type Options struct {
	// Audit receives item creation, revision and status events; nil records none.
	Audit Auditor
	// Actor is the audit actor (audit.ActorScheduler for the scan job).
	Actor string
	// Now replaces the clock in tests.
	Now func() time.Time
}

// Store is actions.db. Its methods are safe for concurrent use.
type Store struct {
	db   *sql.DB
	opts Options
	// The upsert's statements, prepared once: a reminder pass runs them
	// thousands of times in one transaction.
	sel, ins, upd *sql.Stmt
	// List's statements (a handful of shapes), prepared on first use: the
	// page is a fraction of a millisecond, of which parsing was a fifth.
	listMu    sync.Mutex
	listStmts map[string]*sql.Stmt
}

const (
	selectSQL = `SELECT ` + storedCols + ` FROM items WHERE source_key = ?`
	insertSQL = `INSERT INTO items(source_key, kind, title, summary, priority, due_at, status, created_at, updated_at,
		source_at, source_hash, proposal, diagnostics, snapshot, reminder_event) VALUES (?,?,?,?,?,?,'new',?,?,?,?,?,?,?,?)`
	updateSQL = `UPDATE items SET kind=?, title=?, summary=?, priority=?, due_at=?, status=?, updated_at=?,
		source_at=max(source_at, ?), source_hash=?, proposal=?, diagnostics=?, snapshot=?, reminder_event=? WHERE id=?`
)

// ErrNotFound reports an item or flow id the store does not hold.
var ErrNotFound = errors.New("action not found")

var migrations = []string{`
CREATE TABLE items (
	id          INTEGER PRIMARY KEY,
	source_key  TEXT NOT NULL UNIQUE,
	kind        TEXT NOT NULL,
	title       TEXT NOT NULL,
	summary     TEXT NOT NULL DEFAULT '',
	priority    TEXT NOT NULL DEFAULT 'normal',
	due_at      INTEGER,
	status      TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new','read','done','dismissed')),
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	source_at   INTEGER NOT NULL,
	proposal    TEXT NOT NULL DEFAULT '[]',
	diagnostics TEXT NOT NULL DEFAULT '[]',
	snapshot    TEXT NOT NULL DEFAULT '{}',
	notified_at INTEGER
);
CREATE INDEX items_status ON items(status, due_at);
CREATE INDEX items_updated ON items(updated_at);
-- Counts per status kept by triggers: list_actions reports them on every
-- call, and counting 100,000 index entries each time would dominate it.
CREATE TABLE item_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO item_counts VALUES ('new', 0), ('read', 0), ('done', 0), ('dismissed', 0);
CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN
	UPDATE item_counts SET n = n + 1 WHERE status = NEW.status;
END;
CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
	UPDATE item_counts SET n = n - 1 WHERE status = OLD.status;
END;
CREATE TRIGGER items_count_update AFTER UPDATE OF status ON items WHEN OLD.status <> NEW.status BEGIN
	UPDATE item_counts SET n = n - 1 WHERE status = OLD.status;
	UPDATE item_counts SET n = n + 1 WHERE status = NEW.status;
END;
CREATE TABLE seen (
	message_id TEXT PRIMARY KEY,
	thread_key TEXT NOT NULL DEFAULT '',
	outcome    TEXT NOT NULL,
	seen_at    INTEGER NOT NULL
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE flows (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	trigger    TEXT NOT NULL,
	guidance   TEXT NOT NULL,
	exclusions TEXT NOT NULL DEFAULT '',
	enabled    INTEGER NOT NULL DEFAULT 1,
	version    INTEGER NOT NULL DEFAULT 1,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE flow_versions (
	flow_id    INTEGER NOT NULL,
	version    INTEGER NOT NULL,
	name       TEXT NOT NULL,
	trigger    TEXT NOT NULL,
	guidance   TEXT NOT NULL,
	exclusions TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (flow_id, version)
);
`, `
-- Version 2 puts the compact columns (notified_at included) and the
-- producer's content hash before the payload: a list page reads the first
-- part of each row only, instead of following a multi-KB snapshot's
-- overflow pages to reach a trailing column.
CREATE TABLE items_v2 (
	id          INTEGER PRIMARY KEY,
	source_key  TEXT NOT NULL UNIQUE,
	kind        TEXT NOT NULL,
	title       TEXT NOT NULL,
	summary     TEXT NOT NULL DEFAULT '',
	priority    TEXT NOT NULL DEFAULT 'normal',
	due_at      INTEGER,
	status      TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new','read','done','dismissed')),
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	source_at   INTEGER NOT NULL,
	notified_at INTEGER,
	source_hash INTEGER NOT NULL DEFAULT 0,
	proposal    TEXT NOT NULL DEFAULT '[]',
	diagnostics TEXT NOT NULL DEFAULT '[]',
	snapshot    TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO items_v2(id, source_key, kind, title, summary, priority, due_at, status, created_at, updated_at, source_at,
	notified_at, proposal, diagnostics, snapshot)
	SELECT id, source_key, kind, title, summary, priority, due_at, status, created_at, updated_at, source_at,
	notified_at, proposal, diagnostics, snapshot FROM items;
DROP TABLE items;
ALTER TABLE items_v2 RENAME TO items;
CREATE INDEX items_status ON items(status, due_at);
CREATE INDEX items_updated ON items(updated_at);
-- Covers an upsert's lookup (storedCols by source key): a reminder pass
-- compares 10,000 rows without reading one of them.
CREATE INDEX items_source_state ON items(source_key, source_hash, status, source_at);
CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN
	UPDATE item_counts SET n = n + 1 WHERE status = NEW.status;
END;
CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN
	UPDATE item_counts SET n = n - 1 WHERE status = OLD.status;
END;
CREATE TRIGGER items_count_update AFTER UPDATE OF status ON items WHEN OLD.status <> NEW.status BEGIN
	UPDATE item_counts SET n = n - 1 WHERE status = OLD.status;
	UPDATE item_counts SET n = n + 1 WHERE status = NEW.status;
END;
`, `
-- Version 3: inserts no longer count themselves row by row. The insert
-- trigger made every INSERT keep a statement journal, about a third of a
-- 10,000-reminder pass; the store's writers (Upsert, UpsertBatch) add what
-- they created to item_counts once per transaction instead. Deletes and
-- status changes keep their triggers.
DROP TRIGGER items_count_insert;
UPDATE item_counts SET n = (SELECT count(*) FROM items WHERE items.status = item_counts.status);
`, `
-- Version 4: a calendar reminder's row keeps its event's fields, encoded
-- compactly, instead of a JSON proposal and snapshot (which only repeat
-- the event): reading rebuilds them. Rows written before keep their JSON.
-- items_source_state goes: with compact rows, an upsert's lookup reads the
-- row's first columns through the UNIQUE index on source_key about as fast,
-- and a reminder insert updates one b-tree fewer.
ALTER TABLE items ADD COLUMN reminder_event BLOB;
DROP INDEX items_source_state;
`}

// Open opens (creating if needed) the store at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Actor == "" {
		opts.Actor = audit.ActorHost
	}
	// A 16 MiB page cache holds a 10,000-reminder pass's dirty pages, which
	// the 2 MiB default spills to the WAL in the middle of the transaction;
	// statement journals (status updates still have count triggers) stay
	// in memory rather than a temporary file.
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations, CacheKiB: 16 << 10, MemoryTempStore: true})
	if err != nil {
		return nil, fmt.Errorf("open action store %s: %w", path, err)
	}
	s := &Store{db: db, opts: opts}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{{&s.sel, selectSQL}, {&s.ins, insertSQL}, {&s.upd, updateSQL}} {
		if *p.dst, err = db.PrepareContext(ctx, p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("prepare action store %s: %w", path, err)
		}
	}
	return s, nil
}

// Close closes the store.
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.sel, s.ins, s.upd} {
		st.Close()
	}
	for _, st := range s.listStmts {
		st.Close()
	}
	return s.db.Close()
}

// DB is the underlying database (benchmarks compare its queries with C SQLite).
func (s *Store) DB() *sql.DB { return s.db }

func (s *Store) audit(ctx context.Context, typ, summary string, risk audit.Risk, payload any) {
	if s.opts.Audit != nil {
		s.opts.Audit.Record(ctx, audit.Event{Actor: s.opts.Actor, Type: typ, Risk: risk, Tool: "action-center", Summary: summary, Payload: payload})
	}
}

// Upserted says what Upsert did.
type Upserted int

// Upsert outcomes.
const (
	Unchanged Upserted = iota // a handled item kept closed, or nothing newer
	Created
	Updated
	Reopened // a handled item reopened by genuinely newer activity
)

// Upsert stores it by its source key. A new key creates an item (status
// new). An existing open item takes the new content, and becomes new again
// when it reflects newer activity. A handled (done/dismissed) item stays
// closed unless it.SourceAt is after the activity it was closed with
// (genuinely newer mail on the same thread); keepStatus (calendar reminders,
// which preserve their review status when the event moves) updates content
// but never reopens. It returns the stored id.
func (s *Store) Upsert(ctx context.Context, it Item, keepStatus bool) (int64, Upserted, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, Unchanged, fmt.Errorf("store action %s: %w", it.SourceKey, err)
	}
	defer tx.Rollback()
	cur, err := s.lookup(ctx, tx, it.SourceKey)
	if err != nil {
		return 0, Unchanged, err
	}
	id, outcome, err := s.writer(ctx, tx).upsert(ctx, it, keepStatus, s.opts.Now(), cur)
	if err != nil {
		return 0, Unchanged, err
	}
	if outcome == Created {
		if err := countCreated(ctx, tx, 1); err != nil {
			return 0, Unchanged, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, Unchanged, fmt.Errorf("store action %s: %w", it.SourceKey, err)
	}
	switch outcome {
	case Created:
		s.audit(ctx, "action.created", "Action created: "+it.Title, audit.RiskLow,
			map[string]any{"id": id, "sourceKey": it.SourceKey, "kind": it.Kind, "flows": it.Snapshot.Flows})
	case Reopened:
		s.audit(ctx, "action.reopened", "Action reopened by newer activity: "+it.Title, audit.RiskLow, map[string]any{"id": id, "sourceKey": it.SourceKey})
	}
	return id, outcome, nil
}

// UpsertBatch stores items as Upsert does, in one transaction, and returns
// how many were created, updated and left unchanged. The calendar
// reminders use it: one commit per pass, not one per event.
func (s *Store) UpsertBatch(ctx context.Context, items []Item, keepStatus bool) (created, updated, unchanged int, err error) {
	// A connection of its own, so that new reminders can go through it
	// raw (insertReminders) inside the transaction.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("store actions: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("store actions: %w", err)
	}
	defer func() {
		tx.Rollback()
		if errors.Is(err, errChecksOff) {
			discardConn(conn)
		}
	}()
	now := s.opts.Now()
	current, err := s.lookupMany(ctx, tx, items)
	if err != nil {
		return 0, 0, 0, err
	}
	w := s.writer(ctx, tx)
	var fresh []int // positions of the items whose key has no row
	for i := range items {
		cur := current[i]
		if cur == nil {
			fresh = append(fresh, i)
			continue
		}
		_, out, err := w.upsert(ctx, items[i], keepStatus, now, cur)
		if err != nil {
			return 0, 0, 0, err
		}
		if out == Unchanged {
			unchanged++
		} else {
			updated++
		}
	}
	// New rows go in in key order, so that consecutive inserts into the
	// source key's unique index (random refIds for reminders) land on
	// neighbouring pages, and a key twice in the batch sits with itself: its
	// first occurrence (ties sort by position) creates it, the later ones
	// update it afterwards.
	slices.SortFunc(fresh, func(a, b int) int {
		if c := strings.Compare(items[a].SourceKey, items[b].SourceKey); c != 0 {
			return c
		}
		return a - b
	})
	var again, rems []*Item
	gen := &batchInsert{tx: tx, sql: multiInsertSQL}
	for i, at := range fresh {
		it := &items[at]
		if i > 0 && it.SourceKey == items[fresh[i-1]].SourceKey {
			again = append(again, it)
			continue
		}
		created++
		if rawReminder(it) {
			rems = append(rems, it)
			continue
		}
		row, err := insertArgs(*it, now)
		if err != nil {
			return 0, 0, 0, err
		}
		if err := gen.add(ctx, row); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := insertReminders(ctx, conn, rems, now); err != nil {
		return 0, 0, 0, err
	}
	if err := gen.flush(ctx); err != nil {
		return 0, 0, 0, err
	}
	for _, it := range again {
		cur, err := s.lookup(ctx, tx, it.SourceKey)
		if err != nil {
			return 0, 0, 0, err
		}
		_, out, err := w.upsert(ctx, *it, keepStatus, now, cur)
		if err != nil {
			return 0, 0, 0, err
		}
		if out == Unchanged {
			unchanged++
		} else {
			updated++
		}
	}
	if err := countCreated(ctx, tx, created); err != nil {
		return 0, 0, 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, 0, fmt.Errorf("store actions: %w", err)
	}
	if created > 0 {
		s.audit(ctx, "action.created", fmt.Sprintf("%d actions created (%d updated)", created, updated), audit.RiskLow,
			map[string]any{"created": created, "updated": updated})
	}
	return created, updated, unchanged, nil
}

// countCreated adds n items created as new in tx to item_counts (schema
// version 3 has no insert trigger): in the same transaction, so a rollback
// takes the rows and their count back together.
func countCreated(ctx context.Context, tx *sql.Tx, n int) error {
	if n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE item_counts SET n = n + ? WHERE status = 'new'`, n); err != nil {
		return fmt.Errorf("count created actions: %w", err)
	}
	return nil
}

// stored is what an upsert compares with: the item's row, or nil.
type stored struct {
	id, sourceAt, hash int64
	status             Status
}

const storedCols = `id, status, source_at, source_hash`

func scanStored(r scanner) (*stored, error) {
	var c stored
	if err := r.Scan(&c.id, &c.status, &c.sourceAt, &c.hash); err != nil {
		return nil, err
	}
	return &c, nil
}

// lookup returns the row of key, or nil.
func (s *Store) lookup(ctx context.Context, tx *sql.Tx, key string) (*stored, error) {
	c, err := scanStored(tx.StmtContext(ctx, s.sel).QueryRowContext(ctx, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read action %s: %w", key, err)
	}
	return c, nil
}

// lookupMany returns the rows of items' keys in one query: out[i] is
// items[i]'s row, or nil.
func (s *Store) lookupMany(ctx context.Context, tx *sql.Tx, items []Item) ([]*stored, error) {
	out := make([]*stored, len(items))
	if len(items) == 0 {
		return out, nil
	}
	keys := make([]string, len(items))
	lo, hi := items[0].SourceKey, items[0].SourceKey
	for i, it := range items {
		keys[i] = it.SourceKey
		lo, hi = min(lo, it.SourceKey), max(hi, it.SourceKey)
	}
	// A batch of new keys (a first reminder pass) finds no row in its key
	// range: one index probe instead of a join over every key.
	var found bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM items WHERE source_key BETWEEN ? AND ?)`, lo, hi).Scan(&found); err != nil {
		return nil, fmt.Errorf("read actions: %w", err)
	}
	if !found {
		return out, nil
	}
	list, _ := json.Marshal(keys)
	// json_each drives the join: one probe of the source key's unique
	// index and one row (its compact columns come first) per key, no
	// temporary table of the keys. A row comes back with its key's
	// position in the list (j.key), not the key itself.
	rows, err := tx.QueryContext(ctx, `SELECT j.key, items.id, items.status, items.source_at, items.source_hash FROM json_each(?) j CROSS JOIN items
		WHERE items.source_key = j.value`, string(list))
	if err != nil {
		return nil, fmt.Errorf("read actions: %w", err)
	}
	defer rows.Close()
	all := make([]stored, 0, len(items))
	for rows.Next() {
		var i int
		var c stored
		if err := rows.Scan(&i, &c.id, &c.status, &c.sourceAt, &c.hash); err != nil {
			return nil, fmt.Errorf("read actions: %w", err)
		}
		if i < 0 || i >= len(out) {
			return nil, fmt.Errorf("read actions: key position %d of %d", i, len(out))
		}
		all = append(all, c)
		out[i] = &all[len(all)-1]
	}
	return out, rows.Err()
}

// txWriter holds the upsert's prepared statements bound to one transaction.
type txWriter struct{ ins, upd *sql.Stmt }

func (s *Store) writer(ctx context.Context, tx *sql.Tx) txWriter {
	return txWriter{tx.StmtContext(ctx, s.ins), tx.StmtContext(ctx, s.upd)}
}

// sourceHash fingerprints what a producer wrote for an item (the fields an
// unchanged calendar pass compares): equal hashes mean nothing to write.
func sourceHash(it *Item) int64 {
	// FNV-1a (64-bit) over kind, title, summary and priority, each followed
	// by a zero byte, then the due time's milliseconds little-endian; written
	// out so that hashing 10,000 reminders allocates nothing.
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, f := range [...]string{it.Kind, it.Title, it.Summary, it.Priority} {
		for i := 0; i < len(f); i++ {
			h = (h ^ uint64(f[i])) * prime
		}
		h *= prime // ^ 0
	}
	if d := nullMillis(it.DueAt); d.Valid {
		for i := 0; i < 8; i++ {
			h = (h ^ uint64(byte(uint64(d.Int64)>>(8*i)))) * prime
		}
	}
	return int64(h)
}

// upsert stores it given its current row cur (nil: none).
func (w txWriter) upsert(ctx context.Context, it Item, keepStatus bool, now time.Time, cur *stored) (int64, Upserted, error) {
	if it.SourceKey == "" || it.Kind == "" || it.Title == "" {
		return 0, Unchanged, errors.New("store action: source key, kind and title are required")
	}
	if it.Priority == "" {
		it.Priority = PriorityNormal
	}
	hash := sourceHash(&it)
	if cur == nil {
		row, err := insertArgs(it, now)
		if err != nil {
			return 0, Unchanged, err
		}
		res, err := w.ins.ExecContext(ctx, row...)
		if err != nil {
			return 0, Unchanged, fmt.Errorf("store action %s: %w", it.SourceKey, err)
		}
		id, _ := res.LastInsertId()
		return id, Created, nil
	}
	newer := it.SourceAt.UnixMilli() > cur.sourceAt
	next, outcome := cur.status, Updated
	switch {
	case keepStatus && cur.hash == hash:
		return cur.id, Unchanged, nil // nothing moved: no write, no reordering
	case cur.status.Handled() && !keepStatus && !newer:
		return cur.id, Unchanged, nil
	case cur.status.Handled() && !keepStatus:
		next, outcome = StatusNew, Reopened
	case newer && !keepStatus:
		next = StatusNew
	}
	p, err := encodeParts(it)
	if err != nil {
		return 0, Unchanged, err
	}
	if _, err := w.upd.ExecContext(ctx, it.Kind, it.Title, it.Summary, it.Priority, unixOrNil(it.DueAt), next, now.UnixMilli(), it.SourceAt.UnixMilli(),
		hash, p.proposal, p.diagnostics, p.snapshot, p.event, cur.id); err != nil {
		return 0, Unchanged, fmt.Errorf("update action %s: %w", it.SourceKey, err)
	}
	return cur.id, outcome, nil
}

// insertArgs validates it and returns insertSQL's arguments for it.
func insertArgs(it Item, now time.Time) ([]any, error) {
	if it.SourceKey == "" || it.Kind == "" || it.Title == "" {
		return nil, errors.New("store action: source key, kind and title are required")
	}
	if it.Priority == "" {
		it.Priority = PriorityNormal
	}
	p, err := encodeParts(it)
	if err != nil {
		return nil, err
	}
	return []any{it.SourceKey, it.Kind, it.Title, it.Summary, it.Priority, unixOrNil(it.DueAt), now.UnixMilli(), now.UnixMilli(),
		it.SourceAt.UnixMilli(), sourceHash(&it), p.proposal, p.diagnostics, p.snapshot, p.event}, nil
}

// insertChunk is how many rows one multi-row INSERT of a batch carries:
// per-statement cost (the driver's locks and calls, the VDBE's set-up) was
// a large share of a 10,000-reminder pass's inserts.
const insertChunk = 64

// batchInsert queues new rows of one transaction and writes them
// insertChunk at a time.
type batchInsert struct {
	tx   *sql.Tx
	sql  func(rows int) string // the statement for that many rows
	full *sql.Stmt             // the insertChunk-row statement, prepared on first use
	args []any
	rows int
}

func (b *batchInsert) add(ctx context.Context, row []any) error {
	b.args = append(b.args, row...)
	if b.rows++; b.rows == insertChunk {
		return b.flush(ctx)
	}
	return nil
}

// flush writes the queued rows.
func (b *batchInsert) flush(ctx context.Context) error {
	if b.rows == 0 {
		return nil
	}
	var err error
	if b.rows == insertChunk {
		if b.full == nil {
			if b.full, err = b.tx.PrepareContext(ctx, b.sql(insertChunk)); err != nil {
				return fmt.Errorf("store actions: %w", err)
			}
		}
		_, err = b.full.ExecContext(ctx, b.args...)
	} else {
		_, err = b.tx.ExecContext(ctx, b.sql(b.rows), b.args...)
	}
	if err != nil {
		return fmt.Errorf("store actions: %w", err)
	}
	b.args, b.rows = b.args[:0], 0
	return nil
}

// multiInsertSQL is insertSQL with n rows of values. OR ROLLBACK: a
// multi-row INSERT that may abort keeps a statement journal (a copy of every
// page it changes) so that it can undo itself alone; a batch undoes its whole
// transaction on any error anyway, and its keys were looked up first.
func multiInsertSQL(n int) string {
	head, row, _ := strings.Cut(insertSQL, "VALUES ")
	head = strings.Replace(head, "INSERT INTO", "INSERT OR ROLLBACK INTO", 1)
	return head + "VALUES " + strings.Repeat(row+",", n-1) + row
}

// compactReminder reports whether it is a reminder whose row can keep its
// event in place of its payload: the event starts at its due time, which
// the row keeps.
func compactReminder(it *Item) bool {
	return it.reminder != nil && it.DueAt != nil && !it.reminder.startAt.IsZero() && it.DueAt.Equal(it.reminder.startAt)
}

func nullMillis(t *time.Time) sql.NullInt64 {
	if t == nil || t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// emptyList and emptyObject fill a reminder row's proposal and snapshot
// columns, and stand for no diagnostics.
var emptyList, emptyObject = []byte("[]"), []byte("{}")

// encodeParts encodes the payload columns. A calendar reminder stores its
// event (reminder_event) in place of the proposal and snapshot, which it
// determines and which reading rebuilds; anything else stores their JSON.
func encodeParts(it Item) (storedPayload, error) {
	var p storedPayload
	var err error
	p.diagnostics = emptyList
	if len(it.Diagnostics) > 0 {
		if p.diagnostics, err = json.Marshal(it.Diagnostics); err != nil {
			return storedPayload{}, fmt.Errorf("encode action %s: %w", it.SourceKey, err)
		}
	}
	if compactReminder(&it) {
		p.proposal, p.snapshot, p.event = emptyList, emptyObject, appendReminderEvent(nil, it.SourceKey, it.reminder)
		return p, nil
	}
	if it.Proposal == nil {
		it.Proposal = []Alternative{}
	}
	if p.proposal, err = json.Marshal(it.Proposal); err == nil {
		p.snapshot, err = json.Marshal(it.Snapshot)
	}
	if err != nil {
		return storedPayload{}, fmt.Errorf("encode action %s: %w", it.SourceKey, err)
	}
	return p, nil
}

func unixOrNil(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// ListOptions filters a list. Filtering happens in SQLite before the limit.
type ListOptions struct {
	// IncludeHandled includes done and dismissed items (the web's "include
	// completed/dismissed" flag); otherwise only new and read ones.
	IncludeHandled bool
	// HideExpired drops items whose dueAt is already past; undated items stay.
	HideExpired bool
	// Status, when set, lists only that status (overrides IncludeHandled).
	Status Status
	// Limit is clamped to 1–100; zero means DefaultListLimit.
	Limit int
	// IncludePayload loads proposals, diagnostics and snapshots; otherwise
	// items carry the compact summary fields only.
	IncludePayload bool
}

// Counts are item counts by status.
type Counts map[Status]int

// ListResult is one page with both count views.
type ListResult struct {
	Items         []Item `json:"items"`
	CountsTotal   Counts `json:"countsTotal"`
	CountsVisible Counts `json:"countsVisible"`
	// Counts is the legacy alias of CountsTotal.
	Counts Counts `json:"counts"`
}

// ClampLimit applies the store's own bound, whatever the caller asked.
func ClampLimit(n int) int {
	switch {
	case n == 0:
		return DefaultListLimit
	case n < 1:
		return 1
	case n > MaxListLimit:
		return MaxListLimit
	}
	return n
}

const compactCols = `id, source_key, kind, title, summary, priority, due_at, status, created_at, updated_at, source_at, notified_at IS NOT NULL`
const payloadCols = `, proposal, diagnostics, snapshot, reminder_event`

func (o ListOptions) where(now time.Time) (string, []any) {
	var conds []string
	var args []any
	switch {
	case o.Status != "":
		conds, args = append(conds, "+status = ?"), append(args, o.Status)
	case !o.IncludeHandled:
		// Unary + keeps the status index out of the page query: walking
		// items_updated newest first stops after the page instead of
		// sorting every open item (the counts still use the index).
		conds = append(conds, "+status IN ('new','read')")
	}
	if o.HideExpired {
		conds, args = append(conds, "(due_at IS NULL OR due_at >= ?)"), append(args, now.UnixMilli())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Query is one SQL statement with its arguments.
type Query struct {
	SQL  string
	Args []any
}

// ListQueries are the statements List runs for o at now: the page, and the
// counts per status, total and filter-aware visible, in one statement
// (benchmarks run the same SQL through C SQLite). Counts come from
// item_counts (kept by the writers and the status/delete triggers); hiding expired items subtracts the expired ones,
// found through the (status, due_at) index.
func ListQueries(o ListOptions, now time.Time) (page, counts Query) {
	where, args := o.where(now)
	cols := compactCols
	if o.IncludePayload {
		cols += payloadCols
	}
	page = Query{`SELECT ` + cols + ` FROM items` + where + ` ORDER BY updated_at DESC, id DESC LIMIT ?`, append(args, ClampLimit(o.Limit))}
	// Visible counts apply the flags but not a single-status filter, so that
	// every status card shows its own visible figure.
	visible, vargs := `n`, []any(nil)
	if o.HideExpired {
		visible = `n - (SELECT count(*) FROM items i WHERE i.status = c.status AND i.due_at < ?)`
		vargs = append(vargs, now.UnixMilli())
	}
	if !o.IncludeHandled {
		visible = `CASE WHEN status IN ('new','read') THEN ` + visible + ` ELSE 0 END`
	}
	return page, Query{`SELECT status, n, ` + visible + ` FROM item_counts c`, vargs}
}

// List returns items, most recently updated first, with total and
// filter-aware visible counts.
func (s *Store) List(ctx context.Context, o ListOptions) (*ListResult, error) {
	if o.Status != "" && !o.Status.Valid() {
		return nil, fmt.Errorf("list actions: unknown status %q (new, read, done, dismissed)", o.Status)
	}
	page, counts := ListQueries(o, s.opts.Now())
	rows, err := s.listQuery(ctx, page)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	defer rows.Close()
	res := &ListResult{Items: make([]Item, 0, ClampLimit(o.Limit))}
	var rs rowScan
	for rows.Next() {
		it, err := rs.scan(rows, o.IncludePayload)
		if err != nil {
			return nil, fmt.Errorf("list actions: %w", err)
		}
		res.Items = append(res.Items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	if res.CountsTotal, res.CountsVisible, err = s.counts(ctx, counts); err != nil {
		return nil, err
	}
	res.Counts = res.CountsTotal
	return res, nil
}

func (s *Store) counts(ctx context.Context, q Query) (total, visible Counts, err error) {
	total = Counts{StatusNew: 0, StatusRead: 0, StatusDone: 0, StatusDismissed: 0}
	visible = Counts{StatusNew: 0, StatusRead: 0, StatusDone: 0, StatusDismissed: 0}
	rows, err := s.listQuery(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("count actions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st Status
		var n, v int
		if err := rows.Scan(&st, &n, &v); err != nil {
			return nil, nil, fmt.Errorf("count actions: %w", err)
		}
		total[st], visible[st] = n, v
	}
	return total, visible, rows.Err()
}

// listQuery runs q through its prepared statement.
func (s *Store) listQuery(ctx context.Context, q Query) (*sql.Rows, error) {
	s.listMu.Lock()
	st, ok := s.listStmts[q.SQL]
	if !ok {
		var err error
		if st, err = s.db.PrepareContext(ctx, q.SQL); err != nil {
			s.listMu.Unlock()
			return nil, err
		}
		if s.listStmts == nil {
			s.listStmts = map[string]*sql.Stmt{}
		}
		s.listStmts[q.SQL] = st
	}
	s.listMu.Unlock()
	return st.QueryContext(ctx, q.Args...)
}

type scanner interface{ Scan(...any) error }

// rowScan reads item rows (compactCols, then payloadCols when asked) into
// destinations kept across the rows of a query: scanning into a fresh set
// of a dozen variables made each of them, and the list of their addresses,
// an allocation per row.
type rowScan struct {
	it                       Item
	due                      sql.NullInt64
	created, updated, source int64
	prop, diag, snap         string
	event                    []byte
	dest                     []any
}

// scan reads the current row of r.
func (rs *rowScan) scan(r scanner, payload bool) (Item, error) {
	if rs.dest == nil {
		it := &rs.it
		rs.dest = []any{&it.ID, &it.SourceKey, &it.Kind, &it.Title, &it.Summary, &it.Priority, &rs.due, &it.Status, &rs.created, &rs.updated,
			&rs.source, &it.Notified, &rs.prop, &rs.diag, &rs.snap, &rs.event}
	}
	dest := rs.dest[:12]
	if payload {
		dest = rs.dest
	}
	rs.it, rs.event = Item{}, nil
	if err := r.Scan(dest...); err != nil {
		return Item{}, err
	}
	it := rs.it
	it.CreatedAt, it.UpdatedAt, it.SourceAt = time.UnixMilli(rs.created), time.UnixMilli(rs.updated), time.UnixMilli(rs.source)
	if rs.due.Valid {
		t := time.UnixMilli(rs.due.Int64)
		it.DueAt = &t
	}
	if payload && rs.event != nil {
		if err := json.Unmarshal([]byte(rs.diag), &it.Diagnostics); err != nil {
			return Item{}, fmt.Errorf("decode diagnostics of action %d: %w", it.ID, err)
		}
		ev, err := decodeReminderEvent(rs.event, it.SourceKey, rs.due)
		if err != nil {
			return Item{}, fmt.Errorf("decode reminder of action %d: %w", it.ID, err)
		}
		ev.expand(&it)
	} else if payload {
		if err := json.Unmarshal([]byte(rs.prop), &it.Proposal); err != nil {
			return Item{}, fmt.Errorf("decode proposal of action %d: %w", it.ID, err)
		}
		if err := json.Unmarshal([]byte(rs.diag), &it.Diagnostics); err != nil {
			return Item{}, fmt.Errorf("decode diagnostics of action %d: %w", it.ID, err)
		}
		if err := json.Unmarshal([]byte(rs.snap), &it.Snapshot); err != nil {
			return Item{}, fmt.Errorf("decode snapshot of action %d: %w", it.ID, err)
		}
	}
	return it, nil
}

// Get returns one item with its full payload.
func (s *Store) Get(ctx context.Context, id int64) (*Item, error) {
	var rs rowScan
	it, err := rs.scan(s.db.QueryRowContext(ctx, `SELECT `+compactCols+payloadCols+` FROM items WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read action %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read action %d: %w", id, err)
	}
	return &it, nil
}

// BySource returns the item with that source key, or ErrNotFound.
func (s *Store) BySource(ctx context.Context, key string) (*Item, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM items WHERE source_key = ?`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("action for %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("action for %s: %w", key, err)
	}
	return s.Get(ctx, id)
}

// SetStatus changes an item's status (the user's or a granted tool's decision).
func (s *Store) SetStatus(ctx context.Context, id int64, st Status) error {
	if !st.Valid() {
		return fmt.Errorf("set action %d status: unknown status %q (new, read, done, dismissed)", id, st)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE items SET status = ?, updated_at = ? WHERE id = ?`, st, s.opts.Now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("set action %d status: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set action %d status: %w", id, ErrNotFound)
	}
	s.audit(ctx, "action.status", fmt.Sprintf("Action %d marked %s", id, st), audit.RiskLow, map[string]any{"id": id, "status": st})
	return nil
}

// MarkRead moves a new item to read (selecting it in the app); other
// statuses are left as they are.
func (s *Store) MarkRead(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE items SET status = 'read' WHERE id = ? AND status = 'new'`, id)
	if err != nil {
		return fmt.Errorf("mark action %d read: %w", id, err)
	}
	return nil
}

// Revise replaces an item's proposal (and summary when given), recording the
// instruction in its snapshot.
func (s *Store) Revise(ctx context.Context, id int64, summary, instruction string, proposal []Alternative) (*Item, error) {
	it, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if summary != "" {
		it.Summary = summary
	}
	it.Proposal = proposal
	it.Snapshot.Revisions = append(it.Snapshot.Revisions, instruction)
	p, err := encodeParts(*it)
	if err != nil {
		return nil, err
	}
	// The revised payload is stored in full: a reminder's event no longer describes it.
	if _, err := s.db.ExecContext(ctx, `UPDATE items SET summary=?, proposal=?, diagnostics=?, snapshot=?, reminder_event=NULL, updated_at=? WHERE id=?`,
		it.Summary, p.proposal, p.diagnostics, p.snapshot, s.opts.Now().UnixMilli(), id); err != nil {
		return nil, fmt.Errorf("revise action %d: %w", id, err)
	}
	s.audit(ctx, "action.revised", "Action revised: "+it.Title, audit.RiskLow, map[string]any{"id": id, "instruction": instruction})
	return s.Get(ctx, id)
}

// SetSummary updates only the summary (cross-thread resolution: a later
// message in another thread answers the task; the user confirms closing).
func (s *Store) SetSummary(ctx context.Context, id int64, summary, crossThread string) error {
	it, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	it.Snapshot.CrossThreads = append(it.Snapshot.CrossThreads, crossThread)
	p, err := encodeParts(*it)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE items SET summary=?, proposal=?, snapshot=?, reminder_event=NULL, updated_at=? WHERE id=?`,
		summary, p.proposal, p.snapshot, s.opts.Now().UnixMilli(), id); err != nil {
		return fmt.Errorf("update action %d summary: %w", id, err)
	}
	return nil
}

// Unnotified lists open items not yet announced by Web Push, oldest first.
func (s *Store) Unnotified(ctx context.Context, limit int) ([]Item, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+compactCols+` FROM items WHERE notified_at IS NULL AND status = 'new' ORDER BY id LIMIT ?`, ClampLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list unnotified actions: %w", err)
	}
	defer rows.Close()
	var out []Item
	var rs rowScan
	for rows.Next() {
		it, err := rs.scan(rows, false)
		if err != nil {
			return nil, fmt.Errorf("list unnotified actions: %w", err)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// MarkNotified records that an item's notification was dispatched.
func (s *Store) MarkNotified(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE items SET notified_at = ? WHERE id = ?`, s.opts.Now().UnixMilli(), id); err != nil {
		return fmt.Errorf("mark action %d notified: %w", id, err)
	}
	return nil
}

// Seen reports whether a message id is in the seen ledger.
func (s *Store) Seen(ctx context.Context, messageID string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM seen WHERE message_id = ?`, messageID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read seen ledger: %w", err)
	}
	return true, nil
}

// MarkSeen records message ids as considered, with the outcome, in one
// transaction: the scanner calls it after each thread so a crash keeps
// completed progress.
func (s *Store) MarkSeen(ctx context.Context, threadKey, outcome string, messageIDs ...string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record seen messages: %w", err)
	}
	defer tx.Rollback()
	now := s.opts.Now().UnixMilli()
	for _, id := range messageIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO seen(message_id, thread_key, outcome, seen_at) VALUES (?,?,?,?)
			ON CONFLICT(message_id) DO UPDATE SET outcome = excluded.outcome, seen_at = excluded.seen_at`, id, threadKey, outcome, now); err != nil {
			return fmt.Errorf("record seen message %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record seen messages: %w", err)
	}
	return nil
}

// SeenCount returns the ledger's size.
func (s *Store) SeenCount(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM seen`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count seen ledger: %w", err)
	}
	return n, nil
}

// Meta reads a metadata value ("" and false when absent).
func (s *Store) Meta(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read action metadata %s: %w", key, err)
	}
	return v, true, nil
}

// SetMeta writes a metadata value.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value); err != nil {
		return fmt.Errorf("write action metadata %s: %w", key, err)
	}
	return nil
}
