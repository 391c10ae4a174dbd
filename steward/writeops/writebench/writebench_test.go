package writebench

import (
	"context"
	"testing"
)

// TestRunSmall runs the benchmark at a small scale: both paths send, and
// the sweep checks every row once and confirms exactly the nine in ten
// that have a Sent copy.
func TestRunSmall(t *testing.T) {
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), Sends: 20, Rows: 300, Messages: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passes != 3 || rep.Confirmed != 270 {
		t.Fatalf("sweep: %d passes, %d confirmed; want 3 and 270", rep.Passes, rep.Confirmed)
	}
	if rep.BareP50 == "" || rep.JournalP50 == "" || rep.FirstPass == "" {
		t.Fatalf("report %+v", rep)
	}
}
