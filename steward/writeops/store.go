package writeops

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
)

// Defaults (spec: "Confirmation Evidence And Retry Boundaries").
const (
	DefaultMaxConfirmAttempts = 12
	DefaultBatch              = 100
	DefaultStaleStarted       = 60 * time.Second
)

// ErrNotFound reports an operation id the journal does not hold.
var ErrNotFound = errors.New("write operation not found")

// Path returns the journal's file under STEWARD_HOME.
func Path(home string) string { return filepath.Join(home, "write-ops", "ops.db") }

// Auditor receives the redacted lifecycle events; *audit.Ledger is one.
type Auditor interface {
	Record(ctx context.Context, e audit.Event)
}

// Options configures a Store.
type Options struct {
	Logger *slog.Logger
	// Audit receives one event per lifecycle step; nil records none.
	Audit Auditor
	// Actor is the audit actor of this process's events (audit.ActorHost
	// when empty; the scheduler jobs pass audit.ActorScheduler).
	Actor string
	// MaxConfirmAttempts per domain (DefaultMaxConfirmAttempts when absent
	// or zero): WRITE_OP_MAIL_MAX_CONFIRM_ATTEMPTS and
	// WRITE_OP_CALENDAR_MAX_CONFIRM_ATTEMPTS. Contacts use the calendar's.
	MaxConfirmAttempts map[Domain]int
	// StaleStarted is how long a started row must stay unchanged before
	// reconciliation treats its caller as crashed (DefaultStaleStarted).
	StaleStarted time.Duration
	// Now replaces the clock in tests.
	Now func() time.Time
	// BusyTimeout overrides sqlitedb.DefaultBusyTimeout (concurrent send-due
	// processes wait on each other's claims).
	BusyTimeout time.Duration
}

// Store is the journal. Its methods are safe for concurrent use, and several
// processes may open the same file: every state change is one conditional
// UPDATE, so two processes never both move a row out of the same state.
type Store struct {
	db   *sql.DB
	opts Options
	log  *slog.Logger
}

var migrations = []string{`
CREATE TABLE ops (
	id               TEXT PRIMARY KEY,
	kind             TEXT NOT NULL,
	domain           TEXT NOT NULL,
	state            TEXT NOT NULL,
	summary          TEXT NOT NULL DEFAULT '',
	input            TEXT NOT NULL,
	expected         TEXT,
	result           TEXT,
	evidence         TEXT,
	error            TEXT NOT NULL DEFAULT '',
	note             TEXT NOT NULL DEFAULT '',
	attempts         INTEGER NOT NULL DEFAULT 0,
	confirm_attempts INTEGER NOT NULL DEFAULT 0,
	origin           TEXT NOT NULL DEFAULT '',
	tool             TEXT NOT NULL DEFAULT '',
	created_ms       INTEGER NOT NULL,
	updated_ms       INTEGER NOT NULL,
	scheduled_ms     INTEGER NOT NULL DEFAULT 0,
	attempted_ms     INTEGER NOT NULL DEFAULT 0,
	returned_ms      INTEGER NOT NULL DEFAULT 0,
	confirmed_ms     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX ops_due ON ops(scheduled_ms) WHERE state = 'scheduled';
CREATE INDEX ops_open ON ops(domain, updated_ms) WHERE state IN ('started', 'script_returned', 'unknown', 'failed');
CREATE INDEX ops_created ON ops(created_ms);
`}

