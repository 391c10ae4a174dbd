package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// ftsSegments counts the segments of an FTS5 index: the distinct segment ids
// among its stored leaf pages.
func ftsSegments(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	// Leaf pages are stored under rowid (segid << 37) + page; the structure
	// and averages records live below 2^37.
	if err := s.db.QueryRow(fmt.Sprintf("SELECT count(DISTINCT id >> 37) FROM %s_data WHERE id >= (1 << 37)", table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLargeBackfillMergesFullTextIndexes(t *testing.T) {
	acct, md := maildirAccount(t, "big", true)
	for i := range optimizeAfter + 50 {
		mustAdd(t, md, "INBOX", archive.Message{ID: fmt.Sprintf("m%d@x", i), From: "a@a", Subject: fmt.Sprintf("invoice %d", i),
			Body: fmt.Sprintf("quarterly report number %d for the project", i), Date: day0.Add(time.Duration(i) * time.Minute)}, "S")
	}
	s := openStore(t, acct)
	// Small batches leave many segments behind, as a long backfill does.
	st, err := s.Sync(context.Background(), SyncOptions{Mode: Backfill, BatchSize: 100, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Optimized || st.New != optimizeAfter+50 {
		t.Fatalf("stats = %+v, want a merged index after %d new messages", st, st.New)
	}
	for _, table := range []string{"message_fts", "message_tri"} {
		if n := ftsSegments(t, s, table); n != 1 {
			t.Errorf("%s has %d segments after the backfill, want 1", table, n)
		}
	}
	// A small backfill does not pay for a merge.
	acct2, md2 := maildirAccount(t, "small", true)
	mustAdd(t, md2, "INBOX", archive.Message{ID: "one@x", From: "a@a", Subject: "one", Date: day0}, "S")
	if st := runSync(t, openStore(t, acct2), Backfill); st.Optimized {
		t.Error("a one-message backfill merged the indexes")
	}
}
