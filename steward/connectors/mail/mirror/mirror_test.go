package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
	"github.com/agentstack/agentstack/steward/connectors/mail/message"
	"github.com/agentstack/agentstack/steward/connectors/mail/source"
)

const fixtures = "../../../../../shared/fixtures/email"

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The real fixtures mirror completely: every readable file becomes a
// message, partial bodies are classified, attachments land in the blob
// store once per content, and broken files are kept with what is usable.
func TestSyncRealFixtures(t *testing.T) {
	if _, err := os.Stat(fixtures); err != nil {
		t.Skip("shared fixtures absent")
	}
	root := t.TempDir()
	// An Apple Mail store: the partial-emlx converter's Messages/ and
	// Attachments/ inside an INBOX.mbox, plus the other .emlx fixtures.
	apple := filepath.Join(root, "V10", "ACCOUNT")
	copyTree(t, filepath.Join(fixtures, "emlx/partial-emlx-converter/input"), filepath.Join(apple, "INBOX.mbox", "UUID", "Data"))
	for _, dir := range []string{"terhechte-emlx", "mikez-emlx"} {
		copyTree(t, filepath.Join(fixtures, "emlx", dir), filepath.Join(apple, "Archive.mbox", dir, "Messages"))
	}
	// A Maildir holding every MIME fixture.
	md := filepath.Join(root, "Maildir")
	os.MkdirAll(filepath.Join(md, "cur"), 0o755)
	os.MkdirAll(filepath.Join(md, "new"), 0o755)
	n := 0
	for _, dir := range []string{"enmime-testdata/mail", "enmime-testdata/low-quality", "enmime-testdata/dsn/testdata", "nodemailer-mailparser"} {
		entries, _ := os.ReadDir(filepath.Join(fixtures, dir))
		for _, e := range entries {
			data, _ := os.ReadFile(filepath.Join(fixtures, dir, e.Name()))
			n++
			os.WriteFile(filepath.Join(md, "cur", fmt.Sprintf("%d.M%d.fixture:2,S", 1600000000+n, n)), data, 0o644)
		}
	}
	os.WriteFile(filepath.Join(md, "new", "1700000000.empty.fixture"), nil, 0o644)

	s := openStore(t,
		mail.Account{Name: "apple", Kind: mail.KindAppleMail, Root: filepath.Join(root, "V10")},
		mail.Account{Name: "maildir", Kind: mail.KindMaildir, Root: md, Layout: mail.LayoutAuto})
	st := runSync(t, s, Backfill)
	if st.Scanned != n+1+10+9 {
		t.Errorf("scanned %d files", st.Scanned)
	}
	if st.Errors != 1 {
		t.Errorf("errors %d, want 1 (the empty file)", st.Errors)
	}
	errs, _ := s.IngestErrors(context.Background(), 10)
	if len(errs) != 1 || !strings.HasSuffix(errs[0].Path, "1700000000.empty.fixture") || !strings.Contains(errs[0].Error, "empty") {
		t.Errorf("ingest errors %+v", errs)
	}
	// 114892–114895.partial.emlx and terhechte's 1.emlx are copies of one
	// message (one Message-ID): one row, five paths, and the full copy's body
	// wins over the partial ones whatever the order of ingestion.
	fwd := getMsg(t, s, "4BBE1408-23D6-49EB-A4E9-86D9871F7719@philippkatz.de")
	if fwd.paths != 5 || fwd.bodyState != "full" {
		t.Errorf("forwarded message: %+v", fwd)
	}
	stats, _ := s.Stats(context.Background())
	if stats.PartialBodies != 4 {
		t.Errorf("partial bodies %d, want 4", stats.PartialBodies)
	}
	// Attachments that Mail kept under Attachments/ are in the blob store.
	var sha string
	if err := s.db.QueryRow("SELECT sha256 FROM attachments WHERE filename = 'Tübingen.pdf'").Scan(&sha); err != nil || !s.Blobs().Has(sha) {
		t.Errorf("Tübingen.pdf blob %q: %v", sha, err)
	}
	// Subjects and bodies are searchable, including decoded Japanese.
	if ids := ftsIDs(t, s, "message_tri", `"研究会"`); len(ids) == 0 {
		t.Error("Japanese subject not found by trigram")
	}
	if ids := ftsIDs(t, s, "message_fts", `"easyhotel"`); len(ids) == 0 {
		t.Error("easyHotel not found by FTS")
	}
	checkConsistent(t, s)

	// A second backfill finds nothing to do; reconcile neither.
	if st := runSync(t, s, Backfill); st.New+st.Updated != 0 || st.Unchanged != st.Scanned {
		t.Errorf("second backfill %+v", st)
	}
	if st := runSync(t, s, Reconcile); st.New+st.Updated+st.Removed != 0 {
		t.Errorf("reconcile after backfill %+v", st)
	}
}