// Open opens (creating) the journal at path, normally Path(home).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations, BusyTimeout: opts.BusyTimeout})
	if err != nil {
		return nil, fmt.Errorf("open write journal: %w", err)
	}
	// Statement journals in memory: a confirmation pass updates a hundred
	// rows in one transaction, and each UPDATE would otherwise write its
	// statement journal to a temporary file (measured: 5x slower).
	if _, err := db.ExecContext(ctx, "PRAGMA temp_store = MEMORY"); err != nil {
		db.Close()
		return nil, fmt.Errorf("open write journal: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Actor == "" {
		opts.Actor = audit.ActorHost
	}
	if opts.StaleStarted <= 0 {
		opts.StaleStarted = DefaultStaleStarted
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{db: db, opts: opts, log: opts.Logger}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// MaxConfirmAttempts returns the confirmation limit of a domain.
func (s *Store) MaxConfirmAttempts(d Domain) int {
	if d == DomainContacts {
		if n := s.opts.MaxConfirmAttempts[d]; n > 0 {
			return n
		}
		d = DomainCalendar
	}
	if n := s.opts.MaxConfirmAttempts[d]; n > 0 {
		return n
	}
	return DefaultMaxConfirmAttempts
}

func (s *Store) now() time.Time { return s.opts.Now() }

func newID() string {
	var b [10]byte
	rand.Read(b[:])
	return "wop_" + hex.EncodeToString(b[:])
}

func marshal(v any) (sql.NullString, error) {
	if v == nil {
		return sql.NullString{}, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return sql.NullString{}, nil
		}
		return sql.NullString{String: string(raw), Valid: true}, nil
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Message-IDs and addresses stay readable
	if err := enc.Encode(v); err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: strings.TrimSuffix(b.String(), "\n"), Valid: true}, nil
}

func (s *Store) insert(ctx context.Context, n NewOperation, state State, scheduled time.Time) (Operation, error) {
	if n.Kind.Domain() == "" || !strings.Contains(string(n.Kind), ".") {
		return Operation{}, fmt.Errorf("journal write: kind %q is not domain.action", n.Kind)
	}
	input, err := marshal(n.Input)
	if err != nil {
		return Operation{}, fmt.Errorf("journal %s: input: %w", n.Kind, err)
	}
	if !input.Valid {
		return Operation{}, fmt.Errorf("journal %s: the input is missing", n.Kind)
	}
	expected, err := marshal(n.Expected)
	if err != nil {
		return Operation{}, fmt.Errorf("journal %s: expected outcome: %w", n.Kind, err)
	}
	now := s.now().UnixMilli()
	id := newID()
	attempts, attempted := 0, int64(0)
	if state == StateStarted {
		attempts, attempted = 1, now
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO ops(id, kind, domain, state, summary, input, expected, attempts,
		origin, tool, created_ms, updated_ms, scheduled_ms, attempted_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		id, string(n.Kind), string(n.Kind.Domain()), string(state), n.Summary, input, expected, attempts,
		n.Origin, n.Tool, now, now, unixMilli(scheduled), attempted)
	if err != nil {
		return Operation{}, fmt.Errorf("journal %s: %w", n.Kind, err)
	}
	return s.Get(ctx, id)
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Begin records an operation as started (attempts 1, attempted_at now). Call
// it before handing the input to the backend, then Finish with the outcome.
func (s *Store) Begin(ctx context.Context, n NewOperation) (Operation, error) {
	op, err := s.insert(ctx, n, StateStarted, time.Time{})
	if err != nil {
		return op, err
	}
	s.emit(ctx, op, "started", audit.RiskHigh)
	return op, nil
}

// Schedule records an operation to be executed by SendDue at or after at.
func (s *Store) Schedule(ctx context.Context, n NewOperation, at time.Time) (Operation, error) {
	if at.IsZero() {
		return Operation{}, fmt.Errorf("schedule %s: no time given", n.Kind)
	}
	op, err := s.insert(ctx, n, StateScheduled, at)
	if err != nil {
		return op, err
	}
	s.emit(ctx, op, "scheduled", audit.RiskMedium)
	return op, nil
}

// Finish records the backend's immediate outcome of a started operation:
// script_returned when execErr is nil, failed when it is marked NotDone,
// unknown otherwise. If the row has meanwhile left started (a confirmation
// pass found it stale and confirmed it), only the result is stored.
func (s *Store) Finish(ctx context.Context, id string, result any, execErr error) (Operation, error) {
	state, msg, event, risk := StateReturned, "", "returned", audit.RiskMedium
	if execErr != nil {
		msg = execErr.Error()
		state, event, risk = StateUnknown, "unknown", audit.RiskHigh
		if IsNotDone(execErr) {
			state, event = StateFailed, "failed"
		}
	}
	res, err := marshal(result)
	if err != nil {
		return Operation{}, fmt.Errorf("record outcome of %s: result: %w", id, err)
	}
	now := s.now().UnixMilli()
	r, err := s.db.ExecContext(ctx, `UPDATE ops SET state = ?, result = ?, error = ?, returned_ms = ?, updated_ms = ?
		WHERE id = ? AND state = 'started'`, string(state), res, msg, now, now, id)
	if err != nil {
		return Operation{}, fmt.Errorf("record outcome of %s: %w", id, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		if _, err := s.db.ExecContext(ctx, `UPDATE ops SET result = coalesce(result, ?), returned_ms = ? WHERE id = ?`, res, now, id); err != nil {
			return Operation{}, fmt.Errorf("record outcome of %s: %w", id, err)
		}
		return s.Get(ctx, id)
	}
	op, err := s.Get(ctx, id)
	if err != nil {
		return op, err
	}
	s.emit(ctx, op, event, risk)
	return op, nil
}

// Executor performs one write kind's backend call. It returns what the
// backend reported (stored as the operation's result) and an error marked
// with NotDone when the write certainly did not happen.
type Executor interface {
	Execute(ctx context.Context, op Operation) (result any, err error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, op Operation) (any, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, op Operation) (any, error) { return f(ctx, op) }

// Execute journals n, runs it through ex and records the outcome. The
// returned operation is the journal's row after the outcome; the error is
// the backend's (wrapped) or the journal's.
func (s *Store) Execute(ctx context.Context, n NewOperation, ex Executor) (Operation, error) {
	op, err := s.Begin(ctx, n)
	if err != nil {
		return op, err
	}
	return s.run(ctx, op, ex)
}

func (s *Store) run(ctx context.Context, op Operation, ex Executor) (Operation, error) {
	result, execErr := ex.Execute(ctx, op)
	// The outcome is recorded even if the caller's context ended meanwhile.
	done, err := s.Finish(context.WithoutCancel(ctx), op.ID, result, execErr)
	if err != nil {
		return done, err
	}
	if execErr != nil {
		return done, fmt.Errorf("%s %s: %w", op.Kind, op.ID, execErr)
	}
	return done, nil
}

// ClaimDue atomically moves the earliest scheduled row due at now to
// started, incrementing its attempts and setting attempted_at. Only one
// process can claim a row; ok is false when none is due.
func (s *Store) ClaimDue(ctx context.Context, now time.Time) (op Operation, ok bool, err error) {
	ms := now.UnixMilli()
	var id string
	err = s.db.QueryRowContext(ctx, `UPDATE ops SET state = 'started', attempts = attempts + 1, attempted_ms = ?, updated_ms = ?
		WHERE id = (SELECT id FROM ops WHERE state = 'scheduled' AND scheduled_ms <= ? ORDER BY scheduled_ms, id LIMIT 1)
		AND state = 'scheduled' RETURNING id`, s.now().UnixMilli(), s.now().UnixMilli(), ms).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("claim due write: %w", err)
	}
	op, err = s.Get(ctx, id)
	if err != nil {
		return op, false, err
	}
	s.emit(ctx, op, "started", audit.RiskHigh)
	return op, true, nil
}

// DueReport says what one SendDue pass did.
type DueReport struct {
	Claimed  int      `json:"claimed"`
	Returned int      `json:"returned"`
	Failed   int      `json:"failed"`
	Unknown  int      `json:"unknown"`
	IDs      []string `json:"ids"`
}

// SendDue claims and executes due scheduled rows one at a time, up to limit
// (DefaultBatch when <= 0), choosing each kind's executor from executors. A
// claimed row whose kind has no executor is recorded failed.
func (s *Store) SendDue(ctx context.Context, executors map[Kind]Executor, limit int) (DueReport, error) {
	if limit <= 0 {
		limit = DefaultBatch
	}
	var rep DueReport
	for rep.Claimed < limit {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		op, ok, err := s.ClaimDue(ctx, s.now())
		if err != nil {
			return rep, err
		}
		if !ok {
			break
		}
		rep.Claimed++
		rep.IDs = append(rep.IDs, op.ID)
		ex := executors[op.Kind]
		if ex == nil {
			ex = ExecutorFunc(func(context.Context, Operation) (any, error) {
				return nil, NotDone(fmt.Errorf("no executor for %s", op.Kind))
			})
		}
		done, err := s.run(ctx, op, ex)
		switch done.State {
		case StateReturned:
			rep.Returned++
		case StateFailed:
			rep.Failed++
		default:
			rep.Unknown++
		}
		if err != nil && done.ID == "" {
			return rep, err
		}
		if err != nil {
			s.log.Warn("scheduled write did not return cleanly", "id", op.ID, "kind", op.Kind, "state", done.State, "err", err)
		}
	}
	return rep, nil
}

// Cancel removes a scheduled row that has not been claimed. It reports
// ErrNotFound if the row is not (or no longer) scheduled.
func (s *Store) Cancel(ctx context.Context, id string) error {
	r, err := s.db.ExecContext(ctx, `DELETE FROM ops WHERE id = ? AND state = 'scheduled'`, id)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", id, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("cancel %s: %w (only a scheduled send that has not started can be cancelled)", id, ErrNotFound)
	}
	s.record(ctx, audit.Event{Type: "writeop.cancelled", Risk: audit.RiskMedium, Correlation: id, Summary: "scheduled write cancelled"})
	return nil
}

func (s *Store) record(ctx context.Context, e audit.Event) {
	if s.opts.Audit == nil {
		return
	}
	e.Actor = s.opts.Actor
	s.opts.Audit.Record(ctx, e)
}

const cols = `id, kind, state, summary, input, expected, result, evidence, error, note, attempts, confirm_attempts,
	origin, tool, created_ms, updated_ms, scheduled_ms, attempted_ms, returned_ms, confirmed_ms`

func scan(row interface{ Scan(...any) error }) (Operation, error) {
	var op Operation
	var input string
	var expected, result, evidence sql.NullString
	var created, updated, scheduled, attempted, returned, confirmed int64
	if err := row.Scan(&op.ID, &op.Kind, &op.State, &op.Summary, &input, &expected, &result, &evidence, &op.Error, &op.Note,
		&op.Attempts, &op.ConfirmAttempts, &op.Origin, &op.Tool, &created, &updated, &scheduled, &attempted,
		&returned, &confirmed); err != nil {
		return op, err
	}
	op.Input = json.RawMessage(input)
	if expected.Valid {
		op.Expected = json.RawMessage(expected.String)
	}
	if result.Valid {
		op.Result = json.RawMessage(result.String)
	}
	if evidence.Valid {
		op.Evidence = json.RawMessage(evidence.String)
	}
	op.CreatedAt, op.UpdatedAt = fromMilli(created), fromMilli(updated)
	op.ScheduledFor, op.AttemptedAt = fromMilli(scheduled), fromMilli(attempted)
	op.ReturnedAt, op.ConfirmedAt = fromMilli(returned), fromMilli(confirmed)
	return op, nil
}

func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, id string) (Operation, error) {
	op, err := scan(s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM ops WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return op, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return op, fmt.Errorf("read write operation %s: %w", id, err)
	}
	return op, nil
}

// Filter selects operations for List.
type Filter struct {
	Domain Domain  // empty: all
	States []State // empty: all
	Limit  int     // DefaultBatch when <= 0, at most 1000
}

// List returns operations newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Operation, error) {
	q := `SELECT ` + cols + ` FROM ops WHERE 1=1`
	var args []any
	if f.Domain != "" {
		q += ` AND domain = ?`
		args = append(args, string(f.Domain))
	}
	if len(f.States) > 0 {
		q += ` AND state IN (` + strings.TrimSuffix(strings.Repeat("?,", len(f.States)), ",") + `)`
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultBatch
	}
	q += ` ORDER BY created_ms DESC, id LIMIT ?`
	args = append(args, min(limit, 1000))
	return s.query(ctx, q, args...)
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]Operation, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list write operations: %w", err)
	}
	defer rows.Close()
	var out []Operation
	for rows.Next() {
		op, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list write operations: %w", err)
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

// Eligible returns up to limit (DefaultBatch when <= 0) operations of a
// domain that a confirmation pass should check: script_returned, unknown and
// failed rows, and started rows unchanged for StaleStarted. The least
// recently checked come first, so a pass cycles through a long backlog.
func (s *Store) Eligible(ctx context.Context, d Domain, limit int) ([]Operation, error) {
	if limit <= 0 {
		limit = DefaultBatch
	}
	stale := s.now().Add(-s.opts.StaleStarted).UnixMilli()
	// The state list repeats the partial index ops_open's, so the pass walks
	// that index in updated_ms order instead of scanning the journal.
	return s.query(ctx, `SELECT `+cols+` FROM ops WHERE domain = ? AND state IN ('started', 'script_returned', 'unknown', 'failed')
		AND (state <> 'started' OR updated_ms <= ?) ORDER BY updated_ms LIMIT ?`, string(d), stale, limit)
}

// Check is a Confirmer's finding.
type Check struct {
	// Confirmed is true when the expected effect was observed.
	Confirmed bool
	// Evidence is stored on the row (what matched, or what was looked at).
	Evidence any
	// Note explains a miss ("no Sent message with this subject", "2
	// matches: ambiguous").
	Note string
	// Exhaust ends confirmation now (a failed create without usable
	// identity): the row goes to its domain's terminal unconfirmed state.
	Exhaust bool
}

// Confirmer looks for evidence of one write kind.
type Confirmer interface {
	Confirm(ctx context.Context, op Operation) (Check, error)
}

// ConfirmerFunc adapts a function to Confirmer.
type ConfirmerFunc func(ctx context.Context, op Operation) (Check, error)

// Confirm calls f.
func (f ConfirmerFunc) Confirm(ctx context.Context, op Operation) (Check, error) { return f(ctx, op) }

// Confirm records evidence that op happened: the row becomes confirmed
// unless it already left the open states.
func (s *Store) Confirm(ctx context.Context, id string, evidence any) (Operation, error) {
	return s.settleOne(ctx, id, Check{Confirmed: true, Evidence: evidence})
}

// Miss records a confirmation attempt that found no (or ambiguous) evidence.
// At the domain's limit, or when exhaust is set, the row becomes
// needs_review (mail) or retry_exhausted (calendar, contacts).
func (s *Store) Miss(ctx context.Context, id string, note string, evidence any, exhaust bool) (Operation, error) {
	return s.settleOne(ctx, id, Check{Note: note, Evidence: evidence, Exhaust: exhaust})
}

func (s *Store) settleOne(ctx context.Context, id string, c Check) (Operation, error) {
	op, err := s.Get(ctx, id)
	if err != nil {
		return op, err
	}
	st, err := s.settle(ctx, func(ctx context.Context, args ...any) (sql.Result, error) {
		return s.db.ExecContext(ctx, settleSQL, args...)
	}, op, c)
	if err != nil {
		return op, err
	}
	if st.event != "" {
		s.emit(ctx, st.op, st.event, st.risk)
	}
	return st.op, nil
}

// settleSQL records one confirmation attempt, if the row is unchanged.
const settleSQL = `UPDATE ops SET state = ?, confirm_attempts = ?, evidence = ?, note = ?, error = ?,
	confirmed_ms = ?, updated_ms = ? WHERE id = ? AND state = ? AND confirm_attempts = ?`

// settled is a row after a confirmation attempt, with the audit step to
// emit ("" when the row had meanwhile changed and nothing was written).
type settled struct {
	op    Operation
	event string
	risk  audit.Risk
}

// settle writes one confirmation attempt's outcome on op, as read, through
// q. The UPDATE is conditional on the row being unchanged since it was read.
func (s *Store) settle(ctx context.Context, exec func(ctx context.Context, args ...any) (sql.Result, error), op Operation, c Check) (settled, error) {
	if op.State.Terminal() || op.State == StateScheduled {
		return settled{op: op}, nil
	}
	ev, err := marshal(c.Evidence)
	if err != nil {
		return settled{op: op}, fmt.Errorf("record confirmation of %s: evidence: %w", op.ID, err)
	}
	now := s.now()
	next := op
	next.UpdatedAt = now.UTC().Truncate(time.Millisecond)
	next.Evidence = json.RawMessage(ev.String)
	out := settled{event: "confirmed", risk: audit.RiskLow}
	if c.Confirmed {
		next.State, next.ConfirmedAt = StateConfirmed, next.UpdatedAt
	} else {
		next.ConfirmAttempts++
		next.Note = c.Note
		out.event = "retried"
		if op.State == StateStarted {
			// Only stale started rows are checked: their caller stopped before
			// recording the backend's answer, so the outcome is unknown.
			next.State, next.Error = StateUnknown, "the process executing it stopped before recording the outcome"
		}
		if c.Exhaust || next.ConfirmAttempts >= s.MaxConfirmAttempts(op.Kind.Domain()) {
			next.State, out.event, out.risk = StateRetryExhausted, "retry_exhausted", audit.RiskHigh
			if op.Kind.Domain() == DomainMail {
				next.State, out.event = StateNeedsReview, "needs_review"
			}
		}
	}
	r, err := exec(ctx, string(next.State), next.ConfirmAttempts, ev, next.Note, next.Error, unixMilli(next.ConfirmedAt), now.UnixMilli(),
		op.ID, string(op.State), op.ConfirmAttempts)
	if err != nil {
		return settled{op: op}, fmt.Errorf("record confirmation of %s: %w", op.ID, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return settled{op: op}, nil // another pass got there first
	}
	out.op = next
	return out, nil
}

// PassReport says what one reconciliation pass did.
type PassReport struct {
	Domain    Domain   `json:"domain"`
	Checked   int      `json:"checked"`
	Confirmed int      `json:"confirmed"`
	Missed    int      `json:"missed"`
	Terminal  int      `json:"terminal"` // moved to needs_review / retry_exhausted
	Errors    int      `json:"errors"`   // confirmer errors (each counts as an attempt)
	IDs       []string `json:"confirmedIds,omitempty"`
}

// Reconcile runs one confirmation pass over a domain's eligible rows (up to
// limit, DefaultBatch when <= 0), asking each kind's confirmer, and records
// the outcomes in one transaction. It never executes anything. A row whose
// kind has no confirmer is left alone.
func (s *Store) Reconcile(ctx context.Context, d Domain, confirmers map[Kind]Confirmer, limit int) (PassReport, error) {
	rep := PassReport{Domain: d}
	ops, err := s.Eligible(ctx, d, limit)
	if err != nil {
		return rep, err
	}
	type finding struct {
		op    Operation
		check Check
	}
	var found []finding
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c := confirmers[op.Kind]
		if c == nil {
			continue
		}
		rep.Checked++
		check, cerr := c.Confirm(ctx, op)
		if cerr != nil {
			rep.Errors++
			check = Check{Note: "confirmation check failed: " + cerr.Error()}
		}
		found = append(found, finding{op, check})
	}
	if len(found) == 0 {
		return rep, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return rep, fmt.Errorf("record confirmation pass: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, settleSQL)
	if err != nil {
		return rep, fmt.Errorf("record confirmation pass: %w", err)
	}
	defer stmt.Close()
	var done []settled
	for _, f := range found {
		st, err := s.settle(ctx, stmt.ExecContext, f.op, f.check)
		if err != nil {
			return rep, err
		}
		if st.event != "" {
			done = append(done, st)
		}
	}
	if err := tx.Commit(); err != nil {
		return rep, fmt.Errorf("record confirmation pass: %w", err)
	}
	for _, st := range done {
		s.emit(ctx, st.op, st.event, st.risk)
		switch {
		case st.op.State == StateConfirmed:
			rep.Confirmed++
			rep.IDs = append(rep.IDs, st.op.ID)
		case st.op.State.Terminal():
			rep.Missed++
			rep.Terminal++
		default:
			rep.Missed++
		}
	}
	return rep, nil
}

// Stats counts operations by state.
func (s *Store) Stats(ctx context.Context) (map[State]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT state, count(*) FROM ops GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count write operations: %w", err)
	}
	defer rows.Close()
	out := map[State]int{}
	for rows.Next() {
		var st State
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// emit records the audit copy of a lifecycle step. The ledger redacts the
// payload (bodies become snippets, secret-like keys are masked).
func (s *Store) emit(ctx context.Context, op Operation, step string, risk audit.Risk) {
	payload := map[string]any{
		"operationId":     op.ID,
		"kind":            op.Kind,
		"state":           op.State,
		"attempts":        op.Attempts,
		"confirmAttempts": op.ConfirmAttempts,
		"input":           op.Input,
	}
	if op.Error != "" {
		payload["error"] = op.Error
	}
	if !op.ScheduledFor.IsZero() {
		payload["scheduledFor"] = op.ScheduledFor
	}
	s.record(ctx, audit.Event{Type: "writeop." + step, Risk: risk, ChatID: chatOf(op.Origin), Tool: op.Tool,
		Correlation: op.ID, Summary: string(op.Kind) + " " + step + ": " + op.Summary, Payload: payload})
}

// chatOf returns the chat id of an origin written as "chat:<id>".
func chatOf(origin string) string {
	id, ok := strings.CutPrefix(origin, "chat:")
	if !ok {
		return ""
	}
	return id
}
