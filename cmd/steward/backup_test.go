package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/backup"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/scheduler"
)

// tableDigests returns, for every ordinary table of the database at path,
// its row count and a SHA-256 over every row.
func tableDigests(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, tbl := range tables {
		r, err := db.Query(`SELECT * FROM "` + tbl + `"`)
		if err != nil {
			t.Fatalf("%s.%s: %v", path, tbl, err)
		}
		cols, _ := r.Columns()
		h := sha256.New()
		n := 0
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for r.Next() {
			r.Scan(ptrs...)
			fmt.Fprintf(h, "%v\x00", vals)
			n++
		}
		r.Close()
		out[tbl] = fmt.Sprintf("%d rows %s", n, hex.EncodeToString(h.Sum(nil))[:16])
	}
	return out
}

func rowCount(t *testing.T, path, table string) int {
	t.Helper()
	d := tableDigests(t, path)[table]
	var n int
	fmt.Sscanf(d, "%d rows", &n)
	return n
}

// chatTurn runs one chat turn over the host's WebSocket; with inFlight set it
// returns once the answer is streaming (the turn stays in flight).
func chatTurn(t *testing.T, base, token, text string, inFlight bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, send := dialHost(t, ctx, base, token)
	turnOn(t, ctx, ws, send, text, inFlight)
	if !inFlight {
		ws.Close(websocket.StatusNormalClosure, "")
	}
}

// turnOn creates a chat on ws and runs one turn in it (see chatTurn); it
// returns the answer of a finished turn.
func turnOn(t *testing.T, ctx context.Context, ws *websocket.Conn, send func(any), text string, inFlight bool) string {
	t.Helper()
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: text})
	sent := false
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			if !sent {
				sent = true
				send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: f["chat"].(map[string]any)["id"].(string), Text: text})
			}
		case protocol.TypeAssistantDelta:
			if inFlight {
				return ""
			}
		case protocol.TypeTurnDone:
			if f["ok"] != true {
				t.Fatalf("turn %q: %v", text, f)
			}
			answer, _ := f["text"].(string)
			return answer
		}
	}
}