// Duplicate attachment content is stored once.
func TestAttachmentBlobsAreShared(t *testing.T) {
	acct, md := maildirAccount(t, "b", false)
	pdf := archive.Attachment{Name: "contract.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.7 the same bytes")}
	mustAdd(t, md, "INBOX", archive.Message{ID: "a1@x", From: "a@a", Subject: "one", Date: day0, Attach: []archive.Attachment{pdf}}, "S")
	renamed := pdf
	renamed.Name = "../../copy.pdf"
	mustAdd(t, md, "INBOX", archive.Message{ID: "a2@x", From: "a@a", Subject: "two", Date: day0, Attach: []archive.Attachment{renamed}}, "S")
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	rows, _ := s.db.Query("SELECT filename, sha256 FROM attachments ORDER BY filename")
	var names, shas []string
	for rows.Next() {
		var n, h string
		rows.Scan(&n, &h)
		names, shas = append(names, n), append(shas, h)
	}
	rows.Close()
	if len(shas) != 2 || shas[0] != shas[1] || names[0] != "contract.pdf" || names[1] != "copy.pdf" {
		t.Fatalf("attachments %q %q", names, shas)
	}
	files := 0
	filepath.Walk(filepath.Dir(filepath.Join(s.blobs.dir, "x")), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && filepath.Base(filepath.Dir(p)) != "tmp" {
			files++
		}
		return nil
	})
	if files != 1 {
		t.Errorf("%d blob files, want 1", files)
	}
	f, err := s.Blobs().Open(shas[0])
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 100)
	n, _ := f.Read(data)
	f.Close()
	if string(data[:n]) != string(pdf.Data) {
		t.Errorf("blob content %q", data[:n])
	}
}

