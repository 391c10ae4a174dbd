// Package audit is Steward's audit ledger (STEWARD_HOME/audit.db): a
// redacted, queryable record of what happened across chat, tools, approvals,
// sessions, files and the system (spec: "Audit Trail").
//
// Every event is redacted before it is queued (package redact): the payload
// by redact.Value, the summary, identifiers and source references by
// redact.String. Recording is best-effort and never blocks the caller: events
// go into a bounded queue that one background writer stores in batches; a
// full queue, a closed ledger or a failed write is logged and counted in
// Stats, never returned to the caller. The ledger is therefore not a
// guaranteed complete forensic record.
//
// The spec's reference keeps two payload columns holding the same redacted
// representation; this ledger keeps one (payload), because a second copy of
// identical text would only double the storage and add a way for the two to
// disagree.
package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstack/agentstack/batchwrite"

	"github.com/agentstack/agentstack/redact"
	"github.com/agentstack/agentstack/sqlitedb"
)

// Actors: who caused an event.
const (
	ActorUser      = "user"
	ActorAssistant = "assistant"
	ActorAgent     = "agent"
	ActorHost      = "host"
	ActorScheduler = "scheduler"
	ActorWatch     = "watch"
)

// Event types recorded by the host. Other packages add their own in the same
// "domain.action" form (for example "writeop.confirmed" or "watch.expired").
const (
	TypeChatMessage       = "chat.message"
	TypeToolDecision      = "tool.decision" // allow / gate / deny
	TypeToolResult        = "tool.result"
	TypeApprovalRequest   = "approval.request"
	TypeApprovalResponse  = "approval.response"
	TypeApprovalTimeout   = "approval.timeout"
	TypeSessionConnect    = "session.connect"
	TypeSessionDisconnect = "session.disconnect"
	TypeFileUpload        = "file.upload"
	TypeFileOpen          = "file.open"
	TypeSystemStart       = "system.start"
)

// Risk grades an event for the Audit page's filter.
type Risk string

// Risk levels.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Valid reports whether r is one of the three levels.
func (r Risk) Valid() bool { return r == RiskLow || r == RiskMedium || r == RiskHigh }

