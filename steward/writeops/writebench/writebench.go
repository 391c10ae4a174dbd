// Package writebench measures the write journal (steward bench writes): the
// latency the journal and outbox add to an SMTP submission, against a bare
// net/smtp submission of the same message to the same server, and the time
// of confirmation passes over 10,000 journal rows against a mirror at the
// reference archive's scale (78,000 messages).
package writebench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/smtp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/sqlitedb"
	stewardmail "github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/writeops"
)

// Options configure a run.
type Options struct {
	Dir string // working folder (created; the caller removes it)
	// SMTPAddr is the server both paths submit to; empty starts an
	// in-process sink that accepts everything.
	SMTPAddr string
	Sends    int // submissions per path
	Rows     int // journal rows of the confirmation sweep
	Messages int // mirror messages
	Log      io.Writer
}

// Report is the JSON report.
type Report struct {
	Date        string `json:"date"`
	Command     string `json:"command,omitempty"`
	Server      string `json:"server"`
	Sends       int    `json:"sends"`
	BareP50     string `json:"bareP50"`
	BareP90     string `json:"bareP90"`
	JournalP50  string `json:"journaledP50"`
	JournalP90  string `json:"journaledP90"`
	AddedP50    string `json:"addedP50"`
	AddedTarget string `json:"addedTarget"`

	MirrorMessages int    `json:"mirrorMessages"`
	JournalRows    int    `json:"journalRows"`
	Passes         int    `json:"passes"`
	FirstPass      string `json:"firstPass"` // one pass of up to 100 rows
	Sweep          string `json:"sweep"`     // every row checked once
	SweepCPU       string `json:"sweepCPU"`  // CPU time of the sweep (user+system), less sensitive to load
	LoadAverage    string `json:"loadAverage"`
	Confirmed      int    `json:"confirmed"`
	SweepTarget    string `json:"sweepTarget"`
}

