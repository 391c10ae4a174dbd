package wiki

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchPicksUpOutsideEdits: a page written by another editor becomes
// searchable without a rescan call, a removed one disappears, and a file
// dropped into raw/sources/ is queued for ingest.
func TestWatchPicksUpOutsideEdits(t *testing.T) {
	dir := t.TempDir()
	InitVault(dir)
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, time.Hour, true) }()
	t.Cleanup(func() { cancel(); <-done })
	found := func(q string) bool {
		res, err := s.Search(context.Background(), SearchRequest{Query: q, NoExpand: true})
		return err == nil && len(res.Results) > 0
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // the watcher subscribes to the folders
	os.MkdirAll(filepath.Join(dir, "wiki", "new"), 0o755)
	until("the new folder to be watched", func() bool {
		os.WriteFile(filepath.Join(dir, "wiki", "new", "Zeppelin.md"), []byte("---\ntitle: Zeppelin\n---\nairship hangar\n"), 0o644)
		return found("airship")
	})
	os.Remove(filepath.Join(dir, "wiki", "new", "Zeppelin.md"))
	until("the removal", func() bool { return !found("airship") })
	os.WriteFile(filepath.Join(dir, "raw", "sources", "dropped.md"), []byte("a dropped source"), 0o644)
	until("the dropped source to be queued", func() bool {
		c, _ := s.Queue().Counts(context.Background())
		return c.Queued == 1
	})
}