// Ref links an event to a file or source (an upload token, a mail message
// id, a wiki page, a URL).
type Ref struct {
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// Event is one audit record. Record fills ID; Time defaults to now.
type Event struct {
	ID          int64     `json:"id"`
	Time        time.Time `json:"time"`
	Actor       string    `json:"actor"`
	Type        string    `json:"type"`
	Risk        Risk      `json:"risk"`
	ChatID      string    `json:"chatId,omitempty"`
	Tool        string    `json:"tool,omitempty"`
	Correlation string    `json:"correlationId,omitempty"` // e.g. a watch id or approval request id
	Summary     string    `json:"summary"`
	// Payload is any JSON-able value; it is redacted before storage. Events
	// read back carry it as json.RawMessage.
	Payload any   `json:"payload,omitempty"`
	Refs    []Ref `json:"refs,omitempty"`
}

// MaxPayloadBytes bounds a stored payload. The redaction caps keep real
// payloads far below it; a pathological one (a hundred keys of fifty-item
// arrays of objects…) is replaced by a note and a redacted preview.
const MaxPayloadBytes = 64 << 10

// DefaultQueueSize is how many events may wait for the writer.
const DefaultQueueSize = 4096

// Options configures a Ledger.
type Options struct {
	Logger *slog.Logger
	// QueueSize bounds the events waiting for the writer (DefaultQueueSize
	// when zero). Beyond it events are dropped and counted.
	QueueSize int
	// BusyTimeout is how long a write waits for another process holding the
	// database (sqlitedb.DefaultBusyTimeout when zero).
	BusyTimeout time.Duration
}

// Stats counts what happened to recorded events.
type Stats struct {
	Queued  int64 `json:"queued"`  // accepted into the queue
	Written int64 `json:"written"` // stored
	Dropped int64 `json:"dropped"` // refused: queue full or ledger closed
	Failed  int64 `json:"failed"`  // lost in a failed write
}

// Ledger is the audit store. Its methods are safe for concurrent use, and a
// nil *Ledger is a valid ledger that records nothing, so a host whose audit
// database cannot be opened can carry on without it.
type Ledger struct {
	db   *sql.DB
	log  *slog.Logger
	w    *batchwrite.Writer[row]
	once sync.Once
	// closing is set when Close begins.
	closing atomic.Bool

	beforeWrite func() // test hook: runs before each batch is written
}

var migrations = []string{`
CREATE TABLE events (
	id             INTEGER PRIMARY KEY,
	ts             INTEGER NOT NULL, -- unix milliseconds
	actor          TEXT NOT NULL,
	type           TEXT NOT NULL,
	risk           TEXT NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
	chat_id        TEXT NOT NULL DEFAULT '',
	tool           TEXT NOT NULL DEFAULT '',
	correlation_id TEXT NOT NULL DEFAULT '',
	summary        TEXT NOT NULL DEFAULT '',
	payload        TEXT NOT NULL DEFAULT 'null', -- redacted JSON
	refs           TEXT NOT NULL DEFAULT '[]'    -- redacted JSON array of {kind, id, title}
);
CREATE INDEX events_ts ON events(ts, id);
CREATE INDEX events_chat ON events(chat_id, ts);
CREATE INDEX events_type ON events(type, ts);
CREATE INDEX events_tool ON events(tool, ts);
-- The ledger is append-only; old events may be deleted, never rewritten.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
-- Free text: a trigram index finds any substring of 3+ characters in the
-- summary or payload without scanning the table.
CREATE VIRTUAL TABLE events_fts USING fts5(summary, payload, content='events', content_rowid='id', tokenize='trigram');
CREATE TRIGGER events_fts_insert AFTER INSERT ON events
BEGIN INSERT INTO events_fts(rowid, summary, payload) VALUES (new.id, new.summary, new.payload); END;
CREATE TRIGGER events_fts_delete AFTER DELETE ON events
BEGIN INSERT INTO events_fts(events_fts, rowid, summary, payload) VALUES ('delete', old.id, old.summary, old.payload); END;
`}

// Open opens (creating) the ledger at path, normally STEWARD_HOME/audit.db,
// and starts its writer.
func Open(ctx context.Context, path string, opts Options) (*Ledger, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations, BusyTimeout: opts.BusyTimeout})
	if err != nil {
		return nil, fmt.Errorf("open audit ledger: %w", err)
	}
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	l := &Ledger{db: db, log: opts.Logger}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.w = batchwrite.New(batchwrite.Options[row]{Write: l.write, Window: batchWindow, MaxBatch: maxBatch, QueueSize: size,
		Name: "audit ledger", Noun: "events", Logger: l.log, Closing: func() { l.closing.Store(true) }, BeforeWrite: func() {
			if l.beforeWrite != nil {
				l.beforeWrite()
			}
		}})
	return l, nil
}

// row is a redacted event ready for insertion.
type row struct {
	ts                                                         int64
	actor, typ, risk, chat, tool, corr, summary, payload, refs string
}

// Record redacts e and queues it for storage. It never blocks on the
// database and never fails: a full queue or a closed ledger drops the event,
// logging and counting it.
func (l *Ledger) Record(_ context.Context, e Event) {
	if l == nil {
		return
	}
	defer func() {
		// Redaction walks arbitrary caller data; whatever goes wrong there,
		// the caller's turn carries on without this event.
		if p := recover(); p != nil {
			l.drop("redaction panicked", "") // the panic value may quote the data: not logged
		}
	}()
	l.w.Add(l.prepare(e))
}

// drop counts an event refused before it was queued.
func (l *Ledger) drop(reason, typ string) { l.w.Drop(reason, "type", typ) }

