package sqlitedb_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// TestConcurrentOpenStress opens one new store from 2,000 goroutines at once:
// every open must succeed (none may see SQLITE_BUSY from the WAL conversion
// or from queueing for the migration lock) and the migrations must run
// exactly once.
func TestConcurrentOpenStress(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	path := filepath.Join(t.TempDir(), "stress.db")
	migs := []string{`CREATE TABLE t(id INTEGER PRIMARY KEY)`, `INSERT INTO t(id) VALUES (1)`}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{Migrations: migs})
			if err == nil {
				err = db.Close()
			} else {
				err = fmt.Errorf("after %v: %w", time.Since(t0), err)
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed < 5 {
				t.Errorf("concurrent open: %v", err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d concurrent opens failed", failed, n)
	}
	db := open(t, path, sqlitedb.Options{Migrations: migs})
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("rows = %d, want 1: a migration ran twice", rows)
	}
}

// TestOpenWaitsOutAMigrationLongerThanItsBusyTimeout: an opener whose
// migration lock is held by another opener for longer than its busy timeout
// (two of them here) is not refused with SQLITE_BUSY: it finds the store
// migrated by the holder and returns, and the migrations ran once. Before,
// the first busy timeout ended the open ("begin migration: database is
// locked"), which a crowd of first openers on a loaded machine hit.
func TestOpenWaitsOutAMigrationLongerThanItsBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slow.db")
	migs := []string{`CREATE TABLE t(id INTEGER PRIMARY KEY)`, `INSERT INTO t(id) VALUES (1)`}
	holder := open(t, path, sqlitedb.Options{})
	tx, err := holder.BeginTx(context.Background(), nil) // immediate: the write lock
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append(migs, `PRAGMA user_version = 2`) {
		if _, err := tx.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	const busy = time.Second
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(2 * busy)
		tx.Commit()
	}()
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{Migrations: migs, BusyTimeout: busy})
	<-released
	if err != nil {
		t.Fatalf("open while another opener migrates for 2 busy timeouts: %v", err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("rows = %d, %v: the migrations must run once", rows, err)
	}
}