// Malformed blob keys are refused by the key check itself: a file is planted
// where each key would resolve, so only the check stands between the key and
// an open file.
func TestBlobKeysAreValidated(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "home", "mail", "blobs")
	b, err := NewBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"../../planted",
		"ab/../../../planted-too",
		strings.Repeat("AB", 32), // right length, not lower-case hex
		strings.Repeat("a", 63),
	} {
		resolved := filepath.Join(dir, key[:2], key)
		if !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
			t.Fatalf("key %q resolves outside the test directory: %s", key, resolved)
		}
		if err := os.MkdirAll(filepath.Dir(resolved), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(resolved, []byte("planted"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := b.Open(key)
		if f != nil {
			f.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "is not a SHA-256 hex digest") {
			t.Errorf("Open(%q) = %v, want the malformed-key error", key, err)
		}
		if b.Has(key) {
			t.Errorf("Has(%q) = true for a malformed key", key)
		}
	}
}

func TestThreadRules(t *testing.T) {
	acct, md := maildirAccount(t, "work", false)
	at := func(d int) time.Time { return day0.Add(time.Duration(d) * 24 * time.Hour) }
	msgs := []struct {
		box string
		m   archive.Message
	}{
		// Gmail thread id groups messages with no reply headers.
		{"INBOX", archive.Message{ID: "g1@x", From: "ann@a.org", To: []string{"me@example.com"}, Subject: "Quarterly numbers", Date: at(0), GmThread: "777"}},
		{"INBOX", archive.Message{ID: "g2@x", From: "bob@b.org", To: []string{"me@example.com"}, Subject: "Totally different", Date: at(1), GmThread: "777"}},
		// Reply graph: the reply is newer, so a newest-first backfill stores it before its parent.
		{"INBOX", archive.Message{ID: "p1@x", From: "carl@c.org", To: []string{"me@example.com"}, Subject: "Lunch", Date: at(2)}},
		{"Sent", archive.Message{ID: "p2@x", From: "me@example.com", To: []string{"carl@c.org"}, Subject: "Re: Lunch plan?", Date: at(3), InReplyTo: "p1@x", References: []string{"p1@x"}}},
		{"INBOX", archive.Message{ID: "p3@x", From: "carl@c.org", To: []string{"me@example.com"}, Subject: "ok", Date: at(4), References: []string{"p1@x", "p2@x"}}},
		// Subject and a shared participant within ±14 days.
		{"INBOX", archive.Message{ID: "s1@x", From: "dora@d.org", To: []string{"me@example.com"}, Subject: "Budget 2026", Date: at(5)}},
		{"INBOX", archive.Message{ID: "s2@x", From: "dora@d.org", To: []string{"me@example.com"}, Subject: "RE: [fin] Fwd: budget  2026", Date: at(10)}},
		// Same subject, 30 days later: a new thread.
		{"INBOX", archive.Message{ID: "s3@x", From: "dora@d.org", To: []string{"me@example.com"}, Subject: "Re: Budget 2026", Date: at(40)}},
		// Same subject, in the window, but only my own address in common: a new thread.
		{"INBOX", archive.Message{ID: "s4@x", From: "eve@e.org", To: []string{"me@example.com"}, Subject: "Budget 2026", Date: at(6)}},
		// Nothing in common: a new thread.
		{"INBOX", archive.Message{ID: "n1@x", From: "fay@f.org", To: []string{"me@example.com"}, Subject: "Hello", Date: at(7)}},
	}
	for _, m := range msgs {
		mustAdd(t, md, m.box, m.m, "S")
	}
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	th := func(id string) int64 { return getMsg(t, s, id).thread }
	same := [][]string{{"g1@x", "g2@x"}, {"p1@x", "p2@x", "p3@x"}, {"s1@x", "s2@x"}}
	for _, group := range same {
		for _, id := range group[1:] {
			if th(id) != th(group[0]) {
				t.Errorf("%s and %s are in different threads", group[0], id)
			}
		}
	}
	distinct := []string{"g1@x", "p1@x", "s1@x", "s3@x", "s4@x", "n1@x"}
	seen := map[int64]string{}
	for _, id := range distinct {
		if other, dup := seen[th(id)]; dup {
			t.Errorf("%s and %s share a thread", id, other)
		}
		seen[th(id)] = id
	}
	// The thread table.
	var subj, parts string
	var first, last, n int64
	if err := s.db.QueryRow("SELECT subject_norm, participants, first_at, last_at, message_count FROM threads WHERE id = ?", th("p1@x")).
		Scan(&subj, &parts, &first, &last, &n); err != nil {
		t.Fatal(err)
	}
	if n != 3 || first != at(2).Unix() || last != at(4).Unix() || parts != "carl@c.org, me@example.com" {
		t.Errorf("lunch thread: subject %q participants %q first %d last %d count %d", subj, parts, first, last, n)
	}
	var norm string
	s.db.QueryRow("SELECT subject_norm FROM threads WHERE id = ?", th("s1@x")).Scan(&norm)
	if norm != "budget 2026" {
		t.Errorf("normalised subject %q", norm)
	}
	// Re-ingesting a known message (its file changed) keeps its thread even
	// though its new headers would point elsewhere.
	before := th("s2@x")
	p := filepath.Join(md.Dir("INBOX"), "cur")
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(p, e.Name()))
		if strings.Contains(string(data), "<s2@x>") {
			os.WriteFile(filepath.Join(p, e.Name()), []byte(strings.Replace(string(data), "budget  2026", "something else", 1)+"\r\n"), 0o644)
		}
	}
	if st := runSync(t, s, Reconcile); st.Updated != 1 {
		t.Errorf("reconcile after edit: %+v", st)
	}
	if th("s2@x") != before {
		t.Error("re-ingested message changed thread")
	}
	checkConsistent(t, s)
}

