package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// checkMet returns the Met of the check whose target contains name, failing
// the test when there is not exactly one.
func checkMet(t *testing.T, checks []benchCheck, name string) (bool, string) {
	t.Helper()
	var found []benchCheck
	for _, c := range checks {
		if strings.Contains(c.Target, name) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d checks named %q in %+v", len(found), name, checks)
	}
	return found[0].Met, found[0].Measured
}

// Each gateway verdict with figures just inside and just outside its
// threshold; the ratio is judged before it is rounded for display.
func TestGatewayChecks(t *testing.T) {
	report := func(gwP50, throughputRatio, rss float64, errors int) *gatewayBenchReport {
		c1 := gatewayBenchResult{Concurrency: 1, Targets: map[string]benchTargetStats{
			"direct": {P50MS: 0.030}, "proxy": {P50MS: 0.130}, "gateway": {P50MS: gwP50, Errors: errors}}}
		c1.AddedP50Ratio = addedP50Ratio(0.030, 0.130, gwP50)
		c64 := gatewayBenchResult{Concurrency: 64, ThroughputRatio: throughputRatio, Targets: map[string]benchTargetStats{}}
		return &gatewayBenchReport{Scenarios: []gatewayBenchResult{c1, c64}, GatewayPeakRSSMiB: rss}
	}
	tests := []struct {
		name, check string
		rep         *gatewayBenchReport
		met         bool
	}{
		{"added p50 1.49 ×", "added p50", report(0.030+1.49*0.1, 0.9, 30, 0), true},
		{"added p50 1.504 × (reads 1.50)", "added p50", report(0.030+1.504*0.1, 0.9, 30, 0), false},
		{"added p50 1.51 ×", "added p50", report(0.030+1.51*0.1, 0.9, 30, 0), false},
		{"throughput 70.1 %", "throughput", report(0.1, 0.701, 30, 0), true},
		{"throughput 69.9 %", "throughput", report(0.1, 0.699, 30, 0), false},
		{"RSS 49.9 MiB", "RSS", report(0.1, 0.9, 49.9, 0), true},
		{"RSS 50.1 MiB", "RSS", report(0.1, 0.9, 50.1, 0), false},
		{"RSS not measured", "RSS", report(0.1, 0.9, 0, 0), false},
		{"no failed request", "every request", report(0.1, 0.9, 30, 0), true},
		{"one failed request", "every request", report(0.1, 0.9, 30, 1), false},
	}
	for _, tt := range tests {
		if met, measured := checkMet(t, gatewayChecks(tt.rep), tt.check); met != tt.met {
			t.Errorf("%s: met %v (%s), want %v", tt.name, met, measured, tt.met)
		}
	}

	// A proxy that adds nothing leaves the ratio undefined: not met, and
	// never shown as 0.00 ×.
	if r := addedP50Ratio(0.030, 0.030, 0.050); r != nil {
		t.Errorf("ratio with proxy p50 = direct's: %v, want none", *r)
	}
	rep := report(0.1, 0.9, 30, 0)
	rep.Scenarios[0].Targets["proxy"] = benchTargetStats{P50MS: 0.029}
	rep.Scenarios[0].AddedP50Ratio = addedP50Ratio(0.030, 0.029, 0.1)
	if met, measured := checkMet(t, gatewayChecks(rep), "added p50"); met || strings.Contains(measured, "0.00") || !strings.Contains(measured, "not measurable") {
		t.Errorf("proxy p50 below direct's: met %v, %q", met, measured)
	}
}

func TestHostChecks(t *testing.T) {
	const want = 2000
	report := func(ttltGW, ttltHost, ttftGW, ttftHost float64) *hostBenchReport {
		r := &hostBenchReport{Chats: 20, Turns: map[string]int{"gateway": want, "host": want},
			Paths: map[string]latency{
				"gateway": {TTLTP50MS: ttltGW, TTFTP99MS: ttftGW},
				"host":    {TTLTP50MS: ttltHost, TTFTP99MS: ttftHost}},
			RequestBytes: map[string]float64{"gateway": 8120, "host": 8120}}
		r.TTLTRatio = ttltHost / ttltGW
		r.AddedTTFTMS = ttftHost - ttftGW
		return r
	}
	tests := []struct {
		name, check string
		rep         *hostBenchReport
		met         bool
	}{
		{"TTLT +9.9 %", "TTLT", report(100, 109.9, 5, 5), true},
		{"TTLT +10.04 % (reads +10.0 %)", "TTLT", report(100, 110.04, 5, 5), false},
		{"TTLT +10.1 %", "TTLT", report(100, 110.1, 5, 5), false},
		{"TTFT p99 +1.99 ms", "TTFT", report(100, 101, 5, 6.99), true},
		{"TTFT p99 +2.00 ms", "TTFT", report(100, 101, 5, 7), false},
		{"TTFT p99 +2.01 ms", "TTFT", report(100, 101, 5, 7.01), false},
		{"every turn", "every turn", report(100, 101, 5, 5), true},
		{"same request", "same model request", report(100, 101, 5, 5), true},
	}
	for _, tt := range tests {
		if met, measured := checkMet(t, hostChecks(tt.rep, want), tt.check); met != tt.met {
			t.Errorf("%s: met %v (%s), want %v", tt.name, met, measured, tt.met)
		}
	}
	// A turn short on one path fails the completeness check and, since the
	// percentiles then cover other turns, the latency verdicts too.
	short := report(100, 101, 5, 5)
	short.Turns["host"] = want - 1
	short.Paths["host"] = latency{TTLTP50MS: 101, TTFTP99MS: 5, Errors: 1}
	for _, name := range []string{"every turn", "TTLT", "TTFT"} {
		if met, measured := checkMet(t, hostChecks(short, want), name); met {
			t.Errorf("one host turn failed: %s met (%s)", name, measured)
		}
	}
	unlike := report(100, 101, 5, 5)
	unlike.RequestBytes["host"] = 8121
	if met, _ := checkMet(t, hostChecks(unlike, want), "same model request"); met {
		t.Error("unlike requests: met")
	}
}

