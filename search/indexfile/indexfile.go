// Package indexfile opens the SQLite file of a local search index that
// Steward rebuilds from the user's data (the calendar and contacts indexes),
// and records each completed build in it.
//
// Builders open the file with its migrations; searchers open it read-only and
// get the index's own "not built yet" error, naming the command to run, for a
// file that does not exist yet or whose schema is older. A build publishes its
// marker in the same transaction as its data, so a reader sees either the
// previous build or this one.
package indexfile

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// Options describe one index file.
type Options struct {
	// Name names the index in errors ("calendar index").
	Name string
	// Migrations is the index schema, one step per user_version (see
	// sqlitedb.Options).
	Migrations []string
	// NotBuilt is what OpenReadOnly returns, wrapped with the reason, when
	// the index does not exist yet; it should say how to build it.
	NotBuilt error
}

// Open opens the index at path for building, creating it or bringing its
// schema up to date.
func Open(ctx context.Context, path string, o Options) (*sql.DB, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: o.Migrations})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Name, err)
	}
	return db, nil
}

// ReadOptions are how OpenReadOnly opens an index: query-only, with the
// search readers' memory map and page cache (sqlitedb.Options.SearchTuning).
func ReadOptions() sqlitedb.Options { return sqlitedb.Options{ReadOnly: true}.SearchTuning() }

// OpenReadOnly opens an existing index for searching; it never writes. A
// missing file or an older schema is o.NotBuilt; a newer schema is
// sqlitedb.ErrNewerSchema.
func OpenReadOnly(ctx context.Context, path string, o Options) (*sql.DB, error) {
	db, err := sqlitedb.Open(ctx, path, ReadOptions())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s does not exist)", o.NotBuilt, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", o.Name, err)
	}
	v, err := sqlitedb.Version(ctx, db)
	switch {
	case err != nil || v < len(o.Migrations):
		db.Close()
		return nil, fmt.Errorf("%w (%s has schema version %d)", o.NotBuilt, path, v)
	case v > len(o.Migrations):
		db.Close()
		return nil, fmt.Errorf("open %s: %w", o.Name, sqlitedb.ErrNewerSchema)
	}
	return db, nil
}

// MarkerTable is the schema of the table that holds the build marker; an
// index's migrations create it under this shape.
//
//	CREATE TABLE sync_state (
//		id           INTEGER PRIMARY KEY CHECK (id = 1),
//		generation   INTEGER NOT NULL,
//		completed_at INTEGER NOT NULL,
//		complete     INTEGER NOT NULL,
//		report       TEXT NOT NULL
//	);
const MarkerTable = "sync_state"

// Marker is the record of the last completed build.
type Marker struct {
	// Generation numbers the builds from 1.
	Generation int64
	// CompletedAt is when the build published, to the second.
	CompletedAt time.Time
	// Complete is false when some source or item could not be read.
	Complete bool
	// Report is the build's report as JSON.
	Report string
}

// Build is one build of an index, for Publish.
type Build struct {
	// Name names the build in errors ("calendar sync").
	Name string
	// At is when the build completes.
	At time.Time
	// Write makes the build's changes in tx; generation numbers this build,
	// one more than the last published one. It returns whether every source
	// and item could be read, and the report to keep in the marker (encoded
	// as JSON).
	Write func(tx *sql.Tx, generation int64) (complete bool, report any, err error)
	// BeforeCommit, when set, runs just before the commit; an error aborts
	// the build. Tests use it to show that a failed build publishes nothing.
	BeforeCommit func() error
}

// Publish runs b.Write in one transaction and records the build's marker in
// the same transaction, so that a reader sees either the previous build or
// this one, never a mixture. Any error rolls the whole build back.
func Publish(ctx context.Context, db *sql.DB, b Build) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin %s: %w", b.Name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var gen int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(generation), 0) + 1 FROM `+MarkerTable).Scan(&gen); err != nil {
		return fmt.Errorf("read %s generation: %w", b.Name, err)
	}
	complete, report, err := b.Write(tx, gen)
	if err != nil {
		return err
	}
	rep, err := json.Marshal(report)
	if err != nil {
		return fmt.Errorf("encode %s report: %w", b.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+MarkerTable+` (id, generation, completed_at, complete, report) VALUES (1, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, completed_at = excluded.completed_at,
		complete = excluded.complete, report = excluded.report`, gen, b.At.Unix(), complete, string(rep)); err != nil {
		return fmt.Errorf("record completed %s: %w", b.Name, err)
	}
	if b.BeforeCommit != nil {
		if err := b.BeforeCommit(); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", b.Name, err)
	}
	return nil
}

// LastBuild returns the last published build marker, or nil before the
// first build.
func LastBuild(ctx context.Context, db *sql.DB) (*Marker, error) {
	var m Marker
	var at int64
	err := db.QueryRowContext(ctx, `SELECT generation, completed_at, complete, report FROM `+MarkerTable+` WHERE id = 1`).
		Scan(&m.Generation, &at, &m.Complete, &m.Report)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read build marker: %w", err)
	}
	m.CompletedAt = time.Unix(at, 0).UTC()
	return &m, nil
}
