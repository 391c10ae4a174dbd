package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the CPU time (user + system) of this process and of its
// waited-for children: on a loaded machine it compares the two paths' work
// better than wall time.
func cpuNow() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// cpuMeter accumulates the CPU time of the timed parts of a benchmark.
type cpuMeter struct {
	start, total time.Duration
}

func (m *cpuMeter) on()  { m.start = cpuNow() }
func (m *cpuMeter) off() { m.total += cpuNow() - m.start }
func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.total.Milliseconds())/float64(b.N), "cpu-ms/op")
}

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
		var cpu cpuMeter
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			card := "c" + strconv.Itoa(i)
			cpu.on()
			if _, err := r.Enter(ctx, EnterOptions{Card: card, Parent: "root"}); err != nil {
				b.Fatal(err)
			}
			cpu.off()
			b.StopTimer()
			touchAll(b, dir, i)
			b.StartTimer()
			cpu.on()
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
			cpu.off()
		}
		cpu.report(b)
	})
	b.Run("plain-git", func(b *testing.B) {
		dir := benchCheckout(b)
		var cpu cpuMeter
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			card := "c" + strconv.Itoa(i)
			cpu.on()
			gitT(b, dir, "switch", "-q", "-c", card)
			cpu.off()
			b.StopTimer()
			touchAll(b, dir, i)
			b.StartTimer()
			cpu.on()
			gitT(b, dir, "add", "-A")
			gitT(b, dir, "commit", "-q", "-m", "checkpoint "+card)
			gitT(b, dir, "switch", "-q", "main")
			gitT(b, dir, "merge", "-q", "--squash", card)
			gitT(b, dir, "commit", "-q", "-m", "card "+card)
			cpu.off()
		}
		cpu.report(b)
	})
}
