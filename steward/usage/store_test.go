package usage_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/usage"
)

func openStore(t *testing.T) (*usage.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := usage.Open(context.Background(), path, usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func req(id, service, action string, at time.Time, in, out, cr int, outcome gateway.Outcome) gateway.RequestRecord {
	return gateway.RequestRecord{ID: id, Time: at, Service: service, Action: action, Endpoint: "chat", PublicModel: "tier-5",
		Provider: "deepseek", UpstreamModel: "flash", Outcome: outcome, Status: 200,
		Tokens: llm.Tokens{Input: in, Output: out, CacheRead: cr}, CostUSD: 99, Latency: 120 * time.Millisecond}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestReport(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	now := time.Now()
	s.RecordRequest(ctx, req("1", "host", "chat", now.Add(-time.Hour), 1_000_000, 100_000, 0, gateway.OutcomeOK))
	s.RecordRequest(ctx, req("2", "mail-promoter", "triage", now.Add(-2*time.Hour), 500_000, 0, 200_000, gateway.OutcomeOK))
	s.RecordRequest(ctx, req("3", "unknown", "unknown", now.Add(-3*time.Hour), 2_000_000, 0, 0, gateway.OutcomeOK))
	s.RecordRequest(ctx, req("old", "host", "chat", now.AddDate(0, 0, -10), 1_000_000, 0, 0, gateway.OutcomeOK))
	s.RecordAttempt(ctx, gateway.AttemptRecord{RequestID: "1", Seq: 1, Provider: "deepseek", Outcome: gateway.OutcomeRetryable, Status: 503})
	s.RecordTool(ctx, usage.ToolCall{Service: "host", Action: "chat", Tool: "mcp__mail__search_mail", Duration: 30 * time.Millisecond, OK: true})
	s.RecordTool(ctx, usage.ToolCall{Service: "host", Action: "chat", Tool: "mcp__mail__search_mail", Duration: 90 * time.Millisecond, OK: false, Error: "boom"})
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rates := map[string]gateway.Rate{"deepseek/flash": {Input: 0.27, Output: 1.10, CacheRead: 0.07}}
	since, _ := usage.ParsePeriod("7d", now)
	rep, err := s.Report(ctx, usage.ReportOptions{Since: since, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != 3 {
		t.Fatalf("requests in 7d = %d, want 3 (the 10-day-old row excluded)", rep.Total.Requests)
	}
	// Attempts are never counted as usage.
	wantCost := (1_000_000*0.27 + 100_000*1.10 + 500_000*0.27 + 200_000*0.07 + 2_000_000*0.27) / 1e6
	if !near(rep.Total.CostUSD, wantCost) {
		t.Errorf("cost = %v, want %v (priced by current rates, not the recorded 99)", rep.Total.CostUSD, wantCost)
	}
	if !near(rep.ByTokenType.CacheRead, 200_000*0.07/1e6) || !near(rep.ByTokenType.Output, 0.11) {
		t.Errorf("by token type = %+v", rep.ByTokenType)
	}
	if rep.Unlabelled.Requests != 1 || !near(rep.Unlabelled.CostUSD, 2*0.27) {
		t.Errorf("unlabelled = %+v", rep.Unlabelled)
	}
	if len(rep.ByService) != 3 || rep.ByService[0].Key != "unknown" {
		t.Errorf("by service = %+v (most expensive first)", rep.ByService)
	}
	keys := map[string]bool{}
	for _, g := range rep.ByAction {
		keys[g.Key] = true
	}
	if !keys["host/chat"] || !keys["mail-promoter/triage"] {
		t.Errorf("by action = %+v", rep.ByAction)
	}
	if len(rep.ByModel) != 1 || rep.ByModel[0].Key != "deepseek/flash" || rep.ByModel[0].Public != "tier-5" || rep.ByModel[0].Requests != 3 {
		t.Errorf("by model = %+v", rep.ByModel)
	}
	if len(rep.ByDay) == 0 {
		t.Error("no day breakdown")
	}
	if len(rep.Tools) != 1 || rep.Tools[0].Calls != 2 || rep.Tools[0].Errors != 1 || rep.Tools[0].MaxMS != 90 || rep.Tools[0].AvgMS != 60 {
		t.Errorf("tools = %+v", rep.Tools)
	}
	if len(rep.Recent) != 3 || rep.Recent[0].Service != "host" {
		t.Errorf("recent = %+v (newest first)", rep.Recent)
	}

	// Without a rate the recorded cost stands.
	all, err := s.Report(ctx, usage.ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Total.Requests != 4 || !near(all.Total.CostUSD, 4*99) {
		t.Errorf("all-time unpriced = %+v", all.Total)
	}
}

func TestLedgerSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := usage.Open(ctx, path, usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		s.RecordRequest(ctx, req(fmt.Sprintf("r%d", i), "host", "chat", time.Now(), 1, 1, 0, gateway.OutcomeOK))
	}
	if err := s.Close(); err != nil { // Close drains the queue
		t.Fatal(err)
	}
	s, err = usage.Open(ctx, path, usage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Report(ctx, usage.ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != 500 {
		t.Fatalf("rows after reopen = %d, want 500", rep.Total.Requests)
	}
}

func TestParsePeriod(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{"24h": now.Add(-24 * time.Hour), "7d": now.AddDate(0, 0, -7), "30d": now.AddDate(0, 0, -30), "all": {}} {
		got, err := usage.ParsePeriod(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParsePeriod(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := usage.ParsePeriod("week", now); err == nil {
		t.Error("accepted an unknown period")
	}
}
