package sqlitedb_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentstack/agentstack/sqlitedb"
)

func open(t *testing.T, path string, opts sqlitedb.Options) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenAppliesPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "store.db")
	db := open(t, path, sqlitedb.Options{})
	ctx := context.Background()

	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	var fk, busy int
	db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk)
	db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy)
	if fk != 1 {
		t.Errorf("foreign_keys = %d, want 1", fk)
	}
	if busy != int(sqlitedb.DefaultBusyTimeout.Milliseconds()) {
		t.Errorf("busy_timeout = %d", busy)
	}
	info, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("store directory mode = %o, want 700", perm)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", filepath.Base(f), info.Mode().Perm(), err)
		}
	}
}

// Search tuning reaches every pooled connection, not only the first, and
// reads the same through TuningPragmas for another driver.
func TestSearchTuningOnEveryConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	open(t, path, sqlitedb.Options{})
	opts := sqlitedb.Options{ReadOnly: true}.SearchTuning()
	db := open(t, path, opts)
	ctx := context.Background()
	var conns []*sql.Conn
	for range 3 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var mmap int64
		var cache int
		c.QueryRowContext(ctx, "PRAGMA mmap_size").Scan(&mmap)
		c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache)
		// SQLite caps the map just under 2 GiB (SQLITE_MAX_MMAP_SIZE).
		if mmap < 1<<30 || mmap > opts.MmapSize || cache != -opts.CacheKiB {
			t.Errorf("connection %d: mmap_size %d, cache_size %d; want %d, %d", len(conns), mmap, cache, opts.MmapSize, -opts.CacheKiB)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	want := []string{"PRAGMA mmap_size = 2147483648", "PRAGMA cache_size = -65536"}
	if got := opts.TuningPragmas(); !slices.Equal(got, want) {
		t.Errorf("TuningPragmas = %q, want %q", got, want)
	}
	if got := (sqlitedb.Options{}).TuningPragmas(); len(got) != 0 {
		t.Errorf("untuned options list pragmas %q", got)
	}
}

// MemoryTempStore reaches the connection (statement journals in memory).
func TestMemoryTempStore(t *testing.T) {
	for _, on := range []bool{false, true} {
		db := open(t, filepath.Join(t.TempDir(), "store.db"), sqlitedb.Options{MemoryTempStore: on})
		var mode int
		if err := db.QueryRowContext(context.Background(), "PRAGMA temp_store").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 2}[on]; mode != want {
			t.Errorf("MemoryTempStore %v: temp_store %d, want %d", on, mode, want)
		}
	}
}

func TestForeignKeysEnforced(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "fk.db"), sqlitedb.Options{Migrations: []string{
		`CREATE TABLE parent(id INTEGER PRIMARY KEY);
		 CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id));`,
	}})
	_, err := db.Exec("INSERT INTO child(id, parent_id) VALUES (1, 42)")
	if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("insert orphan child: err = %v, want FOREIGN KEY constraint failure", err)
	}
}

func TestMigrationsByUserVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	v1 := []string{`CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)`}
	db := open(t, path, sqlitedb.Options{Migrations: v1})
	if _, err := db.Exec("INSERT INTO notes(body) VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if v, _ := sqlitedb.Version(ctx, db); v != 1 {
		t.Fatalf("version after first open = %d, want 1", v)
	}
	db.Close()

	// Reopening with one more migration applies only the new step and keeps data.
	v2 := append(v1, `ALTER TABLE notes ADD COLUMN title TEXT NOT NULL DEFAULT ''`)
	db = open(t, path, sqlitedb.Options{Migrations: v2})
	var body, title string
	if err := db.QueryRow("SELECT body, title FROM notes").Scan(&body, &title); err != nil {
		t.Fatal(err)
	}
	if body != "kept" || title != "" {
		t.Errorf("row after migration = (%q, %q)", body, title)
	}
	if v, _ := sqlitedb.Version(ctx, db); v != 2 {
		t.Fatalf("version after second open = %d, want 2", v)
	}
	db.Close()

	// An older binary refuses the newer store instead of corrupting it.
	_, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: v1})
	if !errors.Is(err, sqlitedb.ErrNewerSchema) {
		t.Fatalf("open with fewer migrations: err = %v, want ErrNewerSchema", err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bad.db")
	_, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: []string{
		`CREATE TABLE a(id INTEGER PRIMARY KEY)`,
		`CREATE TABLE b(id INTEGER PRIMARY KEY); THIS IS NOT SQL`,
	}})
	if err == nil || !strings.Contains(err.Error(), "migration 2") {
		t.Fatalf("err = %v, want a failure naming migration 2", err)
	}
	db := open(t, path, sqlitedb.Options{Migrations: []string{`CREATE TABLE a(id INTEGER PRIMARY KEY)`}})
	if v, _ := sqlitedb.Version(ctx, db); v != 1 {
		t.Errorf("version = %d, want 1 (step 2 rolled back)", v)
	}
	var n int
	db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'b'").Scan(&n)
	if n != 0 {
		t.Error("table b of the failed migration exists")
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	migs := []string{`CREATE TABLE t(id INTEGER PRIMARY KEY)`, `INSERT INTO t(id) VALUES (1)`}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{Migrations: migs})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	db := open(t, path, sqlitedb.Options{Migrations: migs})
	var n int
	db.QueryRow("SELECT count(*) FROM t").Scan(&n)
	if n != 1 {
		t.Fatalf("rows = %d, want 1: a migration ran twice", n)
	}
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.db")
	rw := open(t, path, sqlitedb.Options{Migrations: []string{`CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('x')`}})
	ro := open(t, path, sqlitedb.Options{ReadOnly: true})
	var v string
	if err := ro.QueryRow("SELECT v FROM t").Scan(&v); err != nil || v != "x" {
		t.Fatalf("read-only select = %q, %v", v, err)
	}
	if _, err := ro.Exec("INSERT INTO t VALUES ('y')"); err == nil {
		t.Fatal("read-only connection accepted an INSERT")
	}
	// The writer still works beside the reader (WAL).
	if _, err := rw.Exec("INSERT INTO t VALUES ('z')"); err != nil {
		t.Fatalf("writer beside reader: %v", err)
	}
	if _, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "missing.db"), sqlitedb.Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
}

