package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/internal/archive"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/pathguard"
	"github.com/agentstack/agentstack/steward/writeops"
)

// env is one account, its Maildir, the mirror, the journal and a service.
type env struct {
	t       *testing.T
	home    string
	acct    stewardmail.Account
	md      *archive.Maildir
	journal *writeops.Store
	mirror  *mirror.Store
	svc     *Service
	mdb     *MirrorDB
}

func newEnv(t *testing.T, smtp *stewardmail.SMTP, mutate func(*Options)) *env {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	root := filepath.Join(home, "Maildir")
	e := &env{t: t, home: home, md: &archive.Maildir{Root: root, PlusPlus: true}}
	if _, err := e.md.Add("INBOX", archive.Message{ID: "seed@example.org", From: "Seed <seed@example.org>", To: []string{"me@example.com"},
		Subject: "seed", Body: "seed", Date: time.Now().Add(-48 * time.Hour)}, "S"); err != nil {
		t.Fatal(err)
	}
	cfg := &stewardmail.Config{Accounts: []stewardmail.Account{{Name: "personal", Kind: stewardmail.KindMaildir, Root: root,
		Addresses: []string{"me@example.com", "alias@example.com"}, SMTP: smtp}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.acct = cfg.Accounts[0]
	var err error
	if e.journal, err = writeops.Open(ctx, writeops.Path(home), writeops.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.journal.Close() })
	dbPath, blobDir := mirror.Paths(home)
	if e.mirror, err = mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobDir, Accounts: cfg.Accounts}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mirror.Close() })
	e.sync()
	ro, err := sqlitedb.Open(ctx, dbPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	e.mdb = &MirrorDB{DB: ro, Accounts: cfg.Accounts}
	opts := Options{Accounts: cfg.Accounts, Journal: e.journal, Blobs: &Blobs{Dir: filepath.Join(home, "write-ops", "attachments")},
		MirrorBlobs: e.mirror.Blobs(), Mirror: e.mdb, Guard: pathguard.New(pathguard.Options{Home: home, DataDir: filepath.Join(home, "steward")}),
		SMTP: &SMTPSender{Lookup: func(n string) (string, bool) { v, ok := map[string]string{"SMTP_PW": "secret"}[n]; return v, ok }, Timeout: 20 * time.Second}}
	if mutate != nil {
		mutate(&opts)
	}
	if e.svc, err = New(opts); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) sync() {
	e.t.Helper()
	if _, err := e.mirror.Sync(context.Background(), mirror.SyncOptions{Mode: mirror.Reconcile}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) confirm() writeops.PassReport {
	e.t.Helper()
	rep, err := e.journal.Reconcile(context.Background(), writeops.DomainMail,
		map[writeops.Kind]writeops.Confirmer{writeops.KindMailSend: e.mdb, writeops.KindMailReply: e.mdb}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *env) op(id string) writeops.Operation {
	e.t.Helper()
	op, err := e.journal.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

func loopbackSMTP(port int) *stewardmail.SMTP {
	return &stewardmail.SMTP{Host: "127.0.0.1", Port: port, Security: stewardmail.SMTPNone}
}

func TestSendReplyScheduleThroughOpenSMTPD(t *testing.T) {
	srv := smtptest.StartOpenSMTPD(t)
	e := newEnv(t, loopbackSMTP(srv.Port), nil)
	ctx := context.Background()
	attachment := filepath.Join(e.home, "notes.txt")
	os.WriteFile(attachment, []byte("attached text"), 0o600)

	// send_email: non-ASCII subject, an attachment, To and Cc.
	res, err := e.svc.Submit(ctx, ToolSend, "chat:c1", Draft{To: []string{"Bob <Bob@Example.org>"}, Cc: []string{"carol@example.net"},
		Subject: "Pranzo à Milano", Body: "Ciao Bob,\nci vediamo alle 13.\n", Attachments: []AttachmentRef{{Path: attachment}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != string(writeops.StateReturned) {
		t.Fatalf("send result %+v", res)
	}
	got := srv.WaitMessages(t, 2) // one copy per recipient
	for _, m := range got {
		if m.Subject != "Pranzo à Milano" || m.MessageID != res.MessageID {
			t.Fatalf("delivered %q %q, want the journaled message %s", m.Subject, m.MessageID, res.MessageID)
		}
		if !strings.HasSuffix(res.MessageID, "@example.com") {
			t.Fatalf("Message-ID %s is not under the sender's domain", res.MessageID)
		}
	}
	op := e.op(res.OperationID)
	var journaled Message
	op.Decode(&journaled)
	if journaled.Body != "Ciao Bob,\nci vediamo alle 13.\n" || len(journaled.Attachments) != 1 || journaled.Attachments[0].Size != 13 {
		t.Fatalf("journal input %+v", journaled)
	}
	// The Sent copy is in the account's Sent folder; the mirror reads it and
	// the confirmation pass turns the row confirmed.
	var rec Receipt
	if err := json.Unmarshal(op.Result, &rec); err != nil || !strings.Contains(rec.SentCopy, filepath.Join("Maildir", ".Sent", "cur")) {
		t.Fatalf("receipt %s", op.Result)
	}
	if rep := e.confirm(); rep.Confirmed != 0 {
		t.Fatalf("confirmed before the mirror saw the copy: %+v", rep)
	}
	e.sync()
	if rep := e.confirm(); rep.Confirmed != 1 {
		t.Fatalf("confirmation pass %+v; row %+v", rep, e.op(res.OperationID))
	}
	if op := e.op(res.OperationID); op.State != writeops.StateConfirmed || !strings.Contains(string(op.Evidence), res.MessageID) {
		t.Fatalf("row after confirmation %+v", op)
	}

	// reply_email: linked to an original in the inbox, quoting it.
	e.md.Add("INBOX", archive.Message{ID: "orig-1@example.org", From: "Bob <bob@example.org>", To: []string{"me@example.com"},
		Cc: []string{"dan@example.net"}, Subject: "Dinner?", Body: "Are you free Friday?", Date: time.Now().Add(-time.Hour),
		References: []string{"root-0@example.org"}, Attach: []archive.Attachment{{Name: "menu.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4 menu")}}}, "S")
	e.sync()
	var origID, attID string
	e.mdb.DB.QueryRow(`SELECT id FROM messages WHERE message_id = 'orig-1@example.org'`).Scan(&origID)
	e.mdb.DB.QueryRow(`SELECT id FROM attachments WHERE filename = 'menu.pdf'`).Scan(&attID)
	// The reply forwards the original's attachment by its mirror id.
	preview, err := e.svc.Preflight(ctx, ToolReply, Draft{ReplyToID: origID, ReplyAll: true, Body: "Yes, Friday works.",
		Attachments: []AttachmentRef{{AttachmentID: attID}}})
	if err != nil {
		t.Fatal(err)
	}
	p := preview.Preview
	if p.Subject != "Re: Dinner?" || !slices.Equal(p.To, []string{"bob@example.org"}) || !slices.Equal(p.Cc, []string{"dan@example.net"}) ||
		!strings.Contains(p.Body, "> Are you free Friday?") || p.InReplyTo != "<orig-1@example.org>" {
		t.Fatalf("reply preview %+v", p)
	}
	res, err = e.svc.Submit(ctx, ToolReply, "", preview)
	if err != nil || res.State != string(writeops.StateReturned) {
		t.Fatalf("reply %+v %v", res, err)
	}
	got = srv.WaitMessages(t, 4)
	var reply *smtptest.Delivered
	for i := range got {
		if got[i].MessageID == res.MessageID {
			reply = &got[i]
		}
	}
	if reply == nil || reply.Header.Get("In-Reply-To") != "<orig-1@example.org>" ||
		reply.Header.Get("References") != "<root-0@example.org> <orig-1@example.org>" {
		t.Fatalf("reply headers %+v", reply)
	}
	if raw, _ := os.ReadFile(reply.Path); !strings.Contains(string(raw), "menu.pdf") || !strings.Contains(string(raw), "JVBERi0xLjQgbWVudQ") {
		t.Fatalf("the reply lacks the forwarded attachment:\n%s", raw)
	}
	e.sync()
	if rep := e.confirm(); rep.Confirmed != 1 || e.op(res.OperationID).Kind != writeops.KindMailReply {
		t.Fatalf("reply confirmation %+v", rep)
	}

	// schedule_email: journaled now, sent by SendDue once due.
	at := time.Now().Add(2 * time.Second).Format(time.RFC3339)
	res, err = e.svc.Submit(ctx, ToolSchedule, "", Draft{To: []string{"erin@example.org"}, Subject: "Later", Body: "scheduled body", SendAt: at})
	if err != nil || res.State != string(writeops.StateScheduled) {
		t.Fatalf("schedule %+v %v", res, err)
	}
	if rep, _ := e.journal.SendDue(ctx, e.svc.Executors(), 0); rep.Claimed != 0 {
		t.Fatalf("sent before due: %+v", rep)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := e.journal.SendDue(ctx, e.svc.Executors(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Returned == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("scheduled send never became due")
		}
		time.Sleep(200 * time.Millisecond)
	}
	srv.WaitMessages(t, 5)
	e.sync()
	if rep := e.confirm(); rep.Confirmed != 1 {
		t.Fatalf("scheduled confirmation %+v", rep)
	}
	if op := e.op(res.OperationID); op.AttemptedAt.Before(op.CreatedAt.Add(time.Second)) {
		t.Fatalf("the window must start at the execution time, not enqueue: %+v", op)
	}

	// notmuch indexes the Sent copies Steward wrote.
	if _, err := exec.LookPath("notmuch"); err != nil {
		t.Log("notmuch is not installed (apt-get install notmuch): the third-party index check did not run")
	} else {
		cfgPath := filepath.Join(e.home, "notmuch-config")
		os.WriteFile(cfgPath, []byte("[database]\npath="+e.acct.Root+"\n[new]\ntags=new\n"), 0o600)
		run := func(args ...string) string {
			cmd := exec.Command("notmuch", args...)
			cmd.Env = append(os.Environ(), "NOTMUCH_CONFIG="+cfgPath)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("notmuch %v: %v\n%s", args, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		run("new")
		if n := run("count", "folder:.Sent"); n != "3" {
			t.Fatalf("notmuch sees %s Sent messages, want 3", n)
		}
		if n := run("count", "id:"+res.MessageID); n != "1" {
			t.Fatalf("notmuch does not find the scheduled send: %s", n)
		}
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	srv := smtptest.StartFake(t, smtptest.FaultNone)
	e := newEnv(t, &stewardmail.SMTP{Host: "127.0.0.1", Port: srv.Port, Security: stewardmail.SMTPNone}, nil)
	ctx := context.Background()
	protected := filepath.Join(e.home, ".ssh", "id_ed25519")
	os.MkdirAll(filepath.Dir(protected), 0o700)
	os.WriteFile(protected, []byte("key"), 0o600)
	big := filepath.Join(e.home, "big.bin")
	f, _ := os.Create(big)
	f.Truncate(30 << 20)
	f.Close()
	ok := Draft{To: []string{"bob@example.org"}, Subject: "s", Body: "b"}
	with := func(mut func(*Draft)) Draft { d := ok; mut(&d); return d }
	cases := []struct {
		name string
		tool string
		d    Draft
		want string
	}{
		{"unknown account", ToolSend, with(func(d *Draft) { d.Account = "work" }), `unknown account "work" (have: personal)`},
		{"malformed address", ToolSend, with(func(d *Draft) { d.To = []string{"bob@@example"} }), `is not a valid email address`},
		{"name not address", ToolSend, with(func(d *Draft) { d.To = []string{"Bob Rossi"} }), `resolve_recipient`},
		{"foreign from", ToolSend, with(func(d *Draft) { d.From = "ceo@example.com" }), `is not an address of any account`},
		{"protected attachment", ToolSend, with(func(d *Draft) { d.Attachments = []AttachmentRef{{Path: protected}} }), `protected location`},
		{"attachment over limit", ToolSend, with(func(d *Draft) { d.Attachments = []AttachmentRef{{Path: big}} }), `over the limit of 26214400 bytes`},
		{"no recipient", ToolSend, with(func(d *Draft) { d.To = nil }), `at least one recipient`},
		{"two-line subject", ToolSend, with(func(d *Draft) { d.Subject = "a\r\nBcc: x@evil.example" }), `subject must be one line`},
		{"schedule without offset", ToolSchedule, with(func(d *Draft) { d.SendAt = "2030-05-04T09:00:00" }), `explicit offset`},
		{"schedule in the past", ToolSchedule, with(func(d *Draft) { d.SendAt = "2020-05-04T09:00:00Z" }), `in the past`},
		{"sendAt on send", ToolSend, with(func(d *Draft) { d.SendAt = "2030-05-04T09:00:00Z" }), `belongs to schedule_email`},
		{"reply to unknown", ToolReply, with(func(d *Draft) { d.ReplyToID = "999999" }), `not found in the mirror`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.Submit(ctx, tc.tool, "", tc.d)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an input error containing %q", err, tc.want)
			}
		})
	}
	if ops, _ := e.journal.List(ctx, writeops.Filter{}); len(ops) != 0 {
		t.Fatalf("bad input journaled %d operations", len(ops))
	}
	if n := len(srv.Accepted()); n != 0 {
		t.Fatalf("bad input reached the server %d times", n)
	}
	noSMTP := newEnv(t, nil, nil)
	if _, err := noSMTP.svc.Submit(ctx, ToolSend, "", ok); err == nil || !strings.Contains(err.Error(), "no smtp settings") {
		t.Fatalf("account without smtp: %v", err)
	}
}

func TestServerFailures(t *testing.T) {
	cases := []struct {
		name     string
		fault    smtptest.Fault
		password bool
		state    writeops.State
		want     string
	}{
		{"auth refused", smtptest.FaultAuth, true, writeops.StateFailed, "535 5.7.8 Authentication credentials invalid"},
		// The client wrote the whole message and the dot into the socket
		// before it saw the close, so it cannot know what the server read.
		{"drop mid-DATA", smtptest.FaultDropInData, false, writeops.StateUnknown, "may or may not have been accepted"},
		{"data rejected", smtptest.FaultRejectData, false, writeops.StateFailed, "554 5.6.0 message refused: policy"},
		{"no answer to the final dot", smtptest.FaultNoFinalAck, false, writeops.StateUnknown, "may or may not have been accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := smtptest.StartFake(t, tc.fault)
			cfg := &stewardmail.SMTP{Host: "127.0.0.1", Port: srv.Port, Security: stewardmail.SMTPNone}
			if tc.password {
				cfg.Username, cfg.PasswordEnv = "me", "SMTP_PW"
			}
			e := newEnv(t, cfg, nil)
			res, err := e.svc.Submit(context.Background(), ToolSend, "", Draft{To: []string{"bob@example.org"}, Subject: "s", Body: "b"})
			if err != nil {
				t.Fatal(err)
			}
			op := e.op(res.OperationID)
			if op.State != tc.state || !strings.Contains(op.Error, tc.want) || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("state %s error %q, want %s with %q", op.State, op.Error, tc.state, tc.want)
			}
			if strings.Contains(op.Error, "secret") {
				t.Fatal("the password leaked into the journal's error")
			}
			if tc.state == writeops.StateFailed && !strings.HasPrefix(res.Note, "NOT SENT") {
				t.Fatalf("note %q", res.Note)
			}
			if files, _ := filepath.Glob(filepath.Join(e.acct.Root, ".Sent", "cur", "*")); len(files) != 0 {
				t.Fatal("a Sent copy was filed for a message the server did not accept")
			}
		})
	}
}

func TestConfirmationRules(t *testing.T) {
	e := newEnv(t, loopbackSMTP(2525), nil)
	ctx := context.Background()
	base := Message{Account: "personal", From: "me@example.com", To: []string{"bob@example.org"}, Cc: []string{"c@example.net"},
		Subject: "Report", Body: "Line one\nLine two\n", MessageID: "m1@example.com"}
	attempt := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	sent := func(mut func(*archive.Message)) {
		m := archive.Message{ID: "x" + time.Now().Format("150405.000000") + "@example.com", From: "Me <me@example.com>",
			To: []string{"Bob <bob@example.org>"}, Cc: []string{"c@example.net"}, Subject: "Report", Body: "Line one  \nLine two", Date: attempt.Add(5 * time.Second)}
		if mut != nil {
			mut(&m)
		}
		if _, err := e.md.Add("Sent", m, "S"); err != nil {
			t.Fatal(err)
		}
	}
	check := func(mut func(*Message)) writeops.Check {
		m := base
		if mut != nil {
			mut(&m)
		}
		raw, _ := json.Marshal(m)
		e.sync()
		c, err := e.mdb.Confirm(ctx, writeops.Operation{ID: "wop_t", Kind: writeops.KindMailSend, Input: raw, AttemptedAt: attempt})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := check(nil); c.Confirmed || c.Note != "no matching message in the Sent mailbox yet" {
		t.Fatalf("empty Sent: %+v", c)
	}
	sent(func(m *archive.Message) { m.Body = "Line one\nLine 2" })
	if c := check(nil); c.Confirmed || !strings.Contains(c.Note, "none matching") {
		t.Fatalf("different body: %+v", c)
	}
	sent(func(m *archive.Message) { m.Cc = nil })
	sent(func(m *archive.Message) { m.From = "other@example.org" })
	sent(func(m *archive.Message) { m.Date = attempt.Add(-2 * time.Minute) }) // before the window
	if c := check(nil); c.Confirmed {
		t.Fatalf("confirmed on a mismatch: %+v", c)
	}
	sent(nil) // the one real match (trailing spaces and CRLF normalise away)
	c := check(nil)
	if !c.Confirmed {
		t.Fatalf("exact match not confirmed: %+v", c)
	}
	if ev := c.Evidence.(Evidence); ev.Candidates != 4 || len(ev.Mismatches) != 3 {
		t.Fatalf("evidence %+v", ev)
	}
	if c := check(func(m *Message) { m.From = "alias@example.com" }); c.Confirmed {
		t.Fatal("an explicit from must match the sender")
	}
	if c := check(func(m *Message) { m.InReplyTo = "orig@example.org" }); c.Confirmed || !strings.Contains(c.Note, "none matching") {
		t.Fatalf("reply without linkage: %+v", c)
	}
	if c := check(func(m *Message) { m.To, m.Cc, m.Bcc = nil, nil, []string{"hidden@example.org"} }); c.Confirmed || !strings.Contains(c.Note, "BCC-only") {
		t.Fatalf("bcc only: %+v", c)
	}
	sent(nil) // a second identical copy: ambiguous
	if c := check(nil); c.Confirmed || c.Note != "2 Sent messages match: ambiguous" {
		t.Fatalf("two matches: %+v", c)
	}
}
