package mirror

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// ageDirs sets the modification time of every cur/ and new/ directory under
// root to when, as for folders nobody touched since.
func ageDirs(t *testing.T, root string, when time.Time) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == "cur" || d.Name() == "new") {
			if err := os.Chtimes(p, when, when); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
}

func reconcile(t *testing.T, s *Store, opts SyncOptions) SyncStats {
	t.Helper()
	opts.Mode = Reconcile
	st, err := s.Sync(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func addN(t *testing.T, md *archive.Maildir, box, prefix string, n int, flags string) []string {
	t.Helper()
	var out []string
	for i := range n {
		out = append(out, mustAdd(t, md, box, archive.Message{ID: fmt.Sprintf("%s%d@x", prefix, i), From: "a@x.org",
			To: []string{"me@example.com"}, Subject: fmt.Sprintf("%s %d", prefix, i), Body: "hello", Date: day0.Add(time.Duration(i) * time.Minute)}, flags))
	}
	return out
}

// An unchanged Maildir folder is not listed again; every kind of change to
// it still reaches the mirror.
func TestReconcileSkipsUnchangedFolders(t *testing.T) {
	acct, md := maildirAccount(t, "m", false)
	s := openStore(t, acct)
	inbox := addN(t, md, "INBOX", "in", 3, "S")
	addN(t, md, "Archive", "ar", 4, "S")
	ageDirs(t, acct.Root, time.Now().Add(-time.Hour))

	st := reconcile(t, s, SyncOptions{})
	if st.New != 7 || st.Scanned != 7 || st.SkippedFolders != 0 || !st.Full {
		t.Fatalf("first reconcile: %+v", st)
	}
	st = reconcile(t, s, SyncOptions{})
	if st.Scanned != 0 || st.SkippedFolders != 4 || st.Full || st.New+st.Updated+st.Removed != 0 {
		t.Fatalf("unchanged tree: %+v, want nothing listed and 4 folders skipped", st)
	}

	cases := []struct {
		name   string
		change func()
		check  func(SyncStats)
	}{
		{"new message", func() { addN(t, md, "INBOX", "late", 1, "") }, func(st SyncStats) {
			if st.New != 1 || getMsg(t, s, "late0@x").mailbox != "INBOX" {
				t.Errorf("new message not picked up: %+v", st)
			}
		}},
		{"flag rename", func() {
			if err := os.Rename(inbox[0], strings.TrimSuffix(inbox[0], ":2,S")+":2,FS"); err != nil {
				t.Fatal(err)
			}
		}, func(st SyncStats) {
			if st.Renamed != 1 || !getMsg(t, s, "in0@x").flagged {
				t.Errorf("flag rename not picked up: %+v", st)
			}
		}},
		{"deletion", func() {
			if err := os.Remove(inbox[1]); err != nil {
				t.Fatal(err)
			}
		}, func(st SyncStats) {
			if st.Removed != 1 || st.SoftDeleted != 1 || !getMsg(t, s, "in1@x").deleted {
				t.Errorf("deletion not picked up: %+v", st)
			}
		}},
	}
	for _, c := range cases {
		c.change()
		st := reconcile(t, s, SyncOptions{})
		c.check(st)
		// The changed folder was listed; Archive's two were not.
		if st.SkippedFolders < 2 || st.Scanned == 0 {
			t.Errorf("%s: %+v, want Archive skipped and INBOX listed", c.name, st)
		}
		ageDirs(t, acct.Root, time.Now().Add(-time.Hour))
		reconcile(t, s, SyncOptions{}) // record the aged times
	}
	checkConsistent(t, s)

	st = reconcile(t, s, SyncOptions{Full: true})
	if !st.Full || st.SkippedFolders != 0 || st.Scanned != 7 {
		t.Errorf("--full: %+v, want every file listed", st)
	}
}

// A change within the timestamp granularity of the last scan leaves the
// folder's time as recorded; the folder must still be listed.
func TestReconcileSameSecondChange(t *testing.T) {
	acct, md := maildirAccount(t, "m", false)
	s := openStore(t, acct)
	addN(t, md, "INBOX", "in", 2, "S")
	cur := filepath.Join(acct.Root, "cur")
	st0, err := os.Stat(cur)
	if err != nil {
		t.Fatal(err)
	}
	reconcile(t, s, SyncOptions{}) // cur/ changed just now: recorded untrusted
	addN(t, md, "INBOX", "same", 1, "S")
	// The new file landed in the same timestamp tick as the last scan.
	if err := os.Chtimes(cur, st0.ModTime(), st0.ModTime()); err != nil {
		t.Fatal(err)
	}
	st := reconcile(t, s, SyncOptions{})
	if st.New != 1 || getMsg(t, s, "same0@x").deleted {
		t.Fatalf("same-tick change missed: %+v", st)
	}
}

// A reconcile lists every folder when the last full one is older than
// FullAfter, or there is none on record (as after a backfill); so does a
// folder a file event touched. An unchanged incremental reconcile writes
// nothing at all.
func TestReconcileFullPasses(t *testing.T) {
	acct, md := maildirAccount(t, "m", false)
	s := openStore(t, acct)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	addN(t, md, "INBOX", "in", 2, "S")
	ageDirs(t, acct.Root, time.Now().Add(-time.Hour))
	runSync(t, s, Backfill)
	if st := reconcile(t, s, SyncOptions{}); !st.Full || st.SkippedFolders != 0 || st.Scanned != 2 {
		t.Errorf("reconcile after a backfill: %+v, want a full one listing every folder", st)
	}
	var full []bool
	for _, step := range []time.Duration{time.Minute, DefaultFullAfter - 2*time.Minute, 2 * time.Minute, time.Minute, -time.Hour} {
		clock = clock.Add(step)
		full = append(full, reconcile(t, s, SyncOptions{}).Full)
	}
	// 1 min and 3 h 59 min after the full one: incremental; 4 h 1 min
	// after it: full; 1 min later incremental again; a clock set back an
	// hour (before the record): full.
	if fmt.Sprint(full) != "[false false true false true]" {
		t.Errorf("full passes %v, want [false false true false true]", full)
	}
	changes := func() (n int64) {
		t.Helper()
		if err := s.db.QueryRow("SELECT total_changes()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := changes()
	if st := reconcile(t, s, SyncOptions{}); st.Full || st.SkippedFolders == 0 || changes() != before {
		t.Errorf("unchanged incremental reconcile: %+v, %d row changes; want folders skipped and nothing written", st, changes()-before)
	}

	// A file event ingests a message into a folder nobody reconciled yet;
	// the folder then disappears at once. Its paths must still go.
	p := addN(t, md, "Fresh", "fr", 1, "S")[0]
	if _, err := s.IngestPaths(context.Background(), []string{p}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(md.Dir("Fresh")); err != nil {
		t.Fatal(err)
	}
	if st := reconcile(t, s, SyncOptions{FullAfter: -1}); st.Removed != 1 || !getMsg(t, s, "fr0@x").deleted {
		t.Errorf("message of a removed folder kept: %+v", st)
	}
	checkConsistent(t, s)
}

// TestHelperReconcile is not a test: TestKilledReconcileRescans runs it in
// a child process, which reconciles until it is killed.
func TestHelperReconcile(t *testing.T) {
	if os.Getenv("MAIL_RECONCILE_HELPER") != "1" {
		t.Skip("helper process for TestKilledReconcileRescans")
	}
	root, dir := os.Getenv("MAIL_KILL_ROOT"), os.Getenv("MAIL_KILL_DB")
	s, err := Open(context.Background(), Options{DBPath: filepath.Join(dir, "mail.db"), BlobDir: filepath.Join(dir, "blobs"),
		Accounts: []mail.Account{{Name: "k", Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto}}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	_, err = s.Sync(context.Background(), SyncOptions{Mode: Reconcile, Workers: 1, BatchSize: 20, ProgressEvery: time.Millisecond,
		Progress: func(p Progress) { fmt.Println("progress", p.Done) }})
	fmt.Println("finished", err)
	os.Exit(0)
}

// A reconcile SIGKILLed while ingesting a changed folder leaves that folder
// to be listed again: the next reconcile mirrors every message in it.
func TestKilledReconcileRescans(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	root := filepath.Join(t.TempDir(), "Maildir")
	md := &archive.Maildir{Root: root}
	dbDir := t.TempDir()
	acct := mail.Account{Name: "k", Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto}
	addN(t, md, "INBOX", "old", 3, "S")
	addN(t, md, "Archive", "ar", 3, "S")
	t0 := time.Now().Add(-2 * time.Hour)
	ageDirs(t, root, t0)
	open := func() *Store {
		s, err := Open(context.Background(), Options{DBPath: filepath.Join(dbDir, "mail.db"), BlobDir: filepath.Join(dbDir, "blobs"), Accounts: []mail.Account{acct}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	reconcile(t, s, SyncOptions{})
	s.Close()

	const n = 1500
	addN(t, md, "INBOX", "k", n, "S")
	ageDirs(t, root, time.Now().Add(-time.Hour)) // changed, and old enough to be trusted once listed
	ageDirs(t, md.Dir("Archive"), t0)            // untouched

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReconcile$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MAIL_RECONCILE_HELPER=1", "MAIL_KILL_ROOT="+root, "MAIL_KILL_DB="+dbDir)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	killed := false
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "finished") {
			break
		}
		if !killed && strings.HasPrefix(l, "progress") && !strings.HasSuffix(l, " 0") {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	deadline.Stop()
	cmd.Wait()
	if !killed {
		t.Fatal("reconcile finished before the kill landed")
	}

	s = open()
	defer s.Close()
	before := count(t, s, "SELECT count(*) FROM messages WHERE deleted_at IS NULL")
	if before >= n+6 {
		t.Fatalf("the killed reconcile mirrored all %d messages; nothing left to test", before)
	}
	st := reconcile(t, s, SyncOptions{})
	if st.SkippedFolders != 2 {
		t.Errorf("after the kill: %+v, want Archive's 2 folders skipped and INBOX listed", st)
	}
	if c := count(t, s, "SELECT count(*) FROM messages WHERE deleted_at IS NULL"); c != n+6 {
		t.Errorf("%d active messages after the kill and a reconcile, want %d (the killed run had %d)", c, n+6, before)
	}
	checkConsistent(t, s)
}

// TestOpenWritesOnlyWhatChanged: reopening the mirror with the same
// accounts leaves mail.db byte for byte as it was (a short-lived command
// pays no write), a changed account root is still recorded under the same
// account id, and index changes a killed writer left queued are applied.
func TestOpenWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	acct, md := maildirAccount(t, "work", false)
	mustAdd(t, md, "INBOX", archive.Message{From: "a@example.com", To: []string{"me@example.com"}, Subject: "hello", Body: "first", Date: day0}, "S")
	opts := Options{DBPath: filepath.Join(dir, "mail.db"), BlobDir: filepath.Join(dir, "blobs"), Accounts: []mail.Account{acct}}
	reopen := func(o Options) *Store {
		t.Helper()
		s, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := reopen(opts)
	runSync(t, s, Backfill)
	var id int64
	s.db.QueryRowContext(ctx, "SELECT id FROM accounts WHERE name = 'work'").Scan(&id)
	s.Close()
	// PRAGMA data_version on another connection changes with every commit
	// of a write by anyone else.
	watcher, err := sqlitedb.Open(ctx, opts.DBPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	conn, err := watcher.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dataVersion := func() (v int64) {
		t.Helper()
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := dataVersion()
	reopen(opts).Close()
	if after := dataVersion(); after != before {
		t.Errorf("reopening with unchanged accounts committed a write (data_version %d → %d)", before, after)
	}

	moved := acct
	moved.Root = filepath.Join(t.TempDir(), "elsewhere")
	opts.Accounts = []mail.Account{moved}
	s = reopen(opts)
	var id2 int64
	var root string
	s.db.QueryRowContext(ctx, "SELECT id, root FROM accounts WHERE name = 'work'").Scan(&id2, &root)
	if id2 != id || root != moved.Root {
		t.Errorf("account after a root change = %d %q, want %d %q", id2, root, id, moved.Root)
	}
	// A writer killed between queueing and flushing leaves rows behind.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO fts_queue(op, id, subject, sender, recipients, cc, body)
		VALUES('i', 4242, 'leftover', 'x@example.com', '', '', 'queued text')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = reopen(opts)
	defer s.Close()
	var queued int
	var hit int64
	s.db.QueryRowContext(ctx, "SELECT count(*) FROM fts_queue").Scan(&queued)
	s.db.QueryRowContext(ctx, "SELECT rowid FROM message_fts WHERE message_fts MATCH 'leftover'").Scan(&hit)
	if queued != 0 || hit != 4242 {
		t.Errorf("after reopen: %d queued, full-text hit %d, want 0 and 4242", queued, hit)
	}
}
