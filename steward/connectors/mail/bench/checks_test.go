package bench

import (
	"strings"
	"testing"
)

// Each mail verdict with figures just inside and just outside its threshold.
// A missing C SQLite baseline, failed or not built in, fails the case's
// check instead of leaving it out.
func TestChecks(t *testing.T) {
	sqlCase := func(median, first, cMedian float64, cErr string) CaseResult {
		c := CaseResult{Case: Case{Name: "fts50", kind: "sql"}, Timing: Timing{MedianMS: median, FirstMS: first}, CError: cErr}
		if cErr == "" {
			c.C = &Timing{MedianMS: cMedian}
			c.CRatio = median / cMedian
		}
		c.FirstRatio = first / median
		return c
	}
	report := func(steward, notmuch float64, c CaseResult, speedup, recall float64) *Report {
		r := &Report{Backfill: BackfillResult{StewardSeconds: steward, NotmuchSeconds: notmuch}, Cases: []CaseResult{c},
			Vector: VectorResult{Speedup: speedup, RecallAt50: recall}}
		if notmuch > 0 {
			r.Backfill.Ratio = steward / notmuch
		}
		return r
	}
	good := sqlCase(1, 2, 1, "")
	tests := []struct {
		name, check string
		rep         *Report
		pass        bool
	}{
		{"backfill 99.9 s vs 100 s", "notmuch", report(99.9, 100, good, 3, 0.99), true},
		{"backfill 100.1 s vs 100 s", "notmuch", report(100.1, 100, good, 3, 0.99), false},
		{"notmuch not run", "notmuch", report(50, 0, good, 3, 0.99), false},
		{"C ratio 1.99", "C SQLite", report(1, 2, sqlCase(1.99, 2, 1, ""), 3, 0.99), true},
		{"C ratio 2.004 (reads 2.00)", "C SQLite", report(1, 2, sqlCase(2.004, 2, 1, ""), 3, 0.99), false},
		{"C ratio 2.01", "C SQLite", report(1, 2, sqlCase(2.01, 2, 1, ""), 3, 0.99), false},
		{"C run failed", "C SQLite", report(1, 2, sqlCase(1, 2, 0, "C SQLite run failed: exit status 1"), 3, 0.99), false},
		{"C not built", "C SQLite", report(1, 2, sqlCase(1, 2, 0, "C SQLite baseline not built in"), 3, 0.99), false},
		{"first 9.9 × median", "first query", report(1, 2, sqlCase(1, 9.9, 1, ""), 3, 0.99), true},
		{"first 10.1 × median", "first query", report(1, 2, sqlCase(1, 10.1, 1, ""), 3, 0.99), false},
		{"KNN 2.01 × vec0", "KNN", report(1, 2, good, 2.01, 0.99), true},
		{"KNN 1.99 × vec0", "KNN", report(1, 2, good, 1.99, 0.99), false},
		{"recall 0.951", "recall", report(1, 2, good, 3, 0.951), true},
		{"recall 0.949", "recall", report(1, 2, good, 3, 0.949), false},
	}
	for _, tt := range tests {
		var found []Check
		for _, c := range checks(tt.rep) {
			if strings.Contains(c.Target, tt.check) {
				found = append(found, c)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: %d checks named %q: %+v", tt.name, len(found), tt.check, checks(tt.rep))
			continue
		}
		if found[0].Pass != tt.pass {
			t.Errorf("%s: pass %v (%s), want %v", tt.name, found[0].Pass, found[0].Detail, tt.pass)
		}
	}
}
