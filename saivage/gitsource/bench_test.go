package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

const benchFiles = 1000

// benchCheckout is a repository with benchFiles committed files in 20
// directories.
func benchCheckout(b *testing.B) string {
	files := map[string]string{}
	for i := range benchFiles {
		files[fmt.Sprintf("dir%02d/file%04d.txt", i%20, i)] = fmt.Sprintf("line one of %d\nline two\n", i)
	}
	return newCheckout(b, files)
}

// touchAll rewrites every file with content naming round n.
func touchAll(b *testing.B, dir string, n int) {
	for i := range benchFiles {
		p := filepath.Join(dir, fmt.Sprintf("dir%02d/file%04d.txt", i%20, i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("line one of %d\nround %d\n", i, n)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCaptureDeliver1000 measures one card's life over a change to
// 1,000 files: capture and delivery through the engine (Enter,
// Checkpoint, DeliverToParent, DeliverToBranch, with their source checks)
// against the plain Git commands doing the same (switch -c, add -A, commit,
// switch back, merge --squash, commit). Editing the files is not timed.
func BenchmarkCaptureDeliver1000(b *testing.B) {
	ctx := context.Background()
	b.Run("gitsource", func(b *testing.B) {
		dir := benchCheckout(b)
		r, _ := commission(b, dir)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			card := "c" + strconv.Itoa(i)
			if _, err := r.Enter(ctx, EnterOptions{Card: card, Parent: "root"}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			touchAll(b, dir, i)
			b.StartTimer()
			cp, err := r.Checkpoint(ctx, CheckpointOptions{Card: card})
			if err != nil || !cp.Changed || len(cp.Paths) != benchFiles {
				b.Fatalf("checkpoint %d paths, %v", len(cp.Paths), err)
			}
			if _, err := r.DeliverToParent(ctx, DeliverOptions{Child: card, Parent: "root", Reviewed: cp.After.Commit}); err != nil {
				b.Fatal(err)
			}
			if _, err := r.DeliverToBranch(ctx, "root"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-git", func(b *testing.B) {
		dir := benchCheckout(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			card := "c" + strconv.Itoa(i)
			gitT(b, dir, "switch", "-q", "-c", card)
			b.StopTimer()
			touchAll(b, dir, i)
			b.StartTimer()
			gitT(b, dir, "add", "-A")
			gitT(b, dir, "commit", "-q", "-m", "checkpoint "+card)
			gitT(b, dir, "switch", "-q", "main")
			gitT(b, dir, "merge", "-q", "--squash", card)
			gitT(b, dir, "commit", "-q", "-m", "card "+card)
		}
	})
}
