//go:build csqlite

package csqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/sqlitedb/csqlite"
)

// The baseline is only fair if both engines are the same SQLite release and
// answer the same SQL alike on a file the product wrote.
func TestSameReleaseSameAnswers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.sqlitedb")
	w, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: []string{
		`CREATE VIRTUAL TABLE people_fts USING fts5(name, notes, tokenize = 'trigram');
		 INSERT INTO people_fts(rowid, name, notes) VALUES
		   (1, 'Anna Rossi', 'Politecnico, Università di Milano'),
		   (2, 'Bruno Verdi', 'accountant'),
		   (3, 'Carla Neri', 'universita statale');
		 CREATE VIRTUAL TABLE people_vec USING vec0(embedding float[3]);
		 INSERT INTO people_vec(rowid, embedding) VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]');`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var goVersion string
	if err := w.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&goVersion); err != nil {
		t.Fatal(err)
	}
	w.Close()

	if v := csqlite.Version(); v != goVersion {
		t.Errorf("C SQLite %s, pure-Go SQLite %s: bump github.com/mattn/go-sqlite3 to the release bundling %s", v, goVersion, goVersion)
	}
	c, err := csqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	const q = `SELECT rowid FROM people_fts WHERE people_fts MATCH '"universit"' ORDER BY bm25(people_fts) LIMIT 10`
	cIDs, err := queryIDs(ctx, c, q)
	if err != nil {
		t.Fatalf("C: %v", err)
	}
	goIDs, err := queryIDs(ctx, g, q)
	if err != nil {
		t.Fatalf("Go: %v", err)
	}
	if !slices.Equal(cIDs, goIDs) || len(cIDs) != 2 {
		t.Errorf("C returned %v, pure Go %v; want the same two rows", cIDs, goIDs)
	}
	const knn = `SELECT rowid FROM people_vec WHERE embedding MATCH '[1,0,0]' AND k = 2 ORDER BY distance`
	cIDs, err = queryIDs(ctx, c, knn)
	if err != nil {
		t.Fatalf("C KNN: %v", err)
	}
	goIDs, _ = queryIDs(ctx, g, knn)
	if !slices.Equal(cIDs, []int64{1, 3}) || !slices.Equal(goIDs, cIDs) {
		t.Errorf("KNN: C %v, pure Go %v; want [1 3] from both", cIDs, goIDs)
	}
	if v, err := csqlite.VecVersion(ctx, c); err != nil || v == "" {
		t.Errorf("sqlite-vec in the C engine: %q, %v", v, err)
	}
	if _, err := c.ExecContext(ctx, "INSERT INTO people_fts(rowid, name) VALUES (9, 'x')"); err == nil {
		t.Error("the C baseline connection accepted a write; it must be read-only")
	}
}

func queryIDs(ctx context.Context, db *sql.DB, q string) ([]int64, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