func TestFTS5Trigram(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "fts.db"), sqlitedb.Options{Migrations: []string{
		`CREATE VIRTUAL TABLE docs USING fts5(subject, body, tokenize='trigram')`,
	}})
	rows := []struct{ subject, body string }{
		{"Fattura Polimi", "La fattura numero 2024-117 è allegata"},
		{"Train to Milano", "Il Frecciarossa 9544 parte alle 17:05"},
		{"Lunch", "see you at noon"},
	}
	for _, r := range rows {
		if _, err := db.Exec("INSERT INTO docs(subject, body) VALUES (?, ?)", r.subject, r.body); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		match string
		want  []string
	}{
		{`"9544"`, []string{"Train to Milano"}},    // substring inside a token
		{`"ecciaro"`, []string{"Train to Milano"}}, // infix
		{`"fattura"`, []string{"Fattura Polimi"}},  // case-insensitive
		{`"zzz"`, nil},
	}
	for _, tc := range tests {
		var got []string
		r, err := db.Query("SELECT subject FROM docs WHERE docs MATCH ? ORDER BY rank", tc.match)
		if err != nil {
			t.Fatalf("MATCH %s: %v", tc.match, err)
		}
		for r.Next() {
			var s string
			r.Scan(&s)
			got = append(got, s)
		}
		r.Close()
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("MATCH %s = %v, want %v", tc.match, got, tc.want)
		}
	}
	// Trigram also accelerates LIKE substring queries.
	var n int
	db.QueryRow("SELECT count(*) FROM docs WHERE body LIKE '%arte alle%'").Scan(&n)
	if n != 1 {
		t.Errorf("LIKE substring count = %d, want 1", n)
	}
}

func TestVec0KNN(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "vec.db"), sqlitedb.Options{Migrations: []string{
		`CREATE VIRTUAL TABLE emb USING vec0(embedding float[4])`,
	}})
	vectors := map[int64][]float32{
		1: {1, 0, 0, 0},
		2: {0, 1, 0, 0},
		3: {0.9, 0.1, 0, 0},
		4: {0, 0, 0, 1},
	}
	for id, v := range vectors {
		if _, err := db.Exec("INSERT INTO emb(rowid, embedding) VALUES (?, ?)", id, sqlitedb.EncodeVector(v)); err != nil {
			t.Fatalf("insert vector %d: %v", id, err)
		}
	}
	r, err := db.Query("SELECT rowid, distance FROM emb WHERE embedding MATCH ? AND k = 2 ORDER BY distance",
		sqlitedb.EncodeVector([]float32{1, 0.05, 0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ids []int64
	var last float64 = -1
	for r.Next() {
		var id int64
		var d float64
		if err := r.Scan(&id, &d); err != nil {
			t.Fatal(err)
		}
		if d < last {
			t.Errorf("distances not ascending: %v after %v", d, last)
		}
		last = d
		ids = append(ids, id)
	}
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
		t.Fatalf("KNN ids = %v, want [1 3]", ids)
	}
}

func TestVectorRoundTrip(t *testing.T) {
	in := []float32{0, -1.5, 3.25, 1e-7}
	out, err := sqlitedb.DecodeVector(sqlitedb.EncodeVector(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("round trip %v -> %v", in, out)
		}
	}
	if _, err := sqlitedb.DecodeVector([]byte{1, 2, 3}); err == nil {
		t.Fatal("DecodeVector accepted 3 bytes")
	}
}
