package wiki

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// QueueFileName is the ingest queue's file in the index directory.
const QueueFileName = "queue.sqlitedb"

// MaxRetries is how many times a failed ingest is retried automatically
// before it is marked failed.
const MaxRetries = 3

// Task states.
const (
	TaskQueued    = "queued"
	TaskRunning   = "running"
	TaskDone      = "done"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

var queueMigrations = []string{`
CREATE TABLE tasks (
	id INTEGER PRIMARY KEY,
	source TEXT NOT NULL,        -- vault path under raw/sources
	context TEXT NOT NULL DEFAULT '', -- folder the source was imported from
	status TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	error TEXT NOT NULL DEFAULT '',
	progress TEXT NOT NULL DEFAULT '',
	pages TEXT NOT NULL DEFAULT '',
	owner TEXT NOT NULL DEFAULT '',
	not_before INTEGER NOT NULL DEFAULT 0,
	created INTEGER NOT NULL,
	updated INTEGER NOT NULL
);
CREATE INDEX tasks_status ON tasks(status, id);
CREATE TABLE ingested (
	source TEXT PRIMARY KEY,
	sha256 TEXT NOT NULL,
	pages TEXT NOT NULL,        -- JSON list of page paths written from it
	at INTEGER NOT NULL
);
`}

// Task is one ingest of a source.
type Task struct {
	ID       int64     `json:"id"`
	Source   string    `json:"source"`
	Context  string    `json:"context,omitempty"`
	Status   string    `json:"status"`
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"`
	Progress string    `json:"progress,omitempty"`
	Pages    []string  `json:"pages,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// QueueCounts counts tasks by state.
type QueueCounts struct {
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Queue is the persistent ingest queue: serial, surviving restarts.
type Queue struct {
	db    *sql.DB
	owner string // this process and queue instance
	// Notify receives a value (without blocking) whenever tasks change.
	notify chan struct{}
}

// OpenQueue opens the queue at path. Tasks left running by a process that
// no longer exists (a crash) are queued again.
func OpenQueue(ctx context.Context, path string) (*Queue, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: queueMigrations})
	if err != nil {
		return nil, fmt.Errorf("open wiki ingest queue: %w", err)
	}
	nonce := make([]byte, 6)
	rand.Read(nonce)
	q := &Queue{db: db, owner: strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(nonce), notify: make(chan struct{}, 1)}
	if err := q.recover(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// Close closes the queue.
func (q *Queue) Close() error { return q.db.Close() }

// Changes returns a channel that receives a value when tasks change.
func (q *Queue) Changes() <-chan struct{} { return q.notify }

func (q *Queue) changed() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// ownerAlive reports whether the process named in owner still runs.
func (q *Queue) ownerAlive(owner string) bool {
	if owner == q.owner {
		return true
	}
	pid, err := strconv.Atoi(strings.SplitN(owner, ":", 2)[0])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false // another queue instance of this process is gone
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (q *Queue) recover(ctx context.Context) error {
	rows, err := q.db.QueryContext(ctx, "SELECT id, owner FROM tasks WHERE status = ?", TaskRunning)
	if err != nil {
		return fmt.Errorf("read ingest queue: %w", err)
	}
	var stale []int64
	for rows.Next() {
		var id int64
		var owner string
		if err := rows.Scan(&id, &owner); err != nil {
			rows.Close()
			return err
		}
		if !q.ownerAlive(owner) {
			stale = append(stale, id)
		}
	}
	rows.Close()
	for _, id := range stale {
		if _, err := q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, owner = '', progress = 'resumed after restart', updated = ? WHERE id = ? AND status = ?",
			TaskQueued, time.Now().UnixMilli(), id, TaskRunning); err != nil {
			return fmt.Errorf("requeue interrupted ingest %d: %w", id, err)
		}
	}
	return nil
}

const taskCols = "id, source, context, status, attempts, error, progress, pages, created, updated"

func scanTask(sc interface{ Scan(...any) error }) (*Task, error) {
	var t Task
	var pages string
	var created, updated int64
	if err := sc.Scan(&t.ID, &t.Source, &t.Context, &t.Status, &t.Attempts, &t.Error, &t.Progress, &pages, &created, &updated); err != nil {
		return nil, err
	}
	if pages != "" {
		t.Pages = strings.Split(pages, "\n")
	}
	t.Created, t.Updated = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &t, nil
}

// Enqueue queues an ingest of source (a vault path). A source already
// queued or running is not queued twice; its task is returned.
func (q *Queue) Enqueue(ctx context.Context, source, folderContext string) (*Task, error) {
	row := q.db.QueryRowContext(ctx, "SELECT "+taskCols+" FROM tasks WHERE source = ? AND status IN (?, ?) ORDER BY id LIMIT 1", source, TaskQueued, TaskRunning)
	if t, err := scanTask(row); err == nil {
		return t, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("enqueue %s: %w", source, err)
	}
	now := time.Now().UnixMilli()
	row = q.db.QueryRowContext(ctx, "INSERT INTO tasks(source, context, status, created, updated) VALUES (?, ?, ?, ?, ?) RETURNING "+taskCols,
		source, folderContext, TaskQueued, now, now)
	t, err := scanTask(row)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", source, err)
	}
	q.changed()
	return t, nil
}

// Get returns task id.
func (q *Queue) Get(ctx context.Context, id int64) (*Task, error) {
	t, err := scanTask(q.db.QueryRowContext(ctx, "SELECT "+taskCols+" FROM tasks WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ingest task %d does not exist", id)
	}
	return t, err
}

// List returns the latest tasks, newest first.
func (q *Queue) List(ctx context.Context, limit int) ([]*Task, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.db.QueryContext(ctx, "SELECT "+taskCols+" FROM tasks ORDER BY id DESC LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("list ingest queue: %w", err)
	}
	defer rows.Close()
	out := []*Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Counts counts tasks by state.
func (q *Queue) Counts(ctx context.Context) (QueueCounts, error) {
	var c QueueCounts
	rows, err := q.db.QueryContext(ctx, "SELECT status, count(*) FROM tasks GROUP BY status")
	if err != nil {
		return c, fmt.Errorf("count ingest queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return c, err
		}
		switch s {
		case TaskQueued:
			c.Queued = n
		case TaskRunning:
			c.Running = n
		case TaskDone:
			c.Done = n
		case TaskFailed:
			c.Failed = n
		case TaskCancelled:
			c.Cancelled = n
		}
	}
	return c, rows.Err()
}

// Cancel cancels a queued task (a running one stops before it writes).
func (q *Queue) Cancel(ctx context.Context, id int64) error {
	res, err := q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, updated = ? WHERE id = ? AND status IN (?, ?)",
		TaskCancelled, time.Now().UnixMilli(), id, TaskQueued, TaskRunning)
	if err != nil {
		return fmt.Errorf("cancel ingest %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("ingest task %d is not queued or running", id)
	}
	q.changed()
	return nil
}

// Retry queues a failed or cancelled task again with fresh attempts.
func (q *Queue) Retry(ctx context.Context, id int64) error {
	res, err := q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, attempts = 0, error = '', not_before = 0, updated = ? WHERE id = ? AND status IN (?, ?)",
		TaskQueued, time.Now().UnixMilli(), id, TaskFailed, TaskCancelled)
	if err != nil {
		return fmt.Errorf("retry ingest %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("ingest task %d is not failed or cancelled", id)
	}
	q.changed()
	return nil
}

// claim marks the next due task running for this queue, unless a task is
// already running (the queue is serial across processes).
func (q *Queue) claim(ctx context.Context) (*Task, error) {
	now := time.Now().UnixMilli()
	t, err := scanTask(q.db.QueryRowContext(ctx, `UPDATE tasks SET status = ?, owner = ?, updated = ?
		WHERE id = (SELECT id FROM tasks WHERE status = ? AND not_before <= ? ORDER BY id LIMIT 1)
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE status = ?)
		RETURNING `+taskCols, TaskRunning, q.owner, now, TaskQueued, now, TaskRunning))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim ingest task: %w", err)
	}
	return t, nil
}

// status returns a task's current state (a cancel may have arrived).
func (q *Queue) status(ctx context.Context, id int64) string {
	var s string
	q.db.QueryRowContext(ctx, "SELECT status FROM tasks WHERE id = ?", id).Scan(&s)
	return s
}

func (q *Queue) progress(ctx context.Context, id int64, msg string) {
	q.db.ExecContext(ctx, "UPDATE tasks SET progress = ?, updated = ? WHERE id = ?", msg, time.Now().UnixMilli(), id)
	q.changed()
}

// finish records the outcome of a claimed task: done, or an error that is
// retried after a back-off until MaxRetries retries have failed.
func (q *Queue) finish(ctx context.Context, t *Task, pages []string, runErr error, backoff time.Duration) error {
	now := time.Now()
	var err error
	switch {
	case runErr == nil:
		_, err = q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, error = '', progress = 'done', pages = ?, owner = '', updated = ? WHERE id = ? AND status = ?",
			TaskDone, strings.Join(pages, "\n"), now.UnixMilli(), t.ID, TaskRunning)
	case t.Attempts+1 > MaxRetries:
		_, err = q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, attempts = attempts + 1, error = ?, owner = '', updated = ? WHERE id = ? AND status = ?",
			TaskFailed, runErr.Error(), now.UnixMilli(), t.ID, TaskRunning)
	default:
		_, err = q.db.ExecContext(ctx, "UPDATE tasks SET status = ?, attempts = attempts + 1, error = ?, progress = 'deferred, will retry', owner = '', not_before = ?, updated = ? WHERE id = ? AND status = ?",
			TaskQueued, runErr.Error(), now.Add(backoff).UnixMilli(), now.UnixMilli(), t.ID, TaskRunning)
	}
	q.changed()
	if err != nil {
		return fmt.Errorf("record ingest %d: %w", t.ID, err)
	}
	return nil
}

// ingested returns the hash and pages of the last successful ingest of source.
func (q *Queue) ingested(ctx context.Context, source string) (sha string, pages []string, err error) {
	var p string
	err = q.db.QueryRowContext(ctx, "SELECT sha256, pages FROM ingested WHERE source = ?", source).Scan(&sha, &p)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, nil
	}
	if p != "" {
		pages = strings.Split(p, "\n")
	}
	return sha, pages, err
}

func (q *Queue) recordIngested(ctx context.Context, source, sha string, pages []string) error {
	_, err := q.db.ExecContext(ctx, `INSERT INTO ingested(source, sha256, pages, at) VALUES (?, ?, ?, ?)
		ON CONFLICT(source) DO UPDATE SET sha256 = excluded.sha256, pages = excluded.pages, at = excluded.at`,
		source, sha, strings.Join(pages, "\n"), time.Now().UnixMilli())
	return err
}