func TestWatchChecks(t *testing.T) {
	report := func(cpu, peak float64, polls int64) *watchBenchReport {
		return &watchBenchReport{Watches: 1000, IntervalSeconds: 45, DurationSeconds: 180, CPUPercent: cpu,
			PeakRSSMiB: peak, RSSMiB: peak, Polls: polls, Passes: 4}
	}
	tests := []struct {
		name, check string
		rep         *watchBenchReport
		met         bool
	}{
		{"CPU 1.99 %", "core", report(1.99, 30, 4000), true},
		{"CPU 2.00 %", "core", report(2.00, 30, 4000), false},
		{"CPU 2.01 %", "core", report(2.01, 30, 4000), false},
		{"RSS 49.9 MiB", "resident", report(0.2, 49.9, 4000), true},
		{"RSS 50.1 MiB", "resident", report(0.2, 50.1, 4000), false},
		{"every watch polled", "polled", report(0.2, 30, 1000), true},
		{"one watch not polled", "polled", report(0.2, 30, 999), false},
	}
	for _, tt := range tests {
		if met, measured := checkMet(t, watchChecks(tt.rep), tt.check); met != tt.met {
			t.Errorf("%s: met %v (%s), want %v", tt.name, met, measured, tt.met)
		}
	}
}

// The calendar/contacts verdicts: within 2 × C SQLite on the exact ratio,
// and 10 × data in at most 10 × time.
func TestPimVerdicts(t *testing.T) {
	for _, tt := range []struct {
		goMS, cMS float64
		rounded   float64
		within    bool
	}{
		{1.99, 1, 1.99, true},
		{2.00, 1, 2.00, true},
		{2.004, 1, 2.00, false}, // reads 2.00, is over
		{2.01, 1, 2.01, false},
	} {
		r, ok := pimRatioVsC(tt.goMS, tt.cMS)
		if r != tt.rounded || ok != tt.within {
			t.Errorf("pimRatioVsC(%v, %v) = %v, %v; want %v, %v", tt.goMS, tt.cMS, r, ok, tt.rounded, tt.within)
		}
	}
	scales := func(big float64) []pimScaleResult {
		return []pimScaleResult{
			{Scale: 1, Cases: []pimCaseResult{{Name: "q", Go: pimTiming{MedianMs: 1}}, {Name: "new"}}},
			{Scale: 10, Cases: []pimCaseResult{{Name: "q", Go: pimTiming{MedianMs: big}}, {Name: "new", Go: pimTiming{MedianMs: 1}}}},
		}
	}
	for _, tt := range []struct {
		big  float64
		want string
	}{
		{9.99, "(within ×10)"},
		{10.0, "(within ×10)"},
		{10.004, "(OVER ×10)"}, // reads ×10.00
		{10.1, "(OVER ×10)"},
	} {
		got := pimScaleChecks(scales(tt.big))
		if len(got) != 2 || !strings.HasPrefix(got[0], "q: ×10 data") || !strings.HasSuffix(got[0], tt.want) {
			t.Errorf("median ×%v: %q, want q … %s", tt.big, got, tt.want)
		}
		// A case with no base median is reported as over, not dropped.
		if len(got) == 2 && !strings.Contains(got[1], "OVER") {
			t.Errorf("no base median: %q", got[1])
		}
	}
}

// Failed requests are counted, and left out of the latencies that the
// percentiles and the throughput are computed from.
func TestRunBatchExcludesFailures(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "upstream down", http.StatusBadGateway)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	lat, wall, failed := runBatch(context.Background(), srv.Client(), srv.URL, 4, 40)
	if len(lat) != 20 || failed != 20 || wall <= 0 {
		t.Fatalf("%d latencies, %d failed, wall %s; want 20 and 20", len(lat), failed, wall)
	}
	for _, d := range lat {
		if d <= 0 {
			t.Fatalf("latency %s among the successes", d)
		}
	}
}