// TestBackupWhileServingAndRestore backs up a home while steward serve runs
// a chat turn and a mail backfill, verifies both backups, restores the full
// one into a new home that serves the same chats, watches, audit and usage,
// and shows that one corrupted byte fails verification naming the file.
func TestBackupWhileServingAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs serve and the mail backfill")
	}
	bin := buildSteward(t)
	up := llmtest.NewServer(t)
	hold := make(chan struct{})
	up.Enqueue("scripted", llmtest.Reply{Content: "first answer"}, llmtest.Reply{Content: "second answer", Chunks: 4, Hold: hold})
	vars := map[string]string{"STEWARD_SCHEDULER": "off"}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	os.WriteFile(filepath.Join(home, "config.env"), []byte("MAIL_EMBED_ENDPOINT=off\nMAIL_CLASSIFY_ENDPOINT=off\n"), 0o600)
	maildir := newMaildir(t)
	for i := range 1500 {
		writeMaildirMessage(t, maildir, "cur", i, fmt.Sprintf("Backup subject %d", i))
	}
	writeMailConfig(t, home, maildir)
	// A symlink in the home is kept as a symlink; its outside target is not copied.
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("outside the home"), 0o600)
	os.Symlink(outside, filepath.Join(home, "linked.txt"))
	vault := filepath.Join(t.TempDir(), "vault")
	os.MkdirAll(filepath.Join(vault, "pages"), 0o700)
	os.WriteFile(filepath.Join(vault, "pages", "note.md"), []byte("# Note\n"), 0o600)

	base, token := runServe(t, env, home)
	chatTurn(t, base, token, "first", false)
	chatTurn(t, base, token, "second", true) // streaming until hold closes

	backfill := exec.Command(bin, "mail", "backfill")
	backfill.Env = append(os.Environ(), "STEWARD_HOME="+home)
	var bfOut strings.Builder
	backfill.Stdout, backfill.Stderr = &bfOut, &bfOut
	if err := backfill.Start(); err != nil {
		t.Fatal(err)
	}
	bfDone := make(chan error, 1)
	go func() { bfDone <- backfill.Wait() }()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(home, "mail", "mail.db")); return err == nil })

	outDir := t.TempDir()
	op, full := filepath.Join(outDir, "op"), filepath.Join(outDir, "full")
	benv, bout, berr := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"backup", "operational", "--output", op}, benv); code != 0 {
		t.Fatalf("backup operational exit %d\n%s", code, berr)
	}
	if code := run(context.Background(), []string{"backup", "full", "--output", full, "--wiki", vault, "--json"}, benv); code != 0 {
		t.Fatalf("backup full exit %d\n%s", code, berr)
	}
	if !strings.Contains(berr.String(), "copy [") || !strings.Contains(bout.String(), "operational backup written to") {
		t.Errorf("no progress or summary:\n%s\n%s", berr, bout)
	}
	close(hold)
	select {
	case err := <-bfDone:
		if err != nil {
			t.Fatalf("mail backfill: %v\n%s", err, bfOut.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("mail backfill did not finish")
	}

	// Modes, contents, symlinks, and what operational leaves out.
	m, err := backup.ReadManifest(full)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]backup.Entry{}
	for _, e := range m.Entries {
		entries[e.Path] = e
	}
	for _, want := range []string{"home/chats.db", "home/audit.db", "home/usage.db", "home/watches.db", "home/mail/mail.db", "home/auth-token", "home/vapid.json", "home/config.env", "wiki/pages/note.md"} {
		if _, ok := entries[want]; !ok {
			t.Errorf("full backup lacks %s", want)
		}
	}
	if e := entries["home/linked.txt"]; e.Type != backup.TypeSymlink || e.Target != outside {
		t.Errorf("symlink entry = %+v", e)
	}
	if e := entries["home/chats.db"]; e.Type != backup.TypeSQLite || len(e.SHA256) != 64 {
		t.Errorf("chats.db entry = %+v", e)
	}
	filepath.Walk(full, func(p string, info os.FileInfo, err error) error {
		switch {
		case info.Mode()&os.ModeSymlink != 0:
		case info.IsDir() && info.Mode().Perm() != 0o700, !info.IsDir() && info.Mode().Perm() != 0o600:
			t.Errorf("%s mode %v", p, info.Mode().Perm())
		}
		return nil
	})
	opm, _ := backup.ReadManifest(op)
	for _, e := range opm.Entries {
		if strings.HasPrefix(e.Path, "wiki") {
			t.Errorf("operational backup holds %s", e.Path)
		}
	}
	if rowCount(t, filepath.Join(full, "home", "mail", "mail.db"), "messages") == 0 {
		t.Log("the backfill had not committed any message when the backup ran")
	}
	matches, _ := filepath.Glob(filepath.Join(outDir, ".pending-*"))
	if len(matches) != 0 {
		t.Errorf("successful backups left %v", matches)
	}

	for _, dir := range []string{op, full} {
		venv, vout, verr := testEnv(t, map[string]string{"STEWARD_HOME": home})
		if code := run(context.Background(), []string{"backup", "verify", dir}, venv); code != 0 || !strings.Contains(vout.String(), "every hash matches") {
			t.Fatalf("verify %s: exit %d\n%s%s", dir, code, vout, verr)
		}
	}

	// Restore into a new home and serve it.
	newHome := filepath.Join(t.TempDir(), "restored")
	renv, rout, rerr := testEnv(t, map[string]string{"STEWARD_HOME": newHome})
	if code := run(context.Background(), []string{"restore", full, "--home", newHome}, renv); code != 0 {
		t.Fatalf("restore exit %d\n%s%s", code, rout, rerr)
	}
	if code := run(context.Background(), []string{"restore", full, "--home", newHome}, renv); code == 0 {
		t.Error("a restore over a non-empty home succeeded")
	}
	for _, db := range []string{"chats.db", "watches.db", "audit.db", "usage.db"} {
		want, got := tableDigests(t, filepath.Join(full, "home", db)), tableDigests(t, filepath.Join(newHome, db))
		if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
			t.Errorf("%s restored:\n got %v\nwant %v", db, got, want)
		}
	}
	if n := rowCount(t, filepath.Join(newHome, "chats.db"), "chats"); n < 2 {
		t.Errorf("restored chats: %d, want the 2 chats", n)
	}
	if target, err := os.Readlink(filepath.Join(newHome, "linked.txt")); err != nil || target != outside {
		t.Errorf("restored symlink: %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(newHome, "wiki", "pages", "note.md")); string(b) != "# Note\n" {
		t.Errorf("restored vault page = %q", b)
	}
	senv, _, _ := testEnv(t, map[string]string{"STEWARD_HOME": newHome, "STEWARD_SCHEDULER": "off"})
	nbase, ntoken := runServe(t, senv, newHome)
	if ntoken != token {
		t.Error("the restored home has another token")
	}
	var usageRep struct{ Total struct{ Requests int } }
	getJSON(t, nbase+"/usage?since=24h", ntoken, &usageRep)
	if usageRep.Total.Requests < 1 {
		t.Errorf("restored serve reports usage %+v", usageRep)
	}
	req, _ := http.NewRequest(http.MethodGet, nbase+"/audit", nil)
	req.Header.Set("Authorization", "Bearer "+ntoken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("restored /audit: %v %v", resp, err)
	}

	// One corrupted byte fails verify, naming the file.
	chats := filepath.Join(op, "home", "chats.db")
	b, _ := os.ReadFile(chats)
	b[len(b)/2] ^= 0xff
	os.WriteFile(chats, b, 0o600)
	venv, _, verr := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"backup", "verify", op}, venv); code != 1 || !strings.Contains(verr.String(), "home/chats.db: SHA-256 differs") {
		t.Errorf("verify of a corrupted backup: exit %d\n%s", code, verr)
	}
	if code := run(context.Background(), []string{"restore", op, "--home", filepath.Join(t.TempDir(), "x")}, venv); code != 1 {
		t.Error("restore of a corrupted backup succeeded")
	}
	_ = logs
}