func TestPathsAttributionAndSoftDelete(t *testing.T) {
	acct, md := maildirAccount(t, "gmail", false)
	m := archive.Message{ID: "dup@x", From: "ann@a.org", To: []string{"me@example.com"}, Subject: "Invoice 42", Body: "renewable energy invoice", Date: day0}
	all := mustAdd(t, md, "[Gmail]/All Mail", m, "S")
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	if r := getMsg(t, s, "dup@x"); r.mailbox != "[Gmail]/All Mail" || r.paths != 1 {
		t.Fatalf("after All Mail only: %+v", r)
	}
	// The Inbox copy is more specific: it takes the attribution.
	inbox := mustAdd(t, md, "INBOX", m, "FS")
	runSync(t, s, Reconcile)
	r := getMsg(t, s, "dup@x")
	if r.mailbox != "INBOX" || r.paths != 2 || !r.flagged {
		t.Fatalf("after Inbox copy: %+v", r)
	}
	// A changed All Mail copy never overwrites the Inbox-attributed row.
	changed := m
	changed.Subject = "Spoofed subject"
	os.WriteFile(all, archive.Render(changed), 0o644)
	os.Chtimes(all, day0.Add(time.Hour), day0.Add(time.Hour))
	if st := runSync(t, s, Reconcile); st.PathOnly != 1 {
		t.Errorf("All Mail re-ingest: %+v", st)
	}
	if r := getMsg(t, s, "dup@x"); r.subject != "Invoice 42" || r.mailbox != "INBOX" {
		t.Errorf("All Mail copy overwrote the row: %+v", r)
	}
	// Inbox copy deleted: the message survives in All Mail.
	os.Remove(inbox)
	runSync(t, s, Reconcile)
	if r := getMsg(t, s, "dup@x"); r.deleted || r.paths != 1 || r.mailbox != "[Gmail]/All Mail" {
		t.Fatalf("after Inbox delete: %+v", r)
	}
	if ids := ftsIDs(t, s, "message_fts", `"renewable"`); len(ids) != 1 {
		t.Errorf("FTS hits %v", ids)
	}
	// Last path gone: soft-deleted, out of the indexes, thread count zero.
	os.Remove(all)
	st := runSync(t, s, Reconcile)
	if st.SoftDeleted != 1 || st.Removed != 1 {
		t.Errorf("final reconcile %+v", st)
	}
	r = getMsg(t, s, "dup@x")
	if !r.deleted || r.paths != 0 {
		t.Fatalf("after last delete: %+v", r)
	}
	if ids := ftsIDs(t, s, "message_fts", `"renewable"`); len(ids) != 0 {
		t.Errorf("deleted message still in FTS: %v", ids)
	}
	if c := count(t, s, "SELECT message_count FROM threads WHERE id = ?", r.thread); c != 0 {
		t.Errorf("thread count %d", c)
	}
	checkConsistent(t, s)
	// It comes back when a copy reappears.
	mustAdd(t, md, "Archive", m, "S")
	runSync(t, s, Reconcile)
	if r := getMsg(t, s, "dup@x"); r.deleted || r.mailbox != "Archive" || r.id != getMsg(t, s, "dup@x").id {
		t.Errorf("revived: %+v", r)
	}
	checkConsistent(t, s)
}

