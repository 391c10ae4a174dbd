package actions

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// reminderCols is how many values reminderInsertSQL binds per row.
const reminderCols = 10

// restoreChecksSQL turns the connection's CHECK constraints back on after
// insertReminders: a variable so that a test can make restoring fail.
var restoreChecksSQL = `PRAGMA ignore_check_constraints = OFF`

// reminderInsertSQL inserts n new calendar reminders. Their kind, status
// and empty payload columns are constants of the statement: a 10,000-reminder pass binds 100,000 values
// instead of 140,000. (Plain ? placeholders: the driver looks every
// parameter's name up, which for numbered ones is a linear search.)
func reminderInsertSQL(n int) string {
	const row = `(?,'` + KindEventReminder + `',?,?,?,?,'new',?,?,?,?,?)`
	return `INSERT OR ROLLBACK INTO items(source_key, kind, title, summary, priority, due_at, status, created_at, updated_at,
		source_at, source_hash, reminder_event) VALUES ` + strings.Repeat(row+",", n-1) + row
}

// insertReminders writes new compact reminders (rawReminder holds for
// each, keys sorted) through conn, inside the transaction open on it,
// insertChunk rows a statement. It binds through the driver's own statement with one argument
// slice reused for every chunk: database/sql copies and converts all 640
// arguments of every statement (4 MB a 10,000-reminder pass), and the
// per-row []any of the generic path is not built at all.
func insertReminders(ctx context.Context, conn *sql.Conn, its []*Item, now time.Time) error {
	if len(its) == 0 {
		return nil
	}
	err := conn.Raw(func(dc any) (err error) {
		prep, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		args := make([]driver.NamedValue, reminderCols*min(len(its), insertChunk))
		for i := range args {
			args[i].Ordinal = i + 1
		}
		// Constant per pass: boxed once (a boxed int64 is an allocation).
		var nowMs driver.Value = now.UnixMilli()
		arena := make([]byte, 0, 64*insertChunk) // the chunk's encoded events
		var full driver.Stmt
		defer func() {
			if full != nil {
				full.Close()
			}
		}()
		// The rows' one CHECK (status IN (…)) holds by construction, their
		// status being the statement's constant 'new'; evaluated, it builds
		// a temporary b-tree of the four statuses for every row (a CHECK's
		// IN list is not coded once per statement), about a fifth of a
		// creating pass. The flag is the connection's, so it is restored
		// before the connection goes back, whatever happened: with a
		// cancelled context too. A connection that cannot restore it fails
		// the batch with errChecksOff, and UpsertBatch discards it once
		// the transaction is rolled back (not here: database/sql would wait
		// for that transaction to end before closing the connection).
		if err := execOnce(ctx, prep, `PRAGMA ignore_check_constraints = ON`, nil); err != nil {
			return err
		}
		defer func() {
			if rerr := execOnce(context.WithoutCancel(ctx), prep, restoreChecksSQL, nil); rerr != nil {
				err = fmt.Errorf("%w: %v", errChecksOff, rerr)
			}
		}()
		for len(its) > 0 {
			chunk := its[:min(len(its), insertChunk)]
			its = its[len(chunk):]
			arena = arena[:0]
			for r, it := range chunk {
				n := len(arena)
				arena = appendReminderEvent(arena, it.SourceKey, it.reminder)
				v := args[r*reminderCols : (r+1)*reminderCols]
				v[0].Value, v[1].Value, v[2].Value, v[3].Value = it.SourceKey, it.Title, it.Summary, boxedPriority(it.Priority)
				v[4].Value, v[5].Value, v[6].Value = it.DueAt.UnixMilli(), nowMs, nowMs
				v[7].Value, v[8].Value, v[9].Value = it.SourceAt.UnixMilli(), sourceHash(it), arena[n:len(arena):len(arena)]
			}
			// The driver copies every text and blob into SQLite's memory
			// when it binds them, so the arena is free again afterwards.
			v := args[:reminderCols*len(chunk)]
			if len(chunk) < insertChunk { // the last rows: a statement of their own
				if err := execOnce(ctx, prep, reminderInsertSQL(len(chunk)), v); err != nil {
					return err
				}
				continue
			}
			if full == nil {
				var err error
				if full, err = prep.PrepareContext(ctx, reminderInsertSQL(insertChunk)); err != nil {
					return err
				}
			}
			if err := execStmt(ctx, full, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store actions: %w", err)
	}
	return nil
}

// errChecksOff is a connection whose CHECK constraints insertReminders
// could not turn back on: it must not go back to the pool.
var errChecksOff = errors.New("restore CHECK constraints")

// discardConn closes conn's driver connection instead of returning it to
// the pool. No transaction may be open on conn: closing waits for it.
func discardConn(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
}

// execOnce prepares query, runs it with args and closes it.
func execOnce(ctx context.Context, prep driver.ConnPrepareContext, query string, args []driver.NamedValue) error {
	st, err := prep.PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer st.Close()
	return execStmt(ctx, st, args)
}

// execStmt runs st with args.
func execStmt(ctx context.Context, st driver.Stmt, args []driver.NamedValue) error {
	exec, ok := st.(driver.StmtExecContext)
	if !ok {
		return fmt.Errorf("driver statement %T cannot execute with a context", st)
	}
	_, err := exec.ExecContext(ctx, args)
	return err
}

// boxedPriority returns p as a driver value, without allocating for the
// three known priorities (a constant's interface value is static data).
func boxedPriority(p string) driver.Value {
	switch p {
	case PriorityHigh:
		return PriorityHigh
	case PriorityNormal:
		return PriorityNormal
	case PriorityLow:
		return PriorityLow
	}
	return p
}

// rawReminder reports whether it is a new compact reminder that
// insertReminders can write (any other item takes insertArgs).
func rawReminder(it *Item) bool {
	return compactReminder(it) && it.Kind == KindEventReminder && it.SourceKey != "" && it.Title != "" && it.Priority != "" && len(it.Diagnostics) == 0
}
