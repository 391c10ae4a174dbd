package mirror

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
)

// TestHelperBackfill is not a test: the SIGKILL test runs it in a child
// process, which backfills until it is killed.
func TestHelperBackfill(t *testing.T) {
	if os.Getenv("MAIL_KILL_HELPER") != "1" {
		t.Skip("helper process for TestKilledBackfillThenReconcile")
	}
	root, dir := os.Getenv("MAIL_KILL_ROOT"), os.Getenv("MAIL_KILL_DB")
	s, err := Open(context.Background(), Options{DBPath: filepath.Join(dir, "mail.db"), BlobDir: filepath.Join(dir, "blobs"),
		Accounts: []mail.Account{{Name: "k", Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto}}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	_, err = s.Sync(context.Background(), SyncOptions{Mode: Backfill, BatchSize: 40, ProgressEvery: 10 * time.Millisecond,
		Progress: func(p Progress) { fmt.Println("progress", p.Done) }})
	fmt.Println("finished", err)
	os.Exit(0)
}

// Killing a backfill with SIGKILL at random points and then reconciling
// leaves a complete, consistent mirror.
func TestKilledBackfillThenReconcile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	root := filepath.Join(t.TempDir(), "Maildir")
	md := &archive.Maildir{Root: root}
	const n = 2500
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < n; i++ {
		m := archive.Message{ID: fmt.Sprintf("k%d@x", i), From: fmt.Sprintf("p%d@x.org", i%37), To: []string{"me@example.com"},
			Subject: fmt.Sprintf("topic %d", i%300), Body: strings.Repeat(fmt.Sprintf("line %d of message %d\n", i, i), 20),
			Date: day0.Add(time.Duration(i) * time.Hour)}
		if i%3 == 0 && i > 0 {
			m.InReplyTo = fmt.Sprintf("k%d@x", i-1)
		}
		if i%10 == 0 {
			m.Attach = []archive.Attachment{{Name: "a.bin", Data: []byte(fmt.Sprintf("attachment %d", i%4))}}
		}
		box := "INBOX"
		if i%5 == 0 {
			box = "Archive"
		}
		mustAdd(t, md, box, m, "S")
		if i%25 == 0 {
			mustAdd(t, md, "All Mail", m, "S")
		}
	}
	dbDir := t.TempDir()
	kills := 0
	for attempt := 0; attempt < 8; attempt++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBackfill$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAIL_KILL_HELPER=1", "MAIL_KILL_ROOT="+root, "MAIL_KILL_DB="+dbDir)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		finished := false
		lines := make(chan string)
		go func() {
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill after the first progress line plus a random delay.
		var kill <-chan time.Time
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if strings.HasPrefix(l, "finished") {
					finished = true
				}
				if kill == nil && strings.HasPrefix(l, "progress") {
					kill = time.After(time.Duration(rng.Intn(120)) * time.Millisecond)
				}
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
				kills++
				kill = nil
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatal("helper hung")
			}
		}
		cmd.Wait()
		if finished {
			break
		}
	}
	if kills == 0 {
		t.Fatal("backfill finished before any kill landed")
	}
	s, err := Open(context.Background(), Options{DBPath: filepath.Join(dbDir, "mail.db"), BlobDir: filepath.Join(dbDir, "blobs"),
		Accounts: []mail.Account{{Name: "k", Kind: mail.KindMaildir, Root: root, Layout: mail.LayoutAuto}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runSync(t, s, Reconcile)
	checkConsistent(t, s)
	if c := count(t, s, "SELECT count(*) FROM messages WHERE deleted_at IS NULL"); c != n {
		t.Errorf("%d active messages, want %d (after %d kills)", c, n, kills)
	}
	if c := count(t, s, "SELECT count(*) FROM message_paths"); c != n+n/25 {
		t.Errorf("%d paths, want %d", c, n+n/25)
	}
	if c := count(t, s, "SELECT count(*) FROM attachments"); c != n/10 {
		t.Errorf("%d attachment rows, want %d", c, n/10)
	}
	for i := 0; i < 4; i++ {
		var sha string
		s.db.QueryRow("SELECT sha256 FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.message_id = ?", fmt.Sprintf("k%d@x", i*10+10)).Scan(&sha)
		if !s.Blobs().Has(sha) {
			t.Errorf("blob of k%d@x missing", i*10+10)
		}
	}
	// Reply chains survived the interruptions: k1 ← k2? (k3 replies to k2, k6 to k5 …)
	if getMsg(t, s, "k3@x").thread != getMsg(t, s, "k2@x").thread {
		t.Error("reply k3 → k2 not threaded")
	}
	t.Logf("%d kills", kills)
}
