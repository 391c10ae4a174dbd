package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/agentstack/agentstack/sqlitedb" // the sqlite driver
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/writeops"
)

// holdProxy forwards loopback connections to target, but only once the
// test releases each one, so a test can act while a sender is connected
// and its message has not yet reached the server.
type holdProxy struct {
	port    int
	target  string
	conns   chan *heldConn
	closers sync.WaitGroup
}

type heldConn struct {
	c       net.Conn
	release chan bool // true: forward; false: drop
}

func startHoldProxy(t *testing.T, target string) *holdProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{port: l.Addr().(*net.TCPAddr).Port, target: target, conns: make(chan *heldConn, 16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h := &heldConn{c: c, release: make(chan bool, 1)}
			p.conns <- h
			go func() {
				defer c.Close()
				if !<-h.release {
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return p
}

func (p *holdProxy) next(t *testing.T) *heldConn {
	t.Helper()
	select {
	case h := <-p.conns:
		return h
	case <-time.After(60 * time.Second):
		t.Fatal("no SMTP connection within 60 s")
		return nil
	}
}

// writesHome prepares STEWARD_HOME with one Maildir account that submits
// through smtpPort, small confirmation limits and no embeddings.
func writesHome(t *testing.T, smtpPort int) (home string, env *cliEnv) {
	t.Helper()
	vars := map[string]string{}
	env, _, _ = testEnv(t, vars)
	home = vars["STEWARD_HOME"]
	root := filepath.Join(home, "Maildir")
	for _, d := range []string{"cur", "new", "tmp"} {
		os.MkdirAll(filepath.Join(root, d), 0o700)
	}
	os.WriteFile(filepath.Join(root, "cur", "1.seed:2,S"), []byte("From: a@example.org\r\nTo: me@example.com\r\nSubject: seed\r\nMessage-ID: <seed@example.org>\r\nDate: Mon, 2 Mar 2026 09:00:00 +0000\r\n\r\nseed\r\n"), 0o600)
	yaml := fmt.Sprintf("accounts:\n  - name: personal\n    kind: maildir\n    root: %s\n    addresses: [me@example.com]\n    smtp: {host: 127.0.0.1, port: %d, security: none}\n", root, smtpPort)
	os.WriteFile(filepath.Join(home, "mail.yaml"), []byte(yaml), 0o600)
	// The tests run each job themselves: a scheduler in their serve would
	// race them, and its mail-distill and action-center runs would take
	// the scripted model replies queued for the chat.
	os.WriteFile(filepath.Join(home, "config.env"), []byte("WRITE_OP_MAIL_MAX_CONFIRM_ATTEMPTS=3\nWRITE_OP_STARTED_STALE_MS=1000\n"+
		"MAIL_EMBED_ENDPOINT=off\nMAIL_CLASSIFY_ENDPOINT=off\nSTEWARD_SCHEDULER=off\n"), 0o600)
	if err := mailReconcile(context.Background(), env, nil); err != nil {
		t.Fatal(err)
	}
	return home, env
}

// childEnv is the environment of a steward child process (this test binary).
func childEnv(home string) []string {
	return []string{"STEWARD_HOME=" + home, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

func opsDB(t *testing.T, home string) *sql.DB {
	// A plain connection (no migrations of its own), as another process
	// would hold one; immediate transactions take the write lock at BEGIN.
	os.MkdirAll(filepath.Dir(writeops.Path(home)), 0o700)
	db, err := sql.Open("sqlite", "file:"+writeops.Path(home)+"?_pragma=busy_timeout(60000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func stateOf(t *testing.T, db *sql.DB, subjectLike string) (id string, state writeops.State, attempts int) {
	t.Helper()
	db.QueryRow(`SELECT id, state, attempts FROM ops WHERE summary LIKE ?`, "%"+subjectLike).Scan(&id, &state, &attempts)
	return
}

// TestNoDoubleSendUnderSIGKILL kills the sending process — the mail MCP
// connector for send_email, `steward writeops send-due` for scheduled mail —
// before SMTP, after SMTP but before the journal update, and after the
// journal update, then restarts and runs every confirmation pass: no
// message ever reaches the SMTP server twice, and no row is sent again.
func TestNoDoubleSendUnderSIGKILL(t *testing.T) {
	srv := smtptest.StartOpenSMTPD(t)
	proxy := startHoldProxy(t, srv.Addr())
	home, env := writesHome(t, proxy.port)
	ctx := context.Background()
	db := opsDB(t, home)

	type stage struct{ name, subject string }
	stages := []stage{{"before-smtp", "kill before SMTP"}, {"after-smtp", "kill after SMTP"}, {"after-journal", "kill after journal"}}

	// choreograph runs one stage against a started child.
	choreograph := func(st stage, cmd *exec.Cmd, prefix string) {
		h := proxy.next(t)
		subject := prefix + st.subject
		switch st.name {
		case "before-smtp":
			if _, state, _ := stateOf(t, db, subject); state != writeops.StateStarted {
				t.Fatalf("%s: row is %q while connected, want started", subject, state)
			}
			cmd.Process.Kill()
			h.release <- false
		case "after-smtp":
			// Hold the journal's write lock so the outcome cannot be recorded,
			// let the message through, and kill once the server delivered it.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			tx.Exec(`UPDATE ops SET summary = summary WHERE 0`)
			h.release <- true
			deadline := time.Now().Add(60 * time.Second)
			for countSubject(t, srv, subject) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s never delivered", subject)
				}
				time.Sleep(20 * time.Millisecond)
			}
			cmd.Process.Kill()
			cmd.Wait()
			tx.Rollback()
		case "after-journal":
			h.release <- true
			waitForState(t, db, subject, writeops.StateReturned)
			cmd.Process.Kill()
		}
		cmd.Wait()
	}

	// Direct sends through the mail connector process.
	for _, st := range stages {
		cmd := exec.Command(os.Args[0], "mcp", "mail")
		cmd.Env = childEnv(home)
		client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		go sess.CallTool(ctx, &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{
			"to": []string{"bob@example.org"}, "subject": "send: " + st.subject, "body": "body of " + st.name}})
		choreograph(st, cmd, "send: ")
		sess.Close()
	}

	// Scheduled sends claimed by send-due processes.
	now := time.Now()
	var drafts []outbox.Draft
	for i, st := range stages {
		drafts = append(drafts, outbox.Draft{To: []string{"bob@example.org"}, Subject: "due: " + st.subject,
			Body: "scheduled " + st.name, SendAt: now.Add(time.Duration(i) * time.Second).Format(time.RFC3339)})
	}
	schedule(t, env, drafts)
	time.Sleep(time.Until(now.Add(3 * time.Second)))
	for _, st := range stages {
		cmd := exec.Command(os.Args[0], "writeops", "send-due", "--limit", "1")
		cmd.Env = childEnv(home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		choreograph(st, cmd, "due: ")
	}

	// Restart: send-due finds nothing to send, and confirmation passes (after
	// mirror reconciles) run until every row is settled.
	go func() {
		for h := range proxy.conns {
			h.release <- true
		}
	}()
	out := runSteward(t, home, "writeops", "send-due", "--json")
	if !strings.Contains(out, `"claimed": 0`) {
		t.Fatalf("restarted send-due claimed something: %s", out)
	}
	time.Sleep(1100 * time.Millisecond) // WRITE_OP_STARTED_STALE_MS
	for range 4 {
		runSteward(t, home, "mail", "reconcile")
		runSteward(t, home, "writeops", "confirm-mail")
	}
	for _, prefix := range []string{"send: ", "due: "} {
		for _, st := range stages {
			subject := prefix + st.subject
			n := countSubject(t, srv, subject)
			want := 1
			if st.name == "before-smtp" {
				want = 0
			}
			if n != want {
				t.Errorf("%s reached the server %d times, want %d", subject, n, want)
			}
			_, state, attempts := stateOf(t, db, subject)
			if attempts != 1 || !state.Terminal() {
				t.Errorf("%s: state %s after all passes, %d attempts", subject, state, attempts)
			}
			if st.name == "after-journal" && state != writeops.StateConfirmed {
				t.Errorf("%s: %s, want confirmed (the Sent copy was filed)", subject, state)
			}
			if st.name == "before-smtp" && state != writeops.StateNeedsReview {
				t.Errorf("%s: %s, want needs_review", subject, state)
			}
		}
	}
	// Nothing changes on another round.
	runSteward(t, home, "writeops", "send-due")
	if got := len(srv.Messages(t)); got != 4 {
		t.Fatalf("%d messages at the server after everything, want 4", got)
	}
}

func countSubject(t *testing.T, srv *smtptest.OpenSMTPD, subject string) int {
	n := 0
	for _, m := range srv.Messages(t) {
		if m.Subject == subject {
			n++
		}
	}
	return n
}

func waitForState(t *testing.T, db *sql.DB, subject string, want writeops.State) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, st, _ := stateOf(t, db, subject); st == want {
			return
		}
		if time.Now().After(deadline) {
			_, st, _ := stateOf(t, db, subject)
			t.Fatalf("%s: state %s, want %s", subject, st, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runSteward runs this binary as `steward args…` and returns stdout.
func runSteward(t *testing.T, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = childEnv(home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("steward %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestConcurrentSendDueClaimsOnce runs eight send-due processes over 1,000
// due rows: every row is claimed by exactly one process and its message is
// accepted by the server exactly once.
func TestConcurrentSendDueClaimsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 sends in eight processes")
	}
	srv := smtptest.StartFake(t, smtptest.FaultNone)
	home, env := writesHome(t, srv.Port)
	const rows = 1000
	at := time.Now().Format(time.RFC3339)
	var drafts []outbox.Draft
	for i := range rows {
		drafts = append(drafts, outbox.Draft{To: []string{"bob@example.org"}, Subject: fmt.Sprintf("row %04d", i), Body: "b", SendAt: at})
	}
	schedule(t, env, drafts)
	var wg sync.WaitGroup
	reports := make([]writeops.DueReport, 8)
	for p := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := runSteward(t, home, "writeops", "send-due", "--limit", "1000", "--json")
			if err := json.Unmarshal([]byte(out), &reports[p]); err != nil {
				t.Errorf("report %q: %v", out, err)
			}
		}()
	}
	wg.Wait()
	claimed := map[string]int{}
	busy := 0
	for _, r := range reports {
		for _, id := range r.IDs {
			claimed[id]++
		}
		if r.Claimed > 0 {
			busy++
		}
	}
	if len(claimed) != rows {
		t.Fatalf("%d distinct rows claimed, want %d", len(claimed), rows)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
	seen := map[string]int{}
	for _, data := range srv.Accepted() {
		for _, line := range strings.Split(data, "\r\n") {
			if v, ok := strings.CutPrefix(line, "Subject: "); ok {
				seen[v]++
			}
		}
	}
	if len(seen) != rows {
		t.Fatalf("server accepted %d distinct messages, want %d", len(seen), rows)
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("%q accepted %d times", s, n)
		}
	}
	t.Logf("claims spread over %d of 8 processes", busy)
}

// schedule journals the drafts through schedule_email's path.
func schedule(t *testing.T, env *cliEnv, drafts []outbox.Draft) {
	t.Helper()
	ctx := context.Background()
	err := withMailWriter(ctx, env, audit.ActorHost, func(_ *journal, w *mailWriter) error {
		for _, d := range drafts {
			if _, err := w.Submit(ctx, outbox.ToolSchedule, "", d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