func TestFlagRenameIsCheap(t *testing.T) {
	acct, md := maildirAccount(t, "pp", true)
	p := mustAdd(t, md, "INBOX", archive.Message{ID: "f@x", From: "a@a", Subject: "flags", Date: day0}, "")
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	before := getMsg(t, s, "f@x")
	if before.seen {
		t.Fatal("message in new/ is seen")
	}
	// A client reads and flags it: new/name → cur/name:2,FS
	dst := filepath.Join(filepath.Dir(filepath.Dir(p)), "cur", filepath.Base(p)+":2,FS")
	if err := os.Rename(p, dst); err != nil {
		t.Fatal(err)
	}
	st := runSync(t, s, Reconcile)
	if st.Renamed != 1 || st.New+st.Updated+st.Removed != 0 {
		t.Errorf("reconcile %+v", st)
	}
	after := getMsg(t, s, "f@x")
	if !after.seen || !after.flagged || after.id != before.id || after.paths != 1 {
		t.Errorf("after rename %+v", after)
	}
	checkConsistent(t, s)
}

// A message without Message-ID gets a surrogate identity that survives a
// flag rename and is distinct per file.
func TestSurrogateIdentity(t *testing.T) {
	acct, md := maildirAccount(t, "x", false)
	p1 := mustAdd(t, md, "INBOX", archive.Message{From: "a@a", Subject: "no id one", Date: day0}, "S")
	mustAdd(t, md, "INBOX", archive.Message{From: "a@a", Subject: "no id two", Date: day0}, "S")
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	if c := count(t, s, "SELECT count(*) FROM messages WHERE identity LIKE 'local:%'"); c != 2 {
		t.Fatalf("surrogates %d", c)
	}
	os.Rename(p1, strings.Replace(p1, ":2,S", ":2,RS", 1))
	runSync(t, s, Reconcile)
	if c := count(t, s, "SELECT count(*) FROM messages"); c != 2 {
		t.Errorf("messages after rename %d", c)
	}
	checkConsistent(t, s)
}

func TestAppleMailPartialToFull(t *testing.T) {
	root := filepath.Join(t.TempDir(), "V10")
	acct := mail.Account{Name: "apple", Kind: mail.KindAppleMail, Root: root}
	m := archive.Message{ID: "ap@x", From: "a@a", Subject: "report", Body: "short", Date: day0,
		Attach: []archive.Attachment{{Name: "r.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4 data")}}}
	partial, err := archive.WriteApple(root, "INBOX", 7, m, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	if r := getMsg(t, s, "ap@x"); r.bodyState != "partial" || r.attachment != 1 {
		t.Fatalf("partial: %+v", r)
	}
	// Mail downloads the message: the .partial.emlx becomes a .emlx.
	os.Remove(partial)
	if _, err := archive.WriteApple(root, "INBOX", 7, m, 1, false); err != nil {
		t.Fatal(err)
	}
	runSync(t, s, Reconcile)
	r := getMsg(t, s, "ap@x")
	if r.bodyState != "full" || r.deleted || !r.seen || r.paths != 1 {
		t.Errorf("after download: %+v", r)
	}
	checkConsistent(t, s)
}

// A folder that cannot be read is not mistaken for deleted mail.
func TestUnreadableAccountKeepsMessages(t *testing.T) {
	acct, md := maildirAccount(t, "gone", false)
	mustAdd(t, md, "INBOX", archive.Message{ID: "keep@x", From: "a@a", Subject: "keep", Date: day0}, "S")
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	os.Rename(acct.Root, acct.Root+".unmounted")
	st := runSync(t, s, Reconcile)
	if len(st.Unreadable) != 1 || st.Removed != 0 {
		t.Errorf("reconcile %+v", st)
	}
	if r := getMsg(t, s, "keep@x"); r.deleted || r.paths != 1 {
		t.Errorf("message lost: %+v", r)
	}
}

