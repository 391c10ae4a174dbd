package documents

import (
	"strings"
	"testing"
)

// Each documents verdict with figures just inside and just outside its
// threshold; the lexical target scales by the chunk counts measured.
func TestBenchVerdicts(t *testing.T) {
	c := func(median float64) *BenchCase { return &BenchCase{MedianMS: median} }
	targets := func(uncached, cached, read, lexSmall, lexLarge float64, small, large int) map[string]BenchTarget {
		out := map[string]BenchTarget{}
		for _, tg := range sideBySideTargets(c(uncached), c(cached), c(read), c(lexSmall), c(lexLarge), small, large) {
			out[strings.Fields(tg.Name)[0]] = tg
		}
		return out
	}
	tests := []struct {
		name, target string
		got          map[string]BenchTarget
		met          bool
	}{
		{"cached 100.1 ×", "cached", targets(100, 0.999, 0.01, 1, 1, 65, 1284), true},
		{"cached 99.9 ×", "cached", targets(100, 1.001, 0.01, 1, 1, 65, 1284), false},
		{"cached median 0", "cached", targets(100, 0, 0.01, 1, 1, 65, 1284), false},
		{"read 100.1 ×", "read", targets(100, 0.01, 0.999, 1, 1, 65, 1284), true},
		{"read 99.9 ×", "read", targets(100, 0.01, 1.001, 1, 1, 65, 1284), false},
		// 1,300 / 65 = 20 exactly: 2 × 20 × 1 ms = 40 ms.
		{"lexical 39.9 ms of 40", "lexical", targets(100, 0.01, 0.01, 1, 39.9, 65, 1300), true},
		{"lexical 40.1 ms of 40", "lexical", targets(100, 0.01, 0.01, 1, 40.1, 65, 1300), false},
		// The factor follows the chunks measured: 1,284 / 65 = 19.75, so
		// 39.6 ms is over although it is under 2 × 20.
		{"lexical 39.6 ms at 19.75 ×", "lexical", targets(100, 0.01, 0.01, 1, 39.6, 65, 1284), false},
		{"lexical 39.4 ms at 19.75 ×", "lexical", targets(100, 0.01, 0.01, 1, 39.4, 65, 1284), true},
		{"lexical without small chunks", "lexical", targets(100, 0.01, 0.01, 1, 1, 0, 1284), false},
	}
	for _, tt := range tests {
		tg, ok := tt.got[tt.target]
		if !ok {
			t.Fatalf("%s: no %s target in %+v", tt.name, tt.target, tt.got)
		}
		if tg.Met != tt.met {
			t.Errorf("%s: met %v (value %.4f, %s), want %v", tt.name, tg.Met, tg.Value, tg.Detail, tt.met)
		}
	}
	for _, tt := range []struct {
		poppler, ours float64
		same, met     bool
	}{
		{50.1, 100, true, true},
		{49.9, 100, true, false},
		{80, 100, false, false}, // fast enough, different words
		{80, 0, true, false},    // not measured
	} {
		var tg BenchTarget
		pdftotextVerdict(&tg, tt.poppler, tt.ours, tt.same)
		if tg.Met != tt.met {
			t.Errorf("pdftotext %.1f ms, ours %.1f ms, same words %v: met %v, want %v", tt.poppler, tt.ours, tt.same, tg.Met, tt.met)
		}
	}
}
