// Package sqlitedb opens every SQLite store of both products the same way: WAL
// journaling, a busy timeout, foreign keys, schema migrations keyed by
// PRAGMA user_version, and read-only connections for search workers.
//
// Every connection has FTS5 (including tokenize='trigram') and the sqlite-vec
// vec0 module available, because the mail, calendar, contacts and document
// indexes depend on both.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
	_ "modernc.org/sqlite/vec" // installs sqlite-vec (vec0) on every connection
)

// DefaultBusyTimeout is how long a connection waits for another writer before
// it reports SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Options says how to open a store.
type Options struct {
	// Migrations are applied in order inside one immediate transaction each:
	// Migrations[i] moves the schema from user_version i to i+1. A store whose
	// user_version is higher than len(Migrations) was written by a newer binary
	// and is refused rather than guessed at.
	Migrations []string

	// ReadOnly opens an existing store with query_only set on every
	// connection. No migration runs; a missing file is an error.
	ReadOnly bool

	// BusyTimeout overrides DefaultBusyTimeout.
	BusyTimeout time.Duration

	// MmapSize, when positive, memory-maps up to that many bytes of the file
	// on every connection (PRAGMA mmap_size), so reads of a warm index copy
	// from the mapping instead of going through read(2) and the page cache.
	MmapSize int64

	// CacheKiB, when positive, sizes each connection's page cache (PRAGMA
	// cache_size) instead of SQLite's 2 MiB default.
	CacheKiB int

	// MemoryTempStore keeps temporary files, statement journals included,
	// in memory (PRAGMA temp_store = MEMORY): a statement that fires a
	// trigger otherwise writes every page it first touches to a sub-journal
	// file, one write(2) per page.
	MemoryTempStore bool

	// MaxOpenConns limits the pool. Zero keeps database/sql's default for
	// read-only stores and uses 1 for writable ones, because SQLite has a
	// single writer and one connection avoids SQLITE_BUSY between our own
	// goroutines.
	MaxOpenConns int
}

// SearchTuning returns o with the settings search readers use: a 2 GiB
// memory map and a 64 MiB page cache per connection.
func (o Options) SearchTuning() Options {
	o.MmapSize, o.CacheKiB = 2<<30, 64<<10
	return o
}

// TuningPragmas lists o's tuning as SQL statements, to open the same file the
// same way through another driver (the benchmarks' C SQLite baseline).
func (o Options) TuningPragmas() []string {
	var out []string
	for _, p := range o.tuning() {
		out = append(out, fmt.Sprintf("PRAGMA %s = %s", p[0], p[1]))
	}
	return out
}

func (o Options) tuning() [][2]string {
	var out [][2]string
	if o.MmapSize > 0 {
		out = append(out, [2]string{"mmap_size", fmt.Sprint(o.MmapSize)})
	}
	if o.CacheKiB > 0 {
		out = append(out, [2]string{"cache_size", fmt.Sprint(-o.CacheKiB)})
	}
	if o.MemoryTempStore {
		out = append(out, [2]string{"temp_store", "2"})
	}
	return out
}

// ErrNewerSchema reports a store written by a newer version of the program.
var ErrNewerSchema = errors.New("database schema is newer than this program")

// Open opens (creating if needed, unless read-only) the SQLite file at path
// and brings its schema up to date. The parent directory is created with mode
// 0700 because every store holds personal data.
func Open(ctx context.Context, path string, opts Options) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open sqlite store %s read-only: %w", path, err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create directory for sqlite store %s: %w", path, err)
		}
		// Create the file ourselves so that it is private: SQLite gives its
		// -wal and -shm files the database file's permissions.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create sqlite store %s: %w", path, err)
		}
		f.Close()
	}
	db, err := sql.Open("sqlite", dsn(path, opts))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	switch {
	case opts.MaxOpenConns > 0:
		db.SetMaxOpenConns(opts.MaxOpenConns)
	case !opts.ReadOnly:
		db.SetMaxOpenConns(1)
	}
	if err := connect(ctx, db, busyTimeout(opts)); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if !opts.ReadOnly {
		if err := migrate(ctx, db, opts.Migrations, busyTimeout(opts)); err != nil {
			db.Close()
			return nil, fmt.Errorf("migrate sqlite store %s: %w", path, err)
		}
	}
	return db, nil
}

func busyTimeout(opts Options) time.Duration {
	if opts.BusyTimeout > 0 {
		return opts.BusyTimeout
	}
	return DefaultBusyTimeout
}

// connect opens the pool's first connection. On a new file its
// journal_mode(WAL) pragma rewrites the header while holding the read lock it
// took to look at it, and SQLite answers that read-to-write upgrade with an
// immediate SQLITE_BUSY instead of calling the busy handler (waiting could
// deadlock two upgraders). So when another opener converts the file at the
// same moment, connect waits and retries itself, for up to the busy timeout;
// once the file is in WAL mode the pragma no longer writes and cannot fail so.
func connect(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func dsn(path string, opts Options) string {
	busy := busyTimeout(opts)
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if opts.ReadOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	for _, p := range opts.tuning() {
		q.Add("_pragma", p[0]+"("+p[1]+")")
	}
	q.Add("_txlock", "immediate")
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: path}).EscapedPath(), RawQuery: q.Encode()}
	return u.String()
}

// migrate applies the pending migrations, each in its own immediate
// transaction so that two processes opening the same store never both apply
// the same step. A store already up to date is recognised by a plain read,
// which in WAL mode never waits for a writer: many openers of a current store
// then do not queue for the write lock one after another.
//
// An opener that waited out its busy timeout for the write lock reads the
// version again: the holder was most likely another opener migrating this
// very store, and once it is current there is nothing left to do. Otherwise
// it queues again, for up to four busy timeouts in all, so that a crowd of
// first openers (every scheduler child and connector at once on a loaded
// machine) is served rather than refused.
func migrate(ctx context.Context, db *sql.DB, migrations []string, timeout time.Duration) error {
	v, err := Version(ctx, db)
	if err != nil {
		return err
	}
	if v == len(migrations) {
		return nil
	}
	deadline := time.Now().Add(4 * timeout)
	for {
		done, err := migrateStep(ctx, db, migrations)
		if err != nil && isBusy(err) {
			if v, verr := Version(ctx, db); verr == nil && v == len(migrations) {
				return nil
			}
			if time.Now().Before(deadline) && ctx.Err() == nil {
				continue
			}
		}
		if err != nil || done {
			return err
		}
	}
}

func migrateStep(ctx context.Context, db *sql.DB, migrations []string) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("read user_version: %w", err)
	}
	switch {
	case version > len(migrations):
		return false, fmt.Errorf("%w: store is at version %d, this program knows %d", ErrNewerSchema, version, len(migrations))
	case version == len(migrations):
		return true, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("apply migration %d: %w", version+1, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
		return false, fmt.Errorf("set user_version %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit migration %d: %w", version+1, err)
	}
	return false, nil
}

// Version reports the schema version (PRAGMA user_version) of an open store.
func Version(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read user_version: %w", err)
	}
	return v, nil
}
