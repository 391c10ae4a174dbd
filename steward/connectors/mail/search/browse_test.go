package search

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
)

// browseArchive mirrors 600 messages, one an hour, oldest first. Every
// seventh message from the 50th on replies to one of 20 thread roots, so
// threads have members on many pages.
func browseArchive(t *testing.T) (*Engine, func(i int) string, func(i int) int) {
	t.Helper()
	dir := t.TempDir()
	acct := mail.Account{Name: "big", Kind: mail.KindMaildir, Root: filepath.Join(dir, "Maildir"), Layout: mail.LayoutAuto}
	md := &archive.Maildir{Root: acct.Root}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	msgID := func(i int) string { return fmt.Sprintf("m%03d@browse", i) }
	// thread returns the root index of message i's thread (i itself when alone).
	thread := func(i int) int {
		if i >= 50 && i%7 == 0 {
			return i % 20
		}
		return i
	}
	for i := 0; i < 600; i++ {
		m := archive.Message{ID: msgID(i), From: fmt.Sprintf("sender%d@example.com", i%13), To: []string{"me@example.com"},
			Subject: fmt.Sprintf("Message %d", i), Body: fmt.Sprintf("Body of message %d.", i), Date: start.Add(time.Duration(i) * time.Hour)}
		if r := thread(i); r != i {
			m.Subject, m.InReplyTo, m.References = fmt.Sprintf("Re: Message %d", r), msgID(r), []string{msgID(r)}
		}
		if _, err := md.Add("INBOX", m, "S"); err != nil {
			t.Fatal(err)
		}
	}
	dbPath := filepath.Join(dir, "mail.db")
	s, err := mirror.Open(context.Background(), mirror.Options{DBPath: dbPath, BlobDir: filepath.Join(dir, "blobs"), Accounts: []mail.Account{acct}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Sync(context.Background(), mirror.SyncOptions{Mode: mirror.Backfill}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dbPath: dbPath}
	return f.engine(t, Options{}), msgID, thread
}

// walk follows nextOffset from offset 0 and returns every summary seen and
// the last page.
func walk(t *testing.T, e *Engine, q Query) ([]Summary, Page) {
	t.Helper()
	var all []Summary
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		r, err := e.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.Messages...)
		if r.Page.NextOffset == nil {
			return all, r.Page
		}
		if *r.Page.NextOffset != q.Offset+len(r.Messages) {
			t.Fatalf("offset %d returned %d messages but nextOffset %d", q.Offset, len(r.Messages), *r.Page.NextOffset)
		}
		q.Offset = *r.Page.NextOffset
	}
}

func messageID(t *testing.T, s Summary) string {
	t.Helper()
	u, err := url.PathUnescape(strings.TrimPrefix(s.MailURL, "message://"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(u, "<>")
}

func TestBrowsePagesThroughTheWholeWindow(t *testing.T) {
	e, msgID, thread := browseArchive(t)
	ctx := context.Background()

	// Offset 100 and beyond used to come back empty.
	r, err := e.Search(ctx, Query{PerMessage: true, Offset: 100, Limit: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 12 || messageID(t, r.Messages[0]) != msgID(599-100) || r.Page.Window != 500 {
		t.Fatalf("offset 100: %d messages, page %+v", len(r.Messages), r.Page)
	}

	// Per message: exactly the 500 newest, newest first, then the window ends.
	all, last := walk(t, e, Query{PerMessage: true, Limit: 12})
	if len(all) != 500 {
		t.Fatalf("browsing returned %d messages, want the 500-row window", len(all))
	}
	for k, s := range all {
		if got, want := messageID(t, s), msgID(599-k); got != want {
			t.Fatalf("row %d is %s, want %s", k, got, want)
		}
	}
	if !last.BeyondWindow || last.HasMore || !strings.Contains(last.Notice, "500 newest") {
		t.Errorf("last page does not say the window is full: %+v", last)
	}
	r, err = e.Search(ctx, Query{PerMessage: true, Offset: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 0 || !r.Page.BeyondWindow || r.Page.Total != 500 || !strings.Contains(r.Page.Notice, "narrow") {
		t.Errorf("offset 500 (the 501st message) is beyond the window: %d messages, page %+v", len(r.Messages), r.Page)
	}

	// Collapsed: one row per thread across all pages, each the thread's
	// newest message in the window, in window order.
	all, last = walk(t, e, Query{Limit: 12})
	var want []string
	seen := map[int]bool{}
	for i := 599; i >= 100; i-- {
		if r := thread(i); !seen[r] {
			seen[r] = true
			want = append(want, msgID(i))
		}
	}
	if len(all) != len(want) || last.Total != len(want) {
		t.Fatalf("collapsed browsing returned %d rows (total %d), want %d threads", len(all), last.Total, len(want))
	}
	threads := map[string]bool{}
	for k, s := range all {
		if got := messageID(t, s); got != want[k] {
			t.Fatalf("collapsed row %d is %s, want %s", k, got, want[k])
		}
		if s.ThreadID == "" || threads[s.ThreadID] {
			t.Fatalf("thread %q of row %d repeats or is missing", s.ThreadID, k)
		}
		threads[s.ThreadID] = true
	}
	if !last.BeyondWindow {
		t.Errorf("collapsed last page does not say older messages exist: %+v", last)
	}

	// A filter that matches fewer than 500 messages fills no window.
	all, last = walk(t, e, Query{PerMessage: true, Sender: "sender3@", Limit: 12})
	if len(all) != 46 || last.BeyondWindow || last.Notice != "" {
		t.Errorf("filtered browse: %d messages, page %+v", len(all), last)
	}
}
