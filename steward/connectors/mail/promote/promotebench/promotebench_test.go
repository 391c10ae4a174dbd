package promotebench

import (
	"context"
	"testing"
	"time"
)

// TestRunSmoke runs the benchmark at smoke size: the harness works and its
// report holds the runs, the rerun and the prefilter share.
func TestRunSmoke(t *testing.T) {
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), Threads: 30, Workers: []int{1, 4}, Latency: 5 * time.Millisecond, ArchiveMessages: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].ModelCalls != 30 || rep.Runs[1].ModelCalls != 30 || rep.Rerun.ModelCalls != 0 || rep.Rerun.Unchanged != 30 {
		t.Fatalf("runs %+v rerun %+v", rep.Runs, rep.Rerun)
	}
	if rep.Prefilter == nil || rep.Prefilter.Threads == 0 || rep.Prefilter.Share < 0 || rep.Prefilter.Share > 1 || len(rep.Checks) != 3 {
		t.Fatalf("report %+v", rep)
	}
}
