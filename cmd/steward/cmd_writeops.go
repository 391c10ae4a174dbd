package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox"
	"github.com/agentstack/agentstack/steward/pathguard"
	"github.com/agentstack/agentstack/steward/writeops"
	"github.com/agentstack/agentstack/steward/writeops/writebench"
)

// writeopsJobs are the `steward writeops JOB` subcommands.
var writeopsJobs = []job{
	{"send-due", "send scheduled mail whose time has come (each row is claimed once, never re-sent)", writeopsSendDue},
	{"confirm-mail", "look for evidence of mail writes in the mail mirror; needs_review after the limit", writeopsConfirmMail},
	{"confirm-calendar", "look for evidence of calendar and contacts writes in their indexes", writeopsConfirmCalendar},
	{"list", "list journaled writes, newest first", writeopsList},
	{"show", "show one journaled write with its input and evidence", writeopsShow},
	{"cancel", "cancel a scheduled send that has not started", writeopsCancel},
}

func init() {
	register(&command{
		Name:    "writeops",
		Summary: "the write journal: send scheduled mail, confirm writes, review them",
		Run:     jobCommand("writeops", "The journal is STEWARD_HOME/write-ops/ops.db; see docs/writes.md for what each state means.", writeopsJobs),
	})
	registerMCP("writeops", writeopsMCP)
	registerBench(&benchmark{Name: "writes", Summary: "journal + send latency against bare SMTP, and confirmation passes over 10,000 rows against a 78,000-message mirror", Run: writesBench})
}

func writesBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench writes", "[options]", "Measures, in one run, (1) the latency the write journal and outbox add to a send: "+
		"each iteration submits the same-sized message once with bare net/smtp and once through the journal (record, build, submit, Sent copy, "+
		"outcome), to the same server; (2) confirmation passes of 100 rows until 10,000 journaled sends were checked against a mirror of "+
		"78,000 messages. Prints a JSON report; see docs/benchmarks.md.")
	smtpAddr := fs.String("smtp", "", "host:port of an SMTP server on loopback accepting any recipient (default: an in-process sink)")
	sends := fs.Int("sends", 300, "submissions per path")
	rows := fs.Int("rows", 10000, "journal rows of the confirmation sweep")
	messages := fs.Int("messages", 78000, "mirror messages")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	work := *dir
	if work == "" {
		tmp, err := os.MkdirTemp("", "steward-bench-writes-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	rep, err := writebench.Run(ctx, writebench.Options{Dir: work, SMTPAddr: *smtpAddr, Sends: *sends, Rows: *rows, Messages: *messages, Log: env.Stderr})
	if err != nil {
		return err
	}
	rep.Command = "steward bench writes " + strings.Join(args, " ")
	return writeJSON(env.Stdout, rep)
}

// journal is the write journal with the audit ledger it reports to.
type journal struct {
	*writeops.Store
	audit *audit.Ledger
}

// Close flushes the audit events and closes both stores.
func (j *journal) Close() error {
	err := j.Store.Close()
	if j.audit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		j.audit.Flush(ctx)
		cancel()
		j.audit.Close()
	}
	return err
}

// openJournal opens STEWARD_HOME/write-ops/ops.db with the WRITE_OP_*
// settings, reporting to STEWARD_HOME/audit.db as actor.
func openJournal(ctx context.Context, env *cliEnv, actor string) (*journal, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	opts := writeops.Options{Logger: env.Log, Actor: actor,
		MaxConfirmAttempts: map[writeops.Domain]int{
			writeops.DomainMail:     int(cfg.Int("WRITE_OP_MAIL_MAX_CONFIRM_ATTEMPTS", writeops.DefaultMaxConfirmAttempts, 1, 1000)),
			writeops.DomainCalendar: int(cfg.Int("WRITE_OP_CALENDAR_MAX_CONFIRM_ATTEMPTS", writeops.DefaultMaxConfirmAttempts, 1, 1000)),
		},
		StaleStarted: cfg.Millis("WRITE_OP_STARTED_STALE_MS", writeops.DefaultStaleStarted, time.Second, 24*time.Hour),
		BusyTimeout:  time.Minute, // concurrent send-due processes queue on each other's claims
	}
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	j := &journal{}
	if j.audit, err = audit.Open(ctx, filepath.Join(cfg.Home, "audit.db"), audit.Options{Logger: env.Log}); err != nil {
		env.Log.Warn("write journal runs without the audit ledger", "err", err)
		j.audit = nil
	} else {
		opts.Audit = j.audit
	}
	if j.Store, err = writeops.Open(ctx, writeops.Path(cfg.Home), opts); err != nil {
		if j.audit != nil {
			j.audit.Close()
		}
		return nil, err
	}
	return j, nil
}