func TestIngestPaths(t *testing.T) {
	acct, md := maildirAccount(t, "w", false)
	s := openStore(t, acct)
	p := mustAdd(t, md, "INBOX", archive.Message{ID: "w@x", From: "a@a", Subject: "watched", Date: day0}, "S")
	st, err := s.IngestPaths(context.Background(), []string{p, "/elsewhere/not/ours"})
	if err != nil || st.New != 1 {
		t.Fatalf("ingest %+v %v", st, err)
	}
	os.Remove(p)
	st, err = s.IngestPaths(context.Background(), []string{p})
	if err != nil || st.Removed != 1 {
		t.Fatalf("remove %+v %v", st, err)
	}
	if r := getMsg(t, s, "w@x"); !r.deleted {
		t.Error("not soft-deleted")
	}
	checkConsistent(t, s)
}

func TestWatchPicksUpNewMail(t *testing.T) {
	acct, md := maildirAccount(t, "live", true)
	mustAdd(t, md, "INBOX", archive.Message{ID: "old@x", From: "a@a", Subject: "old", Date: day0}, "S")
	s := openStore(t, acct)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan SyncStats, 16)
	done := make(chan error, 1)
	on := true
	go func() {
		done <- s.Watch(ctx, WatchOptions{Reconcile: time.Hour, Debounce: 50 * time.Millisecond, Events: &on,
			OnSync: func(st SyncStats, err error) { synced <- st }})
	}()
	wait := func(what string, ok func(SyncStats) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case st := <-synced:
				if ok(st) {
					return
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("initial reconcile", func(st SyncStats) bool { return st.Mode == "reconcile" && st.New == 1 })
	mustAdd(t, md, "INBOX", archive.Message{ID: "new@x", From: "b@b", Subject: "fresh", Date: day0.Add(time.Hour)}, "")
	wait("event ingest", func(st SyncStats) bool { return st.Mode == "watch" && st.New == 1 })
	// A folder created after the watch started is watched too.
	mustAdd(t, md, "Receipts", archive.Message{ID: "r@x", From: "c@c", Subject: "receipt", Date: day0.Add(2 * time.Hour)}, "S")
	wait("new folder", func(st SyncStats) bool { return st.Mode == "watch" && st.New == 1 })
	if r := getMsg(t, s, "r@x"); r.mailbox != "Receipts" {
		t.Errorf("mailbox %q", r.mailbox)
	}
	cancel()
	<-done
}

func TestReindexRebuildsFromRows(t *testing.T) {
	acct, md := maildirAccount(t, "r", false)
	for i := 0; i < 20; i++ {
		mustAdd(t, md, "INBOX", archive.Message{ID: fmt.Sprintf("r%d@x", i), From: "a@a", Subject: fmt.Sprintf("topic %d", i),
			Body: "photovoltaic certification", Date: day0.Add(time.Duration(i) * time.Hour)}, "S")
	}
	s := openStore(t, acct)
	runSync(t, s, Backfill)
	want := ftsIDs(t, s, "message_fts", `"photovoltaic"`)
	// Damage the derived data: empty both text indexes and the thread counts.
	s.db.Exec("INSERT INTO message_fts(message_fts) VALUES('delete-all')")
	s.db.Exec("INSERT INTO message_tri(message_tri) VALUES('delete-all')")
	s.db.Exec("UPDATE threads SET message_count = 0")
	st, err := s.Reindex(context.Background(), ReindexOptions{})
	if err != nil || st.Messages != 20 {
		t.Fatalf("reindex %+v %v", st, err)
	}
	if got := ftsIDs(t, s, "message_fts", `"photovoltaic"`); len(got) != len(want) || len(got) != 20 {
		t.Errorf("FTS after reindex %d, want %d", len(got), len(want))
	}
	if got := ftsIDs(t, s, "message_tri", `"ovolta"`); len(got) != 20 {
		t.Errorf("trigram after reindex %d", len(got))
	}
	checkConsistent(t, s)
}

func TestNormalizeSubject(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Re: Budget", "budget"},
		{"RE: Fwd: AW: budget", "budget"},
		{"Re[2]: [team] Città   nuova", "citta nuova"},
		{"R: I: offerta", "offerta"},
		{"Rebate offer", "rebate offer"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := NormalizeSubject(tt.in); got != tt.want {
			t.Errorf("NormalizeSubject(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A file whose rows cannot be written is recorded as an ingest error and
// the other files of its batch are kept.
func TestBatchWriterKeepsTheRestOfABatch(t *testing.T) {
	acct, md := maildirAccount(t, "b", false)
	p1 := mustAdd(t, md, "INBOX", archive.Message{ID: "ok1@x", From: "a@a", Subject: "one", Date: day0}, "S")
	p2 := mustAdd(t, md, "INBOX", archive.Message{ID: "ok2@x", From: "a@a", Subject: "two", Date: day0}, "S")
	s := openStore(t, acct)
	read := func(p string) parsed {
		e, err := source.EntryForPath(&acct, p)
		if err != nil {
			t.Fatal(err)
		}
		it, err := source.Read(e, message.Options{})
		return parsed{e: e, it: it, err: err}
	}
	ghost := read(p1)
	ghost.it.Account = "ghost" // not configured: applyItem fails
	ghost.e.Path = "/ghost/1"
	var stats SyncStats
	w := &batchWriter{s: s, stats: &stats}
	ctx := context.Background()
	for _, r := range []parsed{read(p1), ghost, read(p2)} {
		if err := w.apply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.commit(ctx); err != nil {
		t.Fatal(err)
	}
	if stats.New != 2 || stats.Errors != 1 {
		t.Errorf("stats %+v", stats)
	}
	if getMsg(t, s, "ok1@x").deleted || getMsg(t, s, "ok2@x").deleted {
		t.Error("good files lost")
	}
	errs, _ := s.IngestErrors(ctx, 5)
	if len(errs) != 1 || errs[0].Path != "/ghost/1" || !strings.Contains(errs[0].Error, "not configured") {
		t.Errorf("ingest errors %+v", errs)
	}
	checkConsistent(t, s)
}

// An interrupted backfill keeps its committed batches and the next run
// ingests only the rest.
func TestBackfillResumes(t *testing.T) {
	acct, md := maildirAccount(t, "r", false)
	for i := 0; i < 300; i++ {
		mustAdd(t, md, "INBOX", archive.Message{ID: fmt.Sprintf("r%d@x", i), From: "a@a", Subject: fmt.Sprintf("s%d", i),
			Date: day0.Add(time.Duration(i) * time.Minute)}, "S")
	}
	s := openStore(t, acct)
	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	_, err := s.Sync(ctx, SyncOptions{Mode: Backfill, BatchSize: 50, Workers: 1, ProgressEvery: time.Nanosecond, Progress: func(p Progress) {
		lines = append(lines, p.String())
		if p.Done >= 120 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	committed := count(t, s, "SELECT count(*) FROM messages")
	if committed < 100 || committed >= 300 || committed%50 != 0 {
		t.Fatalf("%d messages committed", committed)
	}
	// Newest first: what was committed is the most recent mail.
	if c := count(t, s, "SELECT count(*) FROM messages WHERE message_id = 'r299@x'"); c != 1 {
		t.Error("the newest message was not among the first ingested")
	}
	st := runSync(t, s, Backfill)
	if st.New != 300-committed || st.Unchanged != committed {
		t.Errorf("resume %+v after %d committed", st, committed)
	}
	if !strings.HasPrefix(lines[0], "backfill: ") || !strings.Contains(lines[0], "/300 (") || !strings.Contains(lines[0], "msg/s, ETA") {
		t.Errorf("progress line %q", lines[0])
	}
	checkConsistent(t, s)
}