func (l *Ledger) prepare(e Event) row {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	risk := e.Risk
	switch {
	case risk == "":
		risk = RiskLow
	case !risk.Valid():
		// A typo must not hide a risky event behind the low filter.
		l.log.Warn("audit event with unknown risk stored as high", "risk", redact.String(string(risk)), "type", redact.String(e.Type))
		risk = RiskHigh
	}
	refs := make([]Ref, 0, min(len(e.Refs), redact.MaxItems))
	for _, ref := range e.Refs[:min(len(e.Refs), redact.MaxItems)] {
		refs = append(refs, Ref{Kind: redact.String(ref.Kind), ID: redact.String(ref.ID), Title: redact.String(ref.Title)})
	}
	refsJSON, _ := json.Marshal(refs) // strings only: cannot fail
	return row{
		ts:      t.UnixMilli(),
		actor:   orUnknown(redact.String(e.Actor)),
		typ:     orUnknown(redact.String(e.Type)),
		risk:    string(risk),
		chat:    redact.String(e.ChatID),
		tool:    redact.String(e.Tool),
		corr:    redact.String(e.Correlation),
		summary: redact.String(e.Summary),
		payload: encodePayload(e.Payload),
		refs:    string(refsJSON),
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// encodePayload redacts v and encodes it as JSON, without HTML escaping so
// that free-text search sees "<" and "&" as typed.
func encodePayload(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(redact.Value(v)); err != nil {
		// redact.Value returns only JSON types; this is a safety net.
		return `{"[truncated]":"payload could not be encoded"}`
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(out) <= MaxPayloadBytes {
		return string(out)
	}
	note := map[string]any{
		redact.TruncatedKey: fmt.Sprintf("payload of %d bytes exceeds the %d KiB audit limit", len(out), MaxPayloadBytes>>10),
		"preview":           redact.String(string(out)),
	}
	buf.Reset()
	enc.Encode(note) // strings only: cannot fail
	return string(bytes.TrimRight(buf.Bytes(), "\n"))
}

// ErrClosed reports use of a closed ledger.
var ErrClosed = batchwrite.ErrClosed

// Flush waits until every event queued before the call has been written (or
// has failed to be). Unlike Record it waits, so it is for shutdown and tests.
func (l *Ledger) Flush(ctx context.Context) error {
	if l == nil {
		return nil
	}
	return l.w.Flush(ctx)
}

// Close stores what is queued and closes the database. If a write fails
// while closing, the rest of the queue is counted as failed rather than
// retried, so a locked database cannot hold shutdown for long.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	var err error
	l.once.Do(func() {
		l.w.Close()
		err = l.db.Close()
	})
	return err
}

// Stats reports what has happened to recorded events since Open.
func (l *Ledger) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	st := l.w.Stats()
	return Stats{Queued: st.Queued, Written: st.Written, Dropped: st.Dropped, Failed: st.Failed}
}

// batchWindow is how long the writer gathers events into one transaction;
// maxBatch bounds one transaction.
const (
	batchWindow = 20 * time.Millisecond
	maxBatch    = 256
)

// write stores the rows of a batch. They go in as one multi-row INSERT:
// FTS5 flushes its pending index at every statement boundary, so one
// statement per row would cost an index flush per event.
func (l *Ledger) write(batch []row) error {
	var sb strings.Builder
	sb.WriteString(`INSERT INTO events (ts, actor, type, risk, chat_id, tool, correlation_id, summary, payload, refs) VALUES `)
	args := make([]any, 0, 10*len(batch))
	for i, r := range batch {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("(?,?,?,?,?,?,?,?,?,?)")
		args = append(args, r.ts, r.actor, r.typ, r.risk, r.chat, r.tool, r.corr, r.summary, r.payload, r.refs)
	}
	if _, err := l.db.Exec(sb.String(), args...); err != nil {
		return fmt.Errorf("insert %d events: %w", len(batch), err)
	}
	return nil
}