// mailWriter is the outbox with the mirror connection it reads.
type mailWriter struct {
	*outbox.Service
	mirror *outbox.MirrorDB
	close  func()
}

// openMailWriter builds the outbox over the journal: accounts from
// mail.yaml, the mirror (read-only) for replies, attachments and
// confirmation, SMTP passwords from the environment or config.env.
func openMailWriter(ctx context.Context, env *cliEnv, j *journal) (*mailWriter, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	s, err := mailSettings(env)
	if err != nil {
		return nil, err
	}
	maxBytes := cfg.Int("MAIL_SEND_MAX_BYTES", outbox.DefaultMaxBytes, 1, 100<<20)
	if err := cfg.Err(); err != nil {
		return nil, err
	}
	// Make sure the mirror exists (and is migrated) before reading it.
	store, err := mirrorFor(ctx, env, s)
	if err != nil {
		return nil, err
	}
	store.Close()
	db, err := sqlitedb.Open(ctx, s.DBPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	blobs, err := mirror.NewBlobs(s.BlobDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	mdb := &outbox.MirrorDB{DB: db, Accounts: s.Config.Accounts}
	svc, err := outbox.New(outbox.Options{Accounts: s.Config.Accounts, Journal: j.Store,
		Blobs:       &outbox.Blobs{Dir: filepath.Join(cfg.Home, "write-ops", "attachments")},
		MirrorBlobs: blobs, Mirror: mdb, MaxBytes: maxBytes,
		Guard: pathguard.New(pathguard.Options{Home: mail.UserHome(), DataDir: cfg.Home}),
		SMTP:  &outbox.SMTPSender{Lookup: cfg.Lookup}})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &mailWriter{Service: svc, mirror: mdb, close: func() { db.Close() }}, nil
}

// withJournal runs fn with the journal open, closing it afterwards.
func withJournal(ctx context.Context, env *cliEnv, actor string, fn func(j *journal) error) error {
	j, err := openJournal(ctx, env, actor)
	if err != nil {
		return err
	}
	defer j.Close()
	return fn(j)
}

// withMailWriter runs fn with the journal and the outbox open.
func withMailWriter(ctx context.Context, env *cliEnv, actor string, fn func(j *journal, w *mailWriter) error) error {
	return withJournal(ctx, env, actor, func(j *journal) error {
		w, err := openMailWriter(ctx, env, j)
		if err != nil {
			// Without mail accounts the scheduled jobs have nothing to do:
			// the scheduler reports them "skipped: not configured".
			return asNotConfigured(err, mail.ErrNoConfig)
		}
		defer w.close()
		return fn(j, w)
	})
}

func writeopsSendDue(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops send-due", "[options]", "Claims scheduled sends whose time has come, one at a time, and sends them. "+
		"A claimed row is never put back: a crash leaves it for confirmation and review. Safe to run in several processes at once.")
	limit := fs.Int("limit", writeops.DefaultBatch, "at most this many sends in this run")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withMailWriter(ctx, env, audit.ActorScheduler, func(j *journal, w *mailWriter) error {
		rep, err := j.SendDue(ctx, w.Executors(), *limit)
		if *asJSON {
			if jerr := writeJSON(env.Stdout, rep); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintf(env.Stdout, "send-due: %d claimed, %d accepted by the server, %d failed, %d unknown\n", rep.Claimed, rep.Returned, rep.Failed, rep.Unknown)
		}
		return err
	})
}

func writeopsConfirmMail(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops confirm-mail", "[options]", "Looks for each unconfirmed mail write in the mirror's Sent mailboxes "+
		"(run after `steward mail reconcile`). Never sends anything; after WRITE_OP_MAIL_MAX_CONFIRM_ATTEMPTS checks a row becomes needs_review.")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withMailWriter(ctx, env, audit.ActorScheduler, func(j *journal, w *mailWriter) error {
		rep, err := j.Reconcile(ctx, writeops.DomainMail, map[writeops.Kind]writeops.Confirmer{
			writeops.KindMailSend: w.mirror, writeops.KindMailReply: w.mirror}, writeops.DefaultBatch)
		if err != nil {
			return err
		}
		return printPass(env, rep, *asJSON)
	})
}

