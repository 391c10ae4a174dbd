package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openTestStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "action-center", "actions.db"), Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

func testMailItem(thread int, at time.Time) Item {
	args, _ := json.Marshal(map[string]any{"messageId": thread, "body": "Yes, Thursday works."})
	return Item{SourceKey: fmt.Sprintf("mail:thread:%d", thread), Kind: "reply-needed", Title: fmt.Sprintf("Reply to thread %d", thread),
		Summary: "someone asks", Priority: PriorityNormal, SourceAt: at,
		Proposal: []Alternative{{Summary: "reply", Confidence: 0.8, Steps: []Step{{Label: "Send reply", Type: "tool", Tool: "mcp__mail__reply_email", Args: args}}}},
		Snapshot: Snapshot{Rationale: "asked a question"}}
}

func TestUpsertHandledItemsAreSticky(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	t0 := c.t.Add(-time.Hour)
	id, out, err := s.Upsert(ctx, testMailItem(1, t0), false)
	if err != nil || out != Created {
		t.Fatalf("create: %v %v", out, err)
	}
	if err := s.SetStatus(ctx, id, StatusDone); err != nil {
		t.Fatal(err)
	}
	// The same activity again (a rescan) leaves it done.
	for _, at := range []time.Time{t0, t0.Add(-time.Minute)} {
		if _, out, err := s.Upsert(ctx, testMailItem(1, at), false); err != nil || out != Unchanged {
			t.Fatalf("rescan at %v: %v %v", at, out, err)
		}
		if it, _ := s.Get(ctx, id); it.Status != StatusDone {
			t.Fatalf("done item became %s", it.Status)
		}
	}
	// A genuinely newer message reopens it.
	if _, out, err := s.Upsert(ctx, testMailItem(1, t0.Add(time.Minute)), false); err != nil || out != Reopened {
		t.Fatalf("newer: %v %v", out, err)
	}
	if it, _ := s.Get(ctx, id); it.Status != StatusNew {
		t.Fatalf("after newer message status %s", it.Status)
	}
	// keepStatus (calendar) updates content but never reopens.
	s.SetStatus(ctx, id, StatusDismissed)
	it := testMailItem(1, t0.Add(time.Hour))
	it.Title = "moved"
	if _, out, _ := s.Upsert(ctx, it, true); out != Updated {
		t.Fatalf("keepStatus outcome %v", out)
	}
	got, _ := s.Get(ctx, id)
	if got.Status != StatusDismissed || got.Title != "moved" {
		t.Fatalf("keepStatus: %+v", got)
	}
}

func TestListClampsAndFilters(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	for i := 0; i < 130; i++ {
		it := testMailItem(i, c.t)
		switch {
		case i < 10:
			past := c.t.Add(-time.Hour)
			it.DueAt = &past
		case i < 15:
			future := c.t.Add(time.Hour)
			it.DueAt = &future
		}
		id, _, err := s.Upsert(ctx, it, false)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 120 {
			s.SetStatus(ctx, id, StatusDone)
		}
	}
	for _, tc := range []struct {
		name    string
		opts    ListOptions
		want    int
		visible int // countsVisible[new]
	}{
		{"default limit", ListOptions{}, 20, 120},
		{"1000 clamped to 100", ListOptions{Limit: 1000}, 100, 120},
		{"negative clamped to 1", ListOptions{Limit: -5}, 1, 120},
		{"hide expired before the limit", ListOptions{Limit: 100, HideExpired: true}, 100, 110},
		{"done only", ListOptions{Status: StatusDone, Limit: 100}, 10, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.List(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Items) != tc.want {
				t.Fatalf("items %d, want %d", len(res.Items), tc.want)
			}
			if res.CountsTotal[StatusNew] != 120 || res.CountsTotal[StatusDone] != 10 || res.Counts[StatusNew] != 120 {
				t.Fatalf("total counts %v legacy %v", res.CountsTotal, res.Counts)
			}
			if res.CountsVisible[StatusNew] != tc.visible {
				t.Fatalf("visible new %d, want %d", res.CountsVisible[StatusNew], tc.visible)
			}
			for _, it := range res.Items {
				if it.Proposal != nil {
					t.Fatal("payload returned without IncludePayload")
				}
				if tc.opts.HideExpired && it.DueAt != nil && it.DueAt.Before(c.t) {
					t.Fatalf("expired item %d listed", it.ID)
				}
			}
		})
	}
	res, _ := s.List(ctx, ListOptions{IncludeHandled: true, Limit: 100, IncludePayload: true})
	if res.CountsVisible[StatusDone] != 10 || len(res.Items[0].Proposal) != 1 || res.Items[0].Proposal[0].Steps[0].Tool != "mcp__mail__reply_email" {
		t.Fatalf("payload list: %v %+v", res.CountsVisible, res.Items[0].Proposal)
	}
	if _, err := s.List(ctx, ListOptions{Status: "open"}); err == nil {
		t.Fatal("unknown status accepted")
	}
}

