//go:build csqlite

package csqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"slices"
	"sync"

	vec "github.com/asg017/sqlite-vec-go-bindings/cgo"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// Built says whether this binary carries the C engine.
const Built = true

// readOnlyPragmas match what sqlitedb.Open sets on a read-only connection.
var readOnlyPragmas = []string{
	"PRAGMA busy_timeout = 5000",
	"PRAGMA foreign_keys = 1",
	"PRAGMA query_only = 1",
}

// loadVec makes sqlite-vec (vec0) part of every later C connection, as
// modernc.org/sqlite/vec does for the pure-Go engine.
var loadVec = sync.OnceFunc(vec.Auto)

// Open opens the existing store at path read-only through C SQLite, with
// FTS5 and sqlite-vec, on a single connection that also runs the tuning
// pragmas (sqlitedb.Options.TuningPragmas of the Go side it is compared with).
func Open(ctx context.Context, path string, tuning ...string) (*sql.DB, error) {
	loadVec()
	pragmas := append(slices.Clone(readOnlyPragmas), tuning...)
	drv := &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		for _, p := range pragmas {
			if _, err := c.Exec(p, []driver.Value{}); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	}}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro"
	db := sql.OpenDB(connector{drv: drv, dsn: dsn})
	db.SetMaxOpenConns(1)
	var fts5 bool
	if err := db.QueryRowContext(ctx, "SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&fts5); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s through C SQLite: %w", path, err)
	}
	if !fts5 {
		db.Close()
		return nil, fmt.Errorf("open %s through C SQLite: FTS5 not compiled in; build with -tags 'csqlite fts5'", path)
	}
	return db, nil
}

// Version is the C SQLite release compiled in.
func Version() string {
	v, _, _ := sqlite3.Version()
	return v
}

// VecVersion is the sqlite-vec release compiled in (the C bindings may trail
// the one built into the pure-Go engine).
func VecVersion(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	err := db.QueryRowContext(ctx, "SELECT vec_version()").Scan(&v)
	return v, err
}

type connector struct {
	drv *sqlite3.SQLiteDriver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }
