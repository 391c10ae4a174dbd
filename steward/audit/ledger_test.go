package audit_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/redact"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
)

func openLedger(t *testing.T, opts audit.Options) (*audit.Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := audit.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func flush(t *testing.T, l *audit.Ledger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard only
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

const secret = "Zq8VnX2pLr5Tw9Ks" // planted in many shapes below; must never reach the file

func TestRedactedBeforeStorage(t *testing.T) {
	l, path := openLedger(t, audit.Options{})
	ctx := context.Background()
	l.Record(ctx, audit.Event{
		Actor:   audit.ActorAgent,
		Type:    audit.TypeToolResult,
		Risk:    audit.RiskMedium,
		ChatID:  "chat-1",
		Tool:    "mcp__shell__run",
		Summary: "ran curl -H 'Authorization: Bearer " + secret + "'",
		Payload: map[string]any{
			"args": map[string]any{
				"password": secret,
				"env":      []any{"API_KEY=" + secret, "HOME=/home/anna"},
				"url":      "https://anna:" + secret + "@example.com/x?access_token=" + secret,
			},
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("ok ", 100) + " sk-" + secret + secret}}},
			"key":    "-----BEGIN PRIVATE KEY-----\n" + secret + "\n-----END PRIVATE KEY-----",
		},
		Refs: []audit.Ref{{Kind: "url", ID: "https://bob:" + secret + "@example.org/"}, {Kind: "file", ID: "tok-1", Title: "notes.txt"}},
	})
	flush(t, l)

	// The raw files (database and write-ahead log) hold no trace of it.
	for _, f := range []string{path, path + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secret[:8])) {
			t.Errorf("%s contains the planted secret", filepath.Base(f))
		}
	}
	// And the stored row is the redacted form.
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var summary, payload, refs string
	if err := db.QueryRow(`SELECT summary, payload, refs FROM events`).Scan(&summary, &payload, &refs); err != nil {
		t.Fatal(err)
	}
	if want := "ran curl -H 'Authorization: [REDACTED]'"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}
	var p struct {
		Args struct {
			Password string   `json:"password"`
			Env      []string `json:"env"`
			URL      string   `json:"url"`
		} `json:"args"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		t.Fatalf("payload %q: %v", payload, err)
	}
	if p.Args.Password != redact.Mask || p.Args.Env[0] != "API_KEY=[REDACTED]" || p.Args.Env[1] != "HOME=/home/anna" ||
		p.Args.URL != "https://[REDACTED]@example.com/x?access_token=[REDACTED]" || p.Key != redact.MaskPrivateKey {
		t.Errorf("payload not redacted as expected: %s", payload)
	}
	if text := p.Result.Content[0].Text; len([]rune(text)) > redact.SnippetLen || !strings.HasSuffix(text, "…") {
		t.Errorf("content text not a snippet: %q", text)
	}
	if want := `[{"kind":"url","id":"https://[REDACTED]@example.org/"},{"kind":"file","id":"tok-1","title":"notes.txt"}]`; refs != want {
		t.Errorf("refs = %s, want %s", refs, want)
	}
	if st := l.Stats(); st.Written != 1 || st.Queued != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// seed records a fixed set of events an hour apart, oldest first, and
// returns the base time.
func seed(t *testing.T, l *audit.Ledger) time.Time {
	t.Helper()
	base := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i, e := range []audit.Event{
		{Actor: "user", Type: audit.TypeChatMessage, ChatID: "c1", Summary: "e0 Book the Milano train"},
		{Actor: "assistant", Type: audit.TypeChatMessage, ChatID: "c1", Summary: "e1 Found three trains",
			Payload: map[string]any{"text": "Frecciarossa 9521 leaves at 10:05"}},
		{Actor: "agent", Type: audit.TypeToolDecision, Risk: audit.RiskMedium, ChatID: "c1", Tool: "mcp__mail__send_mail",
			Summary: "e2 gate", Payload: map[string]any{"decision": "gate"}},
		{Actor: "host", Type: audit.TypeApprovalRequest, Risk: audit.RiskHigh, ChatID: "c1", Tool: "mcp__mail__send_mail",
			Correlation: "req-7", Summary: "e3 approval requested"},
		{Actor: "user", Type: audit.TypeApprovalResponse, Risk: audit.RiskHigh, ChatID: "c1", Tool: "mcp__mail__send_mail",
			Correlation: "req-7", Summary: "e4 approved", Payload: map[string]any{"decision": "approve", "note": "50% off, ok"}},
		{Actor: "host", Type: audit.TypeSessionConnect, Summary: "e5 client connected", Payload: map[string]any{"client": "Città phone"}},
		{Actor: "scheduler", Type: audit.TypeToolResult, Risk: audit.RiskLow, ChatID: "c2", Tool: "mcp__calendar__sync",
			Summary: "e6 sync ok"},
		{Actor: "watch", Type: audit.TypeApprovalTimeout, Risk: audit.RiskMedium, ChatID: "c2", Summary: "e7 timed out"},
	} {
		e.Time = base.Add(time.Duration(i) * time.Hour)
		l.Record(context.Background(), e)
	}
	flush(t, l)
	return base
}

// names returns the "eN" prefixes of the summaries, in page order.
func names(events []audit.Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, strings.Fields(e.Summary)[0])
	}
	return out
}

func TestQueryFilters(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	base := seed(t, l)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		f    audit.Filter
		want []string
	}{
		{"all, newest first", audit.Filter{}, []string{"e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"}},
		{"actor", audit.Filter{Actor: "user"}, []string{"e4", "e0"}},
		{"type", audit.Filter{Type: audit.TypeChatMessage}, []string{"e1", "e0"}},
		{"risk high", audit.Filter{Risk: audit.RiskHigh}, []string{"e4", "e3"}},
		{"risk low includes the default", audit.Filter{Risk: audit.RiskLow}, []string{"e6", "e5", "e1", "e0"}},
		{"chat", audit.Filter{ChatID: "c2"}, []string{"e7", "e6"}},
		{"tool", audit.Filter{Tool: "mcp__mail__send_mail"}, []string{"e4", "e3", "e2"}},
		{"correlation", audit.Filter{Correlation: "req-7"}, []string{"e4", "e3"}},
		{"from inclusive", audit.Filter{From: base.Add(6 * time.Hour)}, []string{"e7", "e6"}},
		{"to exclusive", audit.Filter{To: base.Add(2 * time.Hour)}, []string{"e1", "e0"}},
		{"range", audit.Filter{From: base.Add(2 * time.Hour), To: base.Add(4 * time.Hour)}, []string{"e3", "e2"}},
		{"combined", audit.Filter{ChatID: "c1", Risk: audit.RiskHigh, Actor: "host"}, []string{"e3"}},
		{"no match", audit.Filter{Actor: "nobody"}, []string{}},
		{"limit", audit.Filter{Limit: 3}, []string{"e7", "e6", "e5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := l.Query(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(page.Events); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueryText(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	seed(t, l)
	l.Record(context.Background(), audit.Event{Actor: "user", Type: audit.TypeChatMessage, Summary: "e8 my password=" + secret})
	flush(t, l)
	for _, tc := range []struct {
		name, q string
		want    []string
	}{
		{"word in summary", "milano", []string{"e0"}},
		{"substring in payload", "cciaros", []string{"e1"}},
		{"case-insensitive", "FRECCIAROSSA", []string{"e1"}},
		{"every term must match", "approv e4", []string{"e4"}},
		{"short term uses LIKE", "ok", []string{"e6", "e4", "e0"}},
		{"LIKE wildcards are literal", "0%", []string{"e4"}},
		{"underscore literal", "l_s", []string{}},
		{"unicode", "città", []string{"e5"}},
		{"the tool column is not searched", "mcp__calendar", []string{}},
		{"quotes are literal", `"gate"`, []string{"e2"}},
		{"FTS syntax is matched literally", `"gate" OR NEAR(x`, []string{}},
		{"quote inside a term", `ga"te`, []string{}},
		{"a redacted secret cannot be found", secret, []string{}},
		{"the mask can", "[REDACTED]", []string{"e8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := l.Query(context.Background(), audit.Filter{Text: tc.q})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(page.Events); !slices.Equal(got, tc.want) {
				t.Errorf("q=%q: got %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestQueryPagination(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	ctx := context.Background()
	at := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	// Groups of events share a millisecond, so the cursor must break ties by id.
	for i := range 25 {
		l.Record(ctx, audit.Event{Actor: "host", Type: "test.page", Time: at.Add(time.Duration(i/4) * time.Second), Summary: fmt.Sprint(i)})
	}
	flush(t, l)
	var got []string
	var pages int
	f := audit.Filter{Limit: 10}
	for {
		page, err := l.Query(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Events {
			got = append(got, e.Summary)
		}
		if page.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		f.Before = page.Next
	}
	var want []string
	for i := 24; i >= 0; i-- {
		want = append(want, fmt.Sprint(i))
	}
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages: %v\nwant 3 pages: %v", pages, got, want)
	}
	if _, err := l.Query(ctx, audit.Filter{Before: "nope"}); err == nil {
		t.Error("a malformed cursor was accepted")
	}
}

// Limits are clamped in the Go API: one event more than MaxLimit gives a
// full page, a continuation and the last event on the next page.
func TestQueryLimitIsClamped(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	ctx := context.Background()
	at := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	for i := range audit.MaxLimit + 1 {
		l.Record(ctx, audit.Event{Actor: "host", Type: "test.clamp", Time: at.Add(time.Duration(i) * time.Millisecond), Summary: fmt.Sprint(i)})
	}
	flush(t, l)
	page, err := l.Query(ctx, audit.Filter{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != audit.MaxLimit || page.Next == "" {
		t.Fatalf("limit over the max: %d events, next %q; want %d and a continuation", len(page.Events), page.Next, audit.MaxLimit)
	}
	rest, err := l.Query(ctx, audit.Filter{Limit: 10_000, Before: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Events) != 1 || rest.Events[0].Summary != "0" || rest.Next != "" {
		t.Errorf("second page: %d events (%v), next %q; want only the oldest event", len(rest.Events), names(rest.Events), rest.Next)
	}
	if page, err := l.Query(ctx, audit.Filter{}); err != nil || len(page.Events) != audit.DefaultLimit {
		t.Errorf("no limit: %d events, %v; want %d", len(page.Events), err, audit.DefaultLimit)
	}
}

func TestGet(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	seed(t, l)
	ctx := context.Background()
	page, _ := l.Query(ctx, audit.Filter{Correlation: "req-7", Type: audit.TypeApprovalResponse})
	if len(page.Events) != 1 {
		t.Fatalf("setup: %d events", len(page.Events))
	}
	e, err := l.Get(ctx, page.Events[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Summary != "e4 approved" || e.Risk != audit.RiskHigh || e.Actor != "user" || e.Tool != "mcp__mail__send_mail" ||
		string(e.Payload.(json.RawMessage)) != `{"decision":"approve","note":"50% off, ok"}` ||
		!e.Time.Equal(time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("event = %+v payload %s", e, e.Payload)
	}
	if _, err := l.Get(ctx, 9999); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing id: %v", err)
	}
}

func TestDefaultsAndRisk(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	l.Record(ctx, audit.Event{Summary: "no actor, type, risk or time"})
	l.Record(ctx, audit.Event{Actor: "host", Type: "x.y", Risk: "critical", Summary: "typo risk"})
	flush(t, l)
	page, err := l.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	typo, plain := page.Events[0], page.Events[1]
	if typo.Summary != "typo risk" {
		typo, plain = plain, typo
	}
	if plain.Actor != "unknown" || plain.Type != "unknown" || plain.Risk != audit.RiskLow || plain.Time.Before(before) || plain.Payload != nil {
		t.Errorf("defaults: %+v", plain)
	}
	if typo.Risk != audit.RiskHigh {
		t.Errorf("unknown risk stored as %q, want high", typo.Risk)
	}
}

func TestPayloadSizeBound(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	big := map[string]any{}
	for i := range 99 {
		arr := make([]any, 49)
		for j := range arr {
			arr[j] = strings.Repeat("z", 700)
		}
		big[fmt.Sprintf("k%02d", i)] = arr
	}
	l.Record(context.Background(), audit.Event{Actor: "host", Type: "x.big", Payload: big})
	flush(t, l)
	page, _ := l.Query(context.Background(), audit.Filter{})
	raw := page.Events[0].Payload.(json.RawMessage)
	var note map[string]string
	if err := json.Unmarshal(raw, &note); err != nil {
		t.Fatal(err)
	}
	if len(raw) > audit.MaxPayloadBytes || !strings.Contains(note[redact.TruncatedKey], "exceeds the 64 KiB audit limit") ||
		!strings.HasPrefix(note["preview"], `{"k00":["zzz`) {
		t.Errorf("oversized payload stored as %.300s", raw)
	}
}

func TestSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := audit.Open(ctx, path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		l.Record(ctx, audit.Event{Actor: "host", Type: "x.n", Summary: fmt.Sprint(i)})
	}
	if err := l.Close(); err != nil { // Close drains the queue
		t.Fatal(err)
	}
	l, err = audit.Open(ctx, path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	page, err := l.Query(ctx, audit.Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 300 {
		t.Fatalf("%d events after reopen, want 300", len(page.Events))
	}
}

func TestAppendOnly(t *testing.T) {
	l, path := openLedger(t, audit.Options{})
	l.Record(context.Background(), audit.Event{Actor: "host", Type: "x.n", Summary: "original"})
	flush(t, l)
	db, err := sql.Open("sqlite", path) // a second, independent writer
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE events SET summary = 'forged'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("update allowed: %v", err)
	}
}

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

func TestRecordSurvivesAPanickingPayload(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	l.Record(context.Background(), audit.Event{Actor: "host", Type: "x.panic", Payload: panicky{}})
	l.Record(context.Background(), audit.Event{Actor: "host", Type: "x.fine"})
	flush(t, l)
	if st := l.Stats(); st.Dropped != 1 || st.Written != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestClosedAndNilLedger(t *testing.T) {
	l, _ := openLedger(t, audit.Options{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Record(context.Background(), audit.Event{Type: "late"}) // must not panic
	if st := l.Stats(); st.Dropped != 1 {
		t.Errorf("record after close: %+v", st)
	}
	if err := l.Flush(context.Background()); err != audit.ErrClosed {
		t.Errorf("flush after close = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second close = %v", err)
	}

	var none *audit.Ledger // what a host keeps when audit.db cannot be opened
	none.Record(context.Background(), audit.Event{Type: "x"})
	if err := none.Flush(context.Background()); err != nil {
		t.Error(err)
	}
	if page, err := none.Query(context.Background(), audit.Filter{}); err != nil || len(page.Events) != 0 {
		t.Errorf("nil query = %v, %v", page, err)
	}
	if err := none.Close(); err != nil {
		t.Error(err)
	}
}

func TestOpenFailureIsClear(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "home")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := audit.Open(context.Background(), filepath.Join(blocker, "audit.db"), audit.Options{})
	if err == nil || !strings.Contains(err.Error(), "open audit ledger") {
		t.Fatalf("err = %v", err)
	}
}
