package mirror

import (
	"context"
	"database/sql"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

var day0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func openStore(t *testing.T, accts ...mail.Account) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(context.Background(), Options{DBPath: filepath.Join(dir, "mail.db"), BlobDir: filepath.Join(dir, "blobs"), Accounts: accts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func maildirAccount(t *testing.T, name string, plusplus bool) (mail.Account, *archive.Maildir) {
	t.Helper()
	root := filepath.Join(t.TempDir(), name)
	return mail.Account{Name: name, Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto, Addresses: []string{"me@example.com"}},
		&archive.Maildir{Root: root, PlusPlus: plusplus}
}

func mustAdd(t *testing.T, md *archive.Maildir, mailbox string, m archive.Message, flags string) string {
	t.Helper()
	p, err := md.Add(mailbox, m, flags)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runSync(t *testing.T, s *Store, mode Mode) SyncStats {
	t.Helper()
	st, err := s.Sync(context.Background(), SyncOptions{Mode: mode})
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	return st
}

// msgRow is a message as tests inspect it.
type msgRow struct {
	id, thread        int64
	mailbox, subject  string
	bodyState         string
	seen, flagged     bool
	deleted           bool
	paths, attachment int
}

func getMsg(t *testing.T, s *Store, messageID string) msgRow {
	t.Helper()
	var r msgRow
	var thread sql.NullInt64
	var deleted sql.NullInt64
	err := s.db.QueryRow(`SELECT m.id, m.thread_id, b.name, m.subject, m.body_state, m.seen, m.flagged, m.deleted_at,
		(SELECT count(*) FROM message_paths p WHERE p.message_id = m.id), (SELECT count(*) FROM attachments a WHERE a.message_id = m.id)
		FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.message_id = ?`, messageID).
		Scan(&r.id, &thread, &r.mailbox, &r.subject, &r.bodyState, &r.seen, &r.flagged, &deleted, &r.paths, &r.attachment)
	if err != nil {
		t.Fatalf("message %s: %v", messageID, err)
	}
	r.thread, r.deleted = thread.Int64, deleted.Valid
	return r
}

func ftsIDs(t *testing.T, s *Store, table, q string) []int64 {
	t.Helper()
	rows, err := s.db.Query("SELECT rowid FROM "+table+" WHERE "+table+" MATCH ?", q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func count(t *testing.T, s *Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// checkConsistent asserts the invariants a mirror must keep after any
// sequence of syncs, crashes and reconciles.
func checkConsistent(t *testing.T, s *Store) {
	t.Helper()
	var ok string
	if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %v %s", err, ok)
	}
	active := count(t, s, "SELECT count(*) FROM messages WHERE deleted_at IS NULL")
	if n := count(t, s, "SELECT count(*) FROM message_fts_docsize"); n != active {
		t.Errorf("FTS holds %d documents for %d active messages", n, active)
	}
	if n := count(t, s, "SELECT count(*) FROM message_tri_docsize"); n != active {
		t.Errorf("trigram index holds %d documents for %d active messages", n, active)
	}
	if n := count(t, s, "SELECT count(*) FROM messages m WHERE deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = m.id)"); n != 0 {
		t.Errorf("%d active messages have no path", n)
	}
	if n := count(t, s, "SELECT count(*) FROM message_paths p JOIN messages m ON m.id = p.message_id WHERE m.deleted_at IS NOT NULL"); n != 0 {
		t.Errorf("%d paths point at deleted messages", n)
	}
	if n := count(t, s, "SELECT coalesce(sum(message_count), 0) FROM threads"); n != active {
		t.Errorf("threads count %d messages, %d are active", n, active)
	}
	if n := count(t, s, "SELECT count(*) FROM messages WHERE thread_id IS NULL"); n != 0 {
		t.Errorf("%d messages without a thread", n)
	}
}
