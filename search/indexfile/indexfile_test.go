package indexfile_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/search/indexfile"
	"github.com/agentstack/agentstack/sqlitedb"
)

var errNotBuilt = errors.New("notes index not built yet: run `notes build`")

var v1 = []string{`
CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
CREATE TABLE sync_state (
	id           INTEGER PRIMARY KEY CHECK (id = 1),
	generation   INTEGER NOT NULL,
	completed_at INTEGER NOT NULL,
	complete     INTEGER NOT NULL,
	report       TEXT NOT NULL
);`}

var v2 = append(v1[:1:1], `ALTER TABLE notes ADD COLUMN body TEXT NOT NULL DEFAULT ''`)

func opts(migrations []string) indexfile.Options {
	return indexfile.Options{Name: "notes index", Migrations: migrations, NotBuilt: errNotBuilt}
}

// build creates an index file at path with the given schema.
func build(t *testing.T, path string, migrations []string) {
	t.Helper()
	db, err := indexfile.Open(context.Background(), path, opts(migrations))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		built   []string // schema the file was built with; nil: no file
		want    error    // nil: opens
		wantMsg string
	}{
		{name: "missing file", want: errNotBuilt, wantMsg: "does not exist"},
		{name: "older schema", built: v1, want: errNotBuilt, wantMsg: "schema version 1"},
		{name: "current schema", built: v2},
		{name: "newer schema", built: append(v2[:2:2], `CREATE TABLE extra (x)`), want: sqlitedb.ErrNewerSchema, wantMsg: "open notes index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "notes-index.sqlitedb")
			if tc.built != nil {
				build(t, path, tc.built)
			}
			db, err := indexfile.OpenReadOnly(ctx, path, opts(v2))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer db.Close()
				if _, err := db.Exec(`INSERT INTO notes (title) VALUES ('x')`); err == nil {
					t.Error("a read-only index accepted a write")
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("got %v, want %v mentioning %q", err, tc.want, tc.wantMsg)
			}
			if tc.built == nil {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("opening read-only created the file: %v", err)
				}
			}
		})
	}
}

func TestOpenMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "notes-index.sqlitedb")
	build(t, path, v1)
	db, err := indexfile.Open(context.Background(), path, opts(v2))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO notes (title, body) VALUES ('x', 'y')`); err != nil {
		t.Errorf("the second migration did not run: %v", err)
	}
	if _, err := indexfile.Open(context.Background(), path, opts(v1)); !errors.Is(err, sqlitedb.ErrNewerSchema) || !strings.Contains(err.Error(), "open notes index") {
		t.Errorf("an older program opening a newer index: %v", err)
	}
}

func TestPublish(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "notes-index.sqlitedb")
	db, err := indexfile.Open(ctx, path, opts(v2))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if m, err := indexfile.LastBuild(ctx, db); m != nil || err != nil {
		t.Fatalf("before the first build: %+v, %v", m, err)
	}
	at := time.Date(2026, 4, 1, 9, 30, 15, 500, time.FixedZone("CEST", 2*3600))
	type report struct {
		Generation int64 `json:"generation"`
		Notes      int   `json:"notes"`
	}
	for _, tc := range []struct {
		name         string
		complete     bool
		writeErr     error
		commitErr    error
		wantErr      string
		wantGen      int64 // generation visible afterwards, 0 for none
		wantNotes    int   // rows visible afterwards
		wantComplete bool
	}{
		{name: "failed write publishes nothing", complete: true, writeErr: errors.New("disk full (simulated)"), wantErr: "disk full"},
		{name: "first build", complete: true, wantGen: 1, wantNotes: 1, wantComplete: true},
		{name: "incomplete second build", complete: false, wantGen: 2, wantNotes: 2},
		{name: "failed commit keeps the second", complete: true, commitErr: errors.New("commit refused (simulated)"),
			wantErr: "commit refused", wantGen: 2, wantNotes: 2},
		{name: "third build numbers on", complete: true, wantGen: 3, wantNotes: 3, wantComplete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := indexfile.Publish(ctx, db, indexfile.Build{Name: "notes build", At: at,
				Write: func(tx *sql.Tx, gen int64) (bool, any, error) {
					if _, err := tx.Exec(`INSERT INTO notes (title) VALUES (?)`, fmt.Sprint("build ", gen)); err != nil {
						return false, nil, err
					}
					return tc.complete, report{Generation: gen, Notes: 1}, tc.writeErr
				},
				BeforeCommit: func() error { return tc.commitErr },
			})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Publish: %v, want %q", err, tc.wantErr)
			}
			var notes int
			db.QueryRow(`SELECT count(*) FROM notes`).Scan(&notes)
			if notes != tc.wantNotes {
				t.Errorf("%d rows visible, want %d (a failed build must publish nothing)", notes, tc.wantNotes)
			}
			m, err := indexfile.LastBuild(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantGen == 0 {
				if m != nil {
					t.Errorf("marker %+v, want none", m)
				}
				return
			}
			want := fmt.Sprintf(`{"generation":%d,"notes":1}`, tc.wantGen)
			if m == nil || m.Generation != tc.wantGen || m.Complete != tc.wantComplete || m.Report != want ||
				!m.CompletedAt.Equal(at.Truncate(time.Second)) || m.CompletedAt.Location() != time.UTC {
				t.Errorf("marker %+v, want generation %d, complete %t, report %s, completed at %s UTC", m, tc.wantGen, tc.wantComplete, want, at.Truncate(time.Second).UTC())
			}
		})
	}
}