func writeopsConfirmCalendar(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops confirm-calendar", "[options]", "Looks for evidence of calendar and contacts writes in their "+
		"indexes. Never re-executes; after WRITE_OP_CALENDAR_MAX_CONFIRM_ATTEMPTS checks a row becomes retry_exhausted.")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	j, err := openJournal(ctx, env, audit.ActorScheduler)
	if err != nil {
		return err
	}
	defer j.Close()
	confirmers, closer, err := calendarConfirmers(ctx, env)
	if err != nil {
		return err
	}
	defer closer.Close()
	for _, d := range []writeops.Domain{writeops.DomainCalendar, writeops.DomainContacts} {
		rep, err := j.Reconcile(ctx, d, confirmers, writeops.DefaultBatch)
		if err != nil {
			return err
		}
		if err := printPass(env, rep, *asJSON); err != nil {
			return err
		}
	}
	return nil
}

func printPass(env *cliEnv, rep writeops.PassReport, asJSON bool) error {
	if asJSON {
		return writeJSON(env.Stdout, rep)
	}
	fmt.Fprintf(env.Stdout, "confirm %s: %d checked, %d confirmed, %d still unconfirmed (%d now need review), %d check errors\n",
		rep.Domain, rep.Checked, rep.Confirmed, rep.Missed, rep.Terminal, rep.Errors)
	return nil
}

func writeopsList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops list", "[options]", "Lists journaled writes, newest first.")
	state := fs.String("state", "", "only this state (e.g. needs_review)")
	limit := fs.Int("limit", 20, "at most this many")
	asJSON := fs.Bool("json", false, "print as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f := writeops.Filter{Limit: *limit}
	if *state != "" {
		if _, ok := writeops.StateMeaning[writeops.State(*state)]; !ok {
			return fmt.Errorf("unknown state %q", *state)
		}
		f.States = []writeops.State{writeops.State(*state)}
	}
	var ops []writeops.Operation
	if err := withJournal(ctx, env, audit.ActorUser, func(j *journal) (err error) {
		ops, err = j.List(ctx, f)
		return err
	}); err != nil {
		return err
	}
	if *asJSON {
		out := []writeops.Summary{}
		for _, op := range ops {
			out = append(out, writeops.Summarize(op))
		}
		return writeJSON(env.Stdout, out)
	}
	for _, op := range ops {
		s := writeops.Summarize(op)
		line := fmt.Sprintf("%s  %-16s %-15s %s  %s", s.ID, s.Kind, s.State, s.CreatedAt, s.Summary)
		if s.Note != "" {
			line += "  (" + s.Note + ")"
		}
		fmt.Fprintln(env.Stdout, line)
	}
	return nil
}

func writeopsShow(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops show", "ID", "Shows one journaled write as JSON: input, result, error, evidence.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errUsage
	}
	return withJournal(ctx, env, audit.ActorUser, func(j *journal) error {
		op, err := j.Get(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		return writeJSON(env.Stdout, op)
	})
}

func writeopsCancel(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "writeops cancel", "ID", "Cancels a scheduled send that has not been claimed yet.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errUsage
	}
	return withJournal(ctx, env, audit.ActorUser, func(j *journal) error {
		if err := j.Cancel(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "cancelled %s\n", fs.Arg(0))
		return nil
	})
}

// writeopsMCP serves list_write_operations and read_write_operation.
func writeopsMCP(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
	j, err := openJournal(ctx, env, audit.ActorAgent)
	if err != nil {
		return nil, err
	}
	return writeops.NewServer(j.Store, version), nil
}
