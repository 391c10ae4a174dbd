package actionsbench

import (
	"context"
	"testing"
)

// TestBenchSmoke runs every case at a small scale and checks the figures
// the report promises exist and hold together.
func TestBenchSmoke(t *testing.T) {
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), Items: 500, Events: 300, Messages: 1500, Samples: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.List.Items != 500 || rep.List.Go.Median <= 0 || rep.List.Query == "" {
		t.Fatalf("list %+v", rep.List)
	}
	if rep.Reminders.Events != 300 || rep.Reminders.Created != 300 || rep.Reminders.FirstMs <= 0 {
		t.Fatalf("reminders %+v", rep.Reminders)
	}
	s := rep.Scan
	if s == nil || s.Report.Analysed > 50 || s.Report.Pool == 0 || s.ModelCalls != int64(s.Report.ModelCalls) || s.Report.Analysed == 0 {
		t.Fatalf("scan %+v %+v", s, s.Report)
	}
}
