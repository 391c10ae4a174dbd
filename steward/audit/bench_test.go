package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/audit"
)

func toolEvent(i int) audit.Event {
	return audit.Event{
		Actor: audit.ActorAgent, Type: audit.TypeToolResult, Risk: audit.RiskLow,
		ChatID: fmt.Sprintf("chat-%d", i%50), Tool: "mcp__mail__search_mail",
		Summary: fmt.Sprintf("search_mail returned %d threads", i%17),
		Payload: map[string]any{
			"args":   map[string]any{"query": fmt.Sprintf("invoice %d from acme", i), "limit": 20},
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("Subject: Invoice ", 20)}}},
		},
	}
}

// BenchmarkRecord measures what a turn pays per audit event: redaction and
// a non-blocking enqueue (the writer stores in the background).
func BenchmarkRecord(b *testing.B) {
	l, err := audit.Open(context.Background(), filepath.Join(b.TempDir(), "audit.db"), audit.Options{QueueSize: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := toolEvent(1)
	for b.Loop() {
		l.Record(context.Background(), ev)
	}
	b.StopTimer()
	l.Flush(context.Background())
	b.ReportMetric(float64(l.Stats().Dropped), "dropped")
}

// BenchmarkSearch compares the free-text query (trigram FTS5) with the LIKE
// scan it replaces, over a ledger of 50,000 events.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "audit.db")
	l, err := audit.Open(ctx, path, audit.Options{QueueSize: 1 << 17})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 50_000
	for i := range n {
		l.Record(ctx, toolEvent(i))
	}
	if err := l.Flush(ctx); err != nil || l.Stats().Written != n {
		b.Fatalf("seed: %v %+v", err, l.Stats())
	}
	b.Run("fts", func(b *testing.B) {
		for b.Loop() {
			page, err := l.Query(ctx, audit.Filter{Text: "invoice 4242 from"})
			if err != nil || len(page.Events) != 15 { // 4242, 14242, …, 42420–42429
				b.Fatalf("%v %d", err, len(page.Events))
			}
		}
	})
	// The same three terms as LIKE conditions: the scan this index replaces.
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	where := []string{}
	var args []any
	for _, term := range []string{"invoice", "4242", "from"} {
		where = append(where, "(summary LIKE ? OR payload LIKE ?)")
		args = append(args, "%"+term+"%", "%"+term+"%")
	}
	q := "SELECT count(*) FROM (SELECT id FROM events WHERE " + strings.Join(where, " AND ") + " ORDER BY ts DESC, id DESC LIMIT 101)"
	b.Run("like", func(b *testing.B) {
		for b.Loop() {
			var count int
			if err := db.QueryRow(q, args...).Scan(&count); err != nil || count != 15 {
				b.Fatalf("%v %d", err, count)
			}
		}
	})
	b.Run("fts-rare-term", func(b *testing.B) {
		for b.Loop() {
			page, err := l.Query(ctx, audit.Filter{Text: "42424"})
			if err != nil || len(page.Events) != 1 {
				b.Fatalf("%v %d", err, len(page.Events))
			}
		}
	})
}

// BenchmarkWrite measures the background writer: one op is 1,000 events
// recorded and flushed to disk (FTS index included).
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	l, err := audit.Open(ctx, filepath.Join(b.TempDir(), "audit.db"), audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for b.Loop() {
		for i := range 1000 {
			l.Record(ctx, toolEvent(i))
		}
		if err := l.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if st := l.Stats(); st.Dropped != 0 || st.Failed != 0 {
		b.Fatalf("stats %+v", st)
	}
}
