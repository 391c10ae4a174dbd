package wiki

import (
	"context"
	"testing"
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
	for _, k := range []string{"rebuild", "graph_median", "incremental_update_median", "substring_sql_modernc_median", "search_full_median"} {
		if rep.Timings[k] <= 0 {
			t.Errorf("timing %s missing: %v", k, rep.Timings)
		}
	}
}
