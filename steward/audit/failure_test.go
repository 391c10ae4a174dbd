package audit

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
)

// recordAll records n events from another goroutine and fails the test if
// Record does not return: a hang guard, not a timing assertion.
func recordAll(t *testing.T, l *Ledger, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			l.Record(context.Background(), Event{Actor: ActorHost, Type: "test.fail", Summary: "event", Payload: map[string]any{"i": i}})
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Record blocked")
	}
}

func flushGuarded(t *testing.T, l *Ledger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// TestClosedDatabaseNeverBlocksRecord breaks the store under the ledger:
// every write fails, and Record neither blocks, panics nor reports it.
func TestClosedDatabaseNeverBlocksRecord(t *testing.T) {
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"), Options{QueueSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	l.db.Close()
	recordAll(t, l, 5000)
	flushGuarded(t, l)
	st := l.Stats()
	if st.Written != 0 || st.Failed == 0 || st.Queued != st.Failed || st.Queued+st.Dropped != 5000 {
		t.Errorf("stats = %+v: want every queued event failed and the rest dropped", st)
	}
	l.Close() // returns although the store is gone
}

// TestLockedDatabase has another connection hold the write lock while the
// writer is stuck: the queue fills and drops, Record never waits, writes fail
// after the busy timeout, and recording resumes once the lock is released.
func TestLockedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(ctx, path, Options{QueueSize: 8, BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := sqlitedb.Open(ctx, path, sqlitedb.Options{Migrations: migrations})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	l.beforeWrite = func() { once.Do(func() { <-release }) } // the writer is stuck: the queue must fill
	recordAll(t, l, 2000)
	close(release)
	flushGuarded(t, l)
	st := l.Stats()
	if st.Written != 0 || st.Failed == 0 || st.Dropped == 0 {
		t.Errorf("while locked: %+v", st)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	l.Record(ctx, Event{Actor: ActorHost, Type: "test.after", Summary: "after the lock"})
	flushGuarded(t, l)
	page, err := l.Query(ctx, Filter{Type: "test.after"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || l.Stats().Written != 1 {
		t.Errorf("after unlock: %d events, %+v", len(page.Events), l.Stats())
	}
}

// TestCloseGivesUpOnAFailingStore: a write failing during Close drops the
// rest of the queue instead of trying each remaining batch against a broken
// store.
func TestCloseGivesUpOnAFailingStore(t *testing.T) {
	var logs bytes.Buffer
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"),
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	l.beforeWrite = func() { once.Do(func() { <-release }) } // hold the writer at its first batch
	recordAll(t, l, 3000)                                    // about twelve batches queue up
	l.db.Close()                                             // every write will fail
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	for !l.closing.Load() {
		runtime.Gosched()
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		t.Fatal("Close hung on a failing store")
	}
	st := l.Stats()
	if st.Queued != 3000 || st.Failed != 3000 || st.Written != 0 {
		t.Errorf("stats = %+v", st)
	}
	if n := strings.Count(logs.String(), "audit ledger write failed"); n != 1 {
		t.Errorf("%d failed writes attempted while closing, want 1:\n%s", n, logs.String())
	}
}