// Run measures both parts.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Sends <= 0 {
		o.Sends = 300
	}
	if o.Rows <= 0 {
		o.Rows = 10000
	}
	if o.Messages <= 0 {
		o.Messages = 78000
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Sends: o.Sends, AddedTarget: "<= 2ms at p50", SweepTarget: "< 1s",
		MirrorMessages: o.Messages, JournalRows: o.Rows}
	addr := o.SMTPAddr
	rep.Server = addr
	if addr == "" {
		sink, err := smtptest.NewFake(smtptest.FaultNone)
		if err != nil {
			return nil, err
		}
		sink.Discard = true
		defer sink.Close()
		addr = sink.Addr
		rep.Server = "in-process sink " + addr
	}
	if err := sendLatency(ctx, o, addr, rep); err != nil {
		return nil, err
	}
	if err := confirmSweep(ctx, o, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func sendLatency(ctx context.Context, o Options, addr string, rep *Report) error {
	host, portS, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portS)
	dir := filepath.Join(o.Dir, "send")
	root := filepath.Join(dir, "Maildir")
	for _, d := range []string{"cur", "new", "tmp"} {
		os.MkdirAll(filepath.Join(root, d), 0o700)
	}
	cfg := &stewardmail.Config{Accounts: []stewardmail.Account{{Name: "bench", Kind: stewardmail.KindMaildir, Root: root,
		Addresses: []string{"me@example.com"}, SMTP: &stewardmail.SMTP{Host: host, Port: port, Security: stewardmail.SMTPNone}}}}
	if err := cfg.Validate(); err != nil {
		return err
	}
	j, err := writeops.Open(ctx, writeops.Path(dir), writeops.Options{})
	if err != nil {
		return err
	}
	defer j.Close()
	svc, err := outbox.New(outbox.Options{Accounts: cfg.Accounts, Journal: j, Blobs: &outbox.Blobs{Dir: filepath.Join(dir, "att")},
		SMTP: &outbox.SMTPSender{Lookup: func(string) (string, bool) { return "", false }}})
	if err != nil {
		return err
	}
	body := strings.Repeat("A line of an ordinary message body, about seventy characters long.\n", 20)
	m := &outbox.Message{From: "me@example.com", To: []string{"bob@example.org"}, Subject: "Bench", Body: body, MessageID: "bench@example.com"}
	raw, err := outbox.Build(m, time.Now(), nil)
	if err != nil {
		return err
	}
	var bare, journaled []time.Duration
	for i := range o.Sends {
		t0 := time.Now()
		if err := smtp.SendMail(addr, nil, "me@example.com", []string{"bob@example.org"}, raw); err != nil {
			return fmt.Errorf("bare submission: %w", err)
		}
		bare = append(bare, time.Since(t0))
		t0 = time.Now()
		res, err := svc.Submit(ctx, outbox.ToolSend, "", outbox.Draft{To: []string{"bob@example.org"}, Subject: "Bench " + strconv.Itoa(i), Body: body})
		if err != nil || res.State != string(writeops.StateReturned) {
			return fmt.Errorf("journaled submission: %v %+v", err, res)
		}
		journaled = append(journaled, time.Since(t0))
		if (i+1)%100 == 0 {
			fmt.Fprintf(o.Log, "send latency: %d/%d\n", i+1, o.Sends)
		}
	}
	bp50, jp50 := pct(bare, 50), pct(journaled, 50)
	rep.BareP50, rep.BareP90 = bp50.String(), pct(bare, 90).String()
	rep.JournalP50, rep.JournalP90 = jp50.String(), pct(journaled, 90).String()
	rep.AddedP50 = (jp50 - bp50).String()
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// confirmSweep builds a mirror of o.Messages messages (15% of them in Sent,
// spread over three years), journals o.Rows sends of which nine in ten have
// their Sent copy, and times confirmation passes until every row was checked.
func confirmSweep(ctx context.Context, o Options, rep *Report) error {
	dir := filepath.Join(o.Dir, "confirm")
	acct := stewardmail.Account{Name: "bench", Kind: stewardmail.KindMaildir, Root: filepath.Join(dir, "Maildir"), Addresses: []string{"me@example.com"}}
	dbPath, blobs := mirror.Paths(dir)
	st, err := mirror.Open(ctx, mirror.Options{DBPath: dbPath, BlobDir: blobs, Accounts: []stewardmail.Account{acct}})
	if err != nil {
		return err
	}
	db := st.DB()
	fmt.Fprintf(o.Log, "confirm sweep: building a mirror of %d messages\n", o.Messages)
	end := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	span := 3 * 365 * 24 * time.Hour
	clock := end
	j, err := writeops.Open(ctx, writeops.Path(dir), writeops.Options{MaxConfirmAttempts: map[writeops.Domain]int{writeops.DomainMail: 1000},
		Now: func() time.Time { return clock }})
	if err != nil {
		st.Close()
		return err
	}
	defer j.Close()
	if err := fill(ctx, db, j, o, end, span, &clock); err != nil {
		st.Close()
		return err
	}
	st.Close()
	clock = end.Add(24 * time.Hour)
	ro, err := sqlitedb.Open(ctx, dbPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer ro.Close()
	conf := &outbox.MirrorDB{DB: ro, Accounts: []stewardmail.Account{acct}}
	confirmers := map[writeops.Kind]writeops.Confirmer{writeops.KindMailSend: conf}
	var total time.Duration
	checked := 0
	cpu0 := cpuTime()
	for checked < o.Rows {
		t0 := time.Now()
		pr, err := j.Reconcile(ctx, writeops.DomainMail, confirmers, writeops.DefaultBatch)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		if pr.Checked == 0 {
			break
		}
		if rep.Passes == 0 {
			rep.FirstPass = d.String()
		}
		rep.Passes++
		total += d
		checked += pr.Checked
		rep.Confirmed += pr.Confirmed
	}
	rep.Sweep = total.String()
	rep.SweepCPU = (cpuTime() - cpu0).String()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAverage = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return nil
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fill inserts the mirror rows directly (the ingest path is measured by
// `steward bench mail`) and journals the sends.
func fill(ctx context.Context, db *sql.DB, j *writeops.Store, o Options, end time.Time, span time.Duration, clock *time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	tx.ExecContext(ctx, `INSERT OR IGNORE INTO accounts(id, name, kind, root) VALUES (1, 'bench', 'maildir', '/bench')`)
	tx.ExecContext(ctx, `INSERT OR IGNORE INTO mailboxes(id, account_id, name, role) VALUES (1, 1, 'INBOX', 'inbox'), (2, 1, 'Sent', 'sent')`)
	ins, err := tx.PrepareContext(ctx, `INSERT INTO messages(id, account_id, identity, message_id, mailbox_id, subject, subject_norm,
		from_addr, to_text, cc_text, body, date, from_me, ingested_at, updated_at) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, 0, 0)`)
	if err != nil {
		return err
	}
	sentEvery := o.Messages / o.Rows // the journal rows' copies first
	if sentEvery < 1 {
		sentEvery = 1
	}
	body := "Thanks, see you then.\nBest regards"
	type sent struct {
		at      time.Time
		subject string
	}
	var sends []sent
	for i := range o.Messages {
		at := end.Add(-span + time.Duration(int64(span)/int64(o.Messages)*int64(i)))
		id := at.Unix()<<20 | int64(i%1000)
		mailbox, from, to, subject := 1, fmt.Sprintf("person%d@example.org", i%5000), "me@example.com", fmt.Sprintf("Topic %d", i)
		isSend := i%sentEvery == 0 && len(sends) < o.Rows
		if isSend || i%7 == 0 {
			mailbox, from, to = 2, "me@example.com", fmt.Sprintf("person%d@example.org", i%5000)
		}
		if isSend {
			sends = append(sends, sent{at: at, subject: subject})
		}
		if _, err := ins.ExecContext(ctx, id, "i"+strconv.Itoa(i), fmt.Sprintf("m%d@example.org", i), mailbox, subject, strings.ToLower(subject),
			from, to, body, at.Unix(), boolInt(mailbox == 2)); err != nil {
			return fmt.Errorf("insert message %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "confirm sweep: journaling %d sends\n", len(sends))
	for i, s := range sends {
		m := outbox.Message{Account: "bench", From: "me@example.com", To: []string{fmt.Sprintf("person%d@example.org", (i*sentEvery)%5000)},
			Subject: s.subject, Body: body, MessageID: "x" + strconv.Itoa(i)}
		if i%10 == 9 {
			m.Body = "a body that was never sent" // one in ten finds no evidence
		}
		*clock = s.at // the attempt happened when the copy is dated
		op, err := j.Begin(ctx, writeops.NewOperation{Kind: writeops.KindMailSend, Input: m})
		if err != nil {
			return err
		}
		if _, err := j.Finish(ctx, op.ID, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
