package actionsbench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/actions"
)

// TestBenchSmoke runs every case at a small scale and checks the figures
// the report promises exist and hold together.
func TestBenchSmoke(t *testing.T) {
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), Items: 500, Events: 300, Messages: 1500, Samples: 3, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.List.Items != 500 || rep.List.Go.Median <= 0 || rep.List.Query == "" || rep.List.Rounds != 3 || rep.List.PerRound != listPerRound {
		t.Fatalf("list %+v", rep.List)
	}
	if c := rep.List.C; c != nil && (c.Median <= 0 || !(rep.List.RatioP10 <= rep.List.Ratio && rep.List.Ratio <= rep.List.RatioP90) || rep.List.RatioP10 <= 0) {
		t.Fatalf("list against C %+v, C %+v", rep.List, c)
	}
	rm := rep.Reminders
	if rm.Events != 300 || rm.Created != 300 || rm.FirstMs <= 0 || rm.Repeats != 3 || len(rm.FirstSamples) != 3 || len(rm.UnchangedSamples) != 3 {
		t.Fatalf("reminders %+v", rm)
	}
	// Each run creates into a new store (an unchanged pass would create
	// nothing), and the reported figures are the samples' medians.
	if sorted := slices.Sorted(slices.Values(rm.FirstSamples)); rm.FirstMs != sorted[1] {
		t.Fatalf("first pass %v ms is not the median of %v", rm.FirstMs, rm.FirstSamples)
	}
	s := rep.Scan
	if s == nil || s.Report.Analysed > 50 || s.Report.Pool == 0 || s.ModelCalls != int64(s.Report.ModelCalls) || s.Report.Analysed == 0 {
		t.Fatalf("scan %+v %+v", s, s.Report)
	}
}

// TestInterleave: every side makes one first call and perRound calls a
// round, the sides alternate which goes first, and the ratio's spread is
// ordered.
func TestInterleave(t *testing.T) {
	var calls []int
	side := func(i int) func() error {
		return func() error {
			calls = append(calls, i)
			// Unequal work, so that the per-round ratios differ from 1.
			for n := 0; n < 1000*(i+1); n++ {
				runtime.Gosched()
			}
			return nil
		}
	}
	res, err := interleave(4, 3, side(0), side(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if len(res.wall) != 2 || len(res.cpu) != 2 || res.wall[0].Median <= 0 || res.wall[1].First <= 0 {
		t.Fatalf("timings %+v", res.wall)
	}
	for _, r := range [][3]float64{res.wallRatio, res.cpuRatio} {
		if !(r[1] <= r[0] && r[0] <= r[2]) || r[1] <= 0 {
			t.Fatalf("ratio median, p10, p90 %v", r)
		}
	}
	failing := errors.New("side failed")
	if _, err := interleave(4, 3, side(0), func() error { return failing }); !errors.Is(err, failing) {
		t.Fatalf("a failing side: %v", err)
	}
}

// BenchmarkList profiles Store.List alone over 100,000 items
// (go test -bench List -cpuprofile).
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	store, err := actions.Open(ctx, filepath.Join(b.TempDir(), "actions.db"), actions.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	if err := fill(ctx, store.DB(), 100000); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := store.List(ctx, actions.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReminders profiles a creating and an unchanged pass over 10,000 events.
func BenchmarkReminders(b *testing.B) {
	ctx := context.Background()
	o := Options{Dir: b.TempDir(), Events: 10000}
	for b.Loop() {
		var rep Report
		if err := reminderCase(ctx, &o, &rep); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.Reminders.FirstCPUMs, "firstCPUms")
		b.ReportMetric(rep.Reminders.UnchangedCPUMs, "unchangedCPUms")
		b.Logf("first %.0f ms (CPU %.0f), unchanged %.0f ms (CPU %.0f)", rep.Reminders.FirstMs, rep.Reminders.FirstCPUMs, rep.Reminders.UnchangedMs, rep.Reminders.UnchangedCPUMs)
	}
}

// BenchmarkListCase runs the list case as steward bench actions does and
// reports both engines' medians (build with -tags 'csqlite fts5').
func BenchmarkListCase(b *testing.B) {
	o := Options{Dir: b.TempDir(), Items: 100000, Samples: 200}
	for b.Loop() {
		var rep Report
		if err := listCase(context.Background(), &o, &rep); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.List.Go.Median, "goMs")
		if rep.List.C != nil {
			b.ReportMetric(rep.List.C.Median, "cMs")
			b.ReportMetric(rep.List.Ratio, "ratio")
		}
	}
}

// BenchmarkUnchangedPass profiles the steady state: a reminder pass over
// 10,000 events that all have their reminders already.
func BenchmarkUnchangedPass(b *testing.B) {
	ctx := context.Background()
	o := Options{Dir: b.TempDir(), Events: 10000}
	idx, now, err := calendarIndex(ctx, &o, filepath.Join(o.Dir, "calendar"))
	if err != nil {
		b.Fatal(err)
	}
	store, err := actions.Open(ctx, filepath.Join(o.Dir, "actions.db"), actions.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	ro := actions.ReminderOptions{IndexPath: idx, Now: now}
	if _, err := store.CalendarReminders(ctx, ro); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	cpu := cpuTime()
	for b.Loop() {
		r, err := store.CalendarReminders(ctx, ro)
		if err != nil || r.Unchanged != o.Events {
			b.Fatal(r, err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpuMs/op")
}

// BenchmarkCreatingPass profiles the first pass alone: 10,000 events, each
// iteration into a new store (opened and closed outside the timer).
func BenchmarkCreatingPass(b *testing.B) {
	ctx := context.Background()
	o := Options{Dir: b.TempDir(), Events: 10000}
	idx, now, err := calendarIndex(ctx, &o, filepath.Join(o.Dir, "calendar"))
	if err != nil {
		b.Fatal(err)
	}
	ro := actions.ReminderOptions{IndexPath: idx, Now: now}
	var cpu time.Duration
	var gcs uint32
	var ms runtime.MemStats
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		store, err := actions.Open(ctx, filepath.Join(o.Dir, fmt.Sprintf("actions-%d.db", i)), actions.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		n := ms.NumGC
		b.StartTimer()
		c := cpuTime()
		r, err := store.CalendarReminders(ctx, ro)
		cpu += cpuTime() - c
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		gcs += ms.NumGC - n
		b.StartTimer()
		if err != nil || r.Created != o.Events {
			b.Fatal(r, err)
		}
		b.StopTimer()
		store.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpuMs/op")
	b.ReportMetric(float64(gcs)/float64(b.N), "gcs/op")
}