// TestKilledBackupLeavesOnlyPending kills `steward backup full` while it is
// copying: the output directory never appears, the .pending-* one stays,
// and verify refuses it.
func TestKilledBackupLeavesOnlyPending(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildSteward(t)
	home := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(filepath.Join(home, "uploads"), 0o700)
	// Many files after a large one, so the copy is still running when the
	// first progress line arrives.
	big, _ := os.Create(filepath.Join(home, "uploads", "a-big.bin"))
	big.Truncate(512 << 20)
	big.Close()
	for i := range 300 {
		os.WriteFile(filepath.Join(home, "uploads", fmt.Sprintf("f%03d.txt", i)), []byte("x"), 0o600)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "full")
	cmd := exec.Command(bin, "backup", "full", "--output", out)
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+home)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill at the first sign of the staging directory.
	waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(outDir, ".pending-*")); return len(m) > 0 })
	cmd.Process.Kill()
	if err := cmd.Wait(); err == nil {
		t.Skip("the backup finished before it could be killed")
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a killed backup produced its output directory")
	}
	pending, _ := filepath.Glob(filepath.Join(outDir, ".pending-full-*"))
	if len(pending) != 1 {
		t.Fatalf("pending dirs = %v", pending)
	}
	env, _, errb := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"backup", "verify", pending[0]}, env); code != 1 || !strings.Contains(errb.String(), "incomplete backup") {
		t.Errorf("verify of a pending dir: exit %d\n%s", code, errb)
	}
}

// TestBackupBenchSmoke runs steward bench backup on a small database: every
// figure is measured and both verdicts are in the report (not asserted).
func TestBackupBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Fatal("sqlite3 is needed (.ci/run installs it): apt-get install -y sqlite3")
	}
	db := filepath.Join(t.TempDir(), "m.db")
	if out, err := exec.Command("sqlite3", db, "CREATE TABLE t(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c LIMIT 2000) INSERT INTO t SELECT randomblob(500) FROM c;").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command(buildSteward(t), "bench", "backup", "--db", db, "--runs", "1", "--turns", "2", "--json")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var rep backupBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.DBBytes <= 0 || rep.StewardMB <= 0 || rep.SQLite3MB <= 0 || rep.TurnQuietMS <= 0 || rep.TurnBusyMS <= 0 || len(rep.Checks) != 2 {
		t.Errorf("report = %+v", rep)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(db), ".steward-bench-backup-*")); len(m) != 0 {
		t.Errorf("left behind %v", m)
	}
}

// TestScheduledBackupKeepsN is the scheduler's daily job: not configured
// without STEWARD_BACKUP_DIR, and the newest STEWARD_BACKUP_KEEP backups kept.
func TestScheduledBackupKeepsN(t *testing.T) {
	vars := map[string]string{}
	env, _, errb := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "policy.yaml"), []byte("allow: []\n"), 0o600)
	if code := run(context.Background(), []string{"backup", "scheduled", "--json"}, env); code != scheduler.ExitNotConfigured || !strings.Contains(errb.String(), "STEWARD_BACKUP_DIR") {
		t.Fatalf("without STEWARD_BACKUP_DIR: exit %d\n%s", code, errb)
	}
	dir := t.TempDir()
	var outputs []string
	for range 3 {
		env, out, errb := testEnv(t, map[string]string{"STEWARD_HOME": home, "STEWARD_BACKUP_DIR": dir, "STEWARD_BACKUP_KEEP": "2"})
		if code := run(context.Background(), []string{"backup", "scheduled", "--json"}, env); code != 0 {
			t.Fatalf("scheduled backup: exit %d\n%s", code, errb)
		}
		var res struct{ Output string }
		json.Unmarshal(out.Bytes(), &res)
		outputs = append(outputs, res.Output)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if strings.Join(left, ",") != strings.Join(outputs[1:], ",") {
		t.Errorf("kept %v, want the newest two of %v", left, outputs)
	}
	if _, _, err := backup.Verify(outputs[2], nil); err != nil {
		t.Error(err)
	}
}