func TestSeenLedgerAndMarkRead(t *testing.T) {
	ctx := context.Background()
	s, c := openTestStore(t)
	if err := s.MarkSeen(ctx, "thread:1", "no-action", "a@x", "b@x"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"a@x": true, "b@x": true, "c@x": false} {
		if got, err := s.Seen(ctx, id); err != nil || got != want {
			t.Fatalf("seen %s = %v %v", id, got, err)
		}
	}
	id, _, _ := s.Upsert(ctx, testMailItem(3, c.t), false)
	s.MarkRead(ctx, id)
	if it, _ := s.Get(ctx, id); it.Status != StatusRead {
		t.Fatalf("status %s", it.Status)
	}
	s.SetStatus(ctx, id, StatusDone)
	s.MarkRead(ctx, id) // selecting a done item leaves it done
	if it, _ := s.Get(ctx, id); it.Status != StatusDone {
		t.Fatalf("status %s", it.Status)
	}
	if err := s.SetStatus(ctx, id, "closed"); err == nil {
		t.Fatal("unknown status accepted")
	}
	if err := s.SetStatus(ctx, 999, StatusDone); err == nil {
		t.Fatal("missing item accepted")
	}
}

func TestFlowsVersionedAndRetrieved(t *testing.T) {
	ctx := context.Background()
	s, _ := openTestStore(t)
	f, err := s.CreateFlow(ctx, Flow{Name: "Expense receipts", Trigger: "purchase confirmation or order receipt from a shop",
		Guidance: "forward the receipt to accounting@company.example", Exclusions: "personal purchases"})
	if err != nil || f.Version != 1 || !f.Enabled {
		t.Fatalf("create: %+v %v", f, err)
	}
	if _, err := s.CreateFlow(ctx, Flow{Name: "", Trigger: "x", Guidance: "y"}); err == nil {
		t.Fatal("flow without a name accepted")
	}
	other, _ := s.CreateFlow(ctx, Flow{Name: "Train delays", Trigger: "train delay refund", Guidance: "claim a refund"})
	got, err := s.RetrieveFlows(ctx, "Your order confirmation: purchase of a laptop", nil)
	if err != nil || len(got) != 1 || got[0].ID != f.ID {
		t.Fatalf("retrieve: %+v %v", got, err)
	}
	g := "forward to finance@company.example"
	f2, err := s.UpdateFlow(ctx, f.ID, FlowUpdate{Guidance: &g})
	if err != nil || f2.Version != 2 {
		t.Fatalf("update: %+v %v", f2, err)
	}
	old, err := s.FlowVersion(ctx, f.ID, 1)
	if err != nil || old.Guidance != "forward the receipt to accounting@company.example" {
		t.Fatalf("version 1: %+v %v", old, err)
	}
	off := false
	if f3, _ := s.UpdateFlow(ctx, f.ID, FlowUpdate{Enabled: &off}); f3.Version != 2 {
		t.Fatalf("disabling made a version: %d", f3.Version)
	}
	if got, _ := s.RetrieveFlows(ctx, "order confirmation purchase", nil); len(got) != 0 {
		t.Fatalf("disabled flow retrieved: %+v", got)
	}
	if err := s.DeleteFlow(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if fl, _ := s.Flows(ctx, false); len(fl) != 1 {
		t.Fatalf("flows after delete: %+v", fl)
	}
}

// TestCountsMatchRows checks item_counts (kept by the writers for inserts,
// by triggers for status changes and deletes) against COUNT(*) after every
// kind of write, including a batch that fails half-way and a cancelled one,
// and after reopening the file.
func TestCountsMatchRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "actions.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		res, err := s.List(ctx, ListOptions{IncludeHandled: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Counts{StatusNew: 0, StatusRead: 0, StatusDone: 0, StatusDismissed: 0}
		rows, err := s.DB().QueryContext(ctx, `SELECT status, count(*) FROM items GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var st Status
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				t.Fatal(err)
			}
			want[st] = n
		}
		if fmt.Sprint(res.CountsTotal) != fmt.Sprint(want) {
			t.Fatalf("%s: counts %v, rows %v", step, res.CountsTotal, want)
		}
	}
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	batch := func(from, n int) []Item {
		var items []Item
		for i := from; i < from+n; i++ {
			items = append(items, testMailItem(i, at))
		}
		return items
	}
	if c, _, _, err := s.UpsertBatch(ctx, batch(0, 50), false); err != nil || c != 50 {
		t.Fatalf("batch: %d %v", c, err)
	}
	check("batch insert")
	if _, out, err := s.Upsert(ctx, testMailItem(100, at), false); err != nil || out != Created {
		t.Fatalf("upsert: %v %v", out, err)
	}
	check("single insert")
	for id, st := range map[int64]Status{1: StatusDone, 2: StatusDismissed, 3: StatusRead, 4: StatusDone} {
		if err := s.SetStatus(ctx, id, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkRead(ctx, 5); err != nil {
		t.Fatal(err)
	}
	check("status changes")
	// Newer activity reopens a done item; a mixed batch creates and updates.
	if _, out, err := s.Upsert(ctx, testMailItem(0, at.Add(time.Hour)), false); err != nil || out != Reopened {
		t.Fatalf("reopen: %v %v", out, err)
	}
	// Key 55 twice: created, then updated by its second, newer occurrence.
	mixed := append(batch(40, 20), testMailItem(3, at.Add(time.Hour)), testMailItem(55, at.Add(2*time.Hour)))
	if c, u, _, err := s.UpsertBatch(ctx, mixed, false); err != nil || c != 10 || u != 12 {
		t.Fatalf("mixed batch: %d created %d updated %v", c, u, err)
	}
	check("reopen and mixed batch")
	if it, err := s.BySource(ctx, "mail:thread:55"); err != nil || !it.SourceAt.Equal(at.Add(2*time.Hour)) {
		t.Fatalf("key twice in a batch: %+v %v", it, err)
	}
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM items WHERE id IN (2, 6, 7)`); err != nil {
		t.Fatal(err)
	}
	check("deletes")
	// A batch failing on its last item rolls back its rows and their count.
	bad := append(batch(200, 30), Item{SourceKey: "mail:thread:bad", Kind: "reply-needed"})
	if _, _, _, err := s.UpsertBatch(ctx, bad, false); err == nil {
		t.Fatal("a batch with an untitled item was stored")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := s.UpsertBatch(cctx, batch(300, 30), false); err == nil {
		t.Fatal("a cancelled batch was stored")
	}
	if _, err := s.BySource(ctx, "mail:thread:200"); err == nil {
		t.Fatal("a rolled-back batch left a row")
	}
	check("rolled-back batches")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	check("reopened")
	if c, _, _, err := s.UpsertBatch(ctx, batch(400, 5), true); err != nil || c != 5 {
		t.Fatalf("batch after reopen: %d %v", c, err)
	}
	check("insert after reopen")
}
