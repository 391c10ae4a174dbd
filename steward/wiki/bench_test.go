package wiki

import (
	"context"
	"testing"

	"github.com/agentstack/agentstack/sqlitedb/csqlite"
)

// TestBenchSmoke runs the benchmark harness at a tiny size: every target is
// measured and reported (the figures themselves are not asserted).
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a vault")
	}
	rep, err := RunBenchmark(context.Background(), BenchOptions{Pages: 200, Samples: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 5 || rep.Pages != 200 || rep.Links == 0 || len(rep.Queries) == 0 {
		t.Fatalf("report = %+v", rep)
	}
	// Built with -tags 'csqlite fts5' (as .ci/run does), the same SQL runs
	// through C SQLite and must return the same rows.
	if csqlite.Version() != "" && rep.Timings["substring_sql_c_median"] <= 0 {
		t.Errorf("C SQLite baseline not measured: %s", rep.CSQLite)
	}
	for _, k := range []string{"rebuild", "graph_median", "incremental_update_median", "substring_sql_modernc_median", "search_full_median"} {
		if rep.Timings[k] <= 0 {
			t.Errorf("timing %s missing: %v", k, rep.Timings)
		}
	}
}

// BenchmarkReindex rebuilds the index of a generated 2,000-page vault (the
// rebuild step of `steward bench wiki`, small enough to profile:
// go test ./steward/wiki/ -run '^$' -bench Reindex -cpuprofile cpu.out).
func BenchmarkReindex(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	if err := GenerateBenchVault(dir+"/vault", 2000, 10000); err != nil {
		b.Fatal(err)
	}
	s, err := Open(ctx, Options{Dir: dir + "/vault", IndexDir: dir + "/index"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cpu0 := cpuTime()
	for b.Loop() {
		st, err := s.Reindex(ctx)
		if err != nil || st.Total != 2000 {
			b.Fatalf("reindex: %+v, %v", st, err)
		}
	}
	// On a shared machine the CPU rate is the comparable one.
	b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "pages/s")
	b.ReportMetric(float64(2000*b.N)/(cpuTime()-cpu0).Seconds(), "pages/cpu-s")
}
