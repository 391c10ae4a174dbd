package documents

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestBenchmarkSmoke runs the benchmark suite at smoke size: every case of
// the spec's table is present and returns what the spec's case returns.
func TestBenchmarkSmoke(t *testing.T) {
	var progress strings.Builder
	r, err := RunBenchmark(context.Background(), BenchOptions{Samples: 1, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) != len(specFigures) {
		t.Fatalf("%d cases, want %d", len(r.Cases), len(specFigures))
	}
	want := map[string]int{
		"Uncached text extraction, 100,000 chars":   100_000,
		"Uncached text extraction, 2,000,000 chars": 2_000_000,
		"Cached extraction lookup, 2,000,000 chars": 2_000_000,
		"Read from extracted text, default budget":  6000,
		"Lexical search, 65 chunks":                 5,
		"Lexical search, 1,284 chunks":              5,
	}
	for _, c := range r.Cases {
		if c.Spec == nil || len(c.SamplesMS) != 1 || c.FirstMS <= 0 {
			t.Errorf("case %+v", c)
		}
		if n, ok := want[c.Name]; ok && c.Returned != n {
			t.Errorf("%s returned %d, want %d", c.Name, c.Returned, n)
		}
		if strings.HasPrefix(c.Name, "Lexical search") {
			var chunks int
			if _, err := fmt.Sscan(c.Note, &chunks); err != nil || (strings.Contains(c.Name, "65") && (chunks < 60 || chunks > 70)) ||
				(strings.Contains(c.Name, "1,284") && (chunks < 1200 || chunks > 1350)) {
				t.Errorf("%s: %s", c.Name, c.Note)
			}
		}
	}
	if len(r.Targets) != 4 || !strings.Contains(progress.String(), "Fusion") {
		t.Fatalf("targets %+v", r.Targets)
	}
}
