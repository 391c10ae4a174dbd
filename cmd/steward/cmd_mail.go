package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/sqlitedb"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/localsource"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/bench"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/search"
	"github.com/agentstack/agentstack/steward/connectors/mail/server"
	"github.com/agentstack/agentstack/steward/host"
)

// mailJobs are the `steward mail JOB` subcommands.
var mailJobs = []job{
	{"backfill", "import mail not yet mirrored, newest first (resumes where it stopped)", mailBackfill},
	{"reconcile", "converge the mirror on the stores: ingest new/changed files, remove vanished ones", mailReconcile},
	{"watch", "follow file events and reconcile periodically until interrupted", mailWatch},
	{"embed", "embed mirrored messages that have no current vector", mailEmbed},
	{"reindex", "rebuild the FTS5, trigram and thread data from the message rows", mailReindex},
	{"status", "show what the mirror holds and the files it could not read", mailStatus},
	{"promote", "promote durable knowledge from mail threads into the wiki (triage + distillation)", mailPromote},
}

func init() {
	register(&command{
		Name:    "mail",
		Summary: "mirror local mail (Maildir, Apple Mail) and keep its indexes",
		Run:     jobCommand("mail", "Accounts come from STEWARD_HOME/mail.yaml (MAIL_CONFIG); see docs/mail.md.", mailJobs),
	})
	registerMCP("mail", mailMCP)
	registerBench(&benchmark{Name: "mail", Summary: "mail mirror at the reference scale: backfill vs notmuch, retrieval cases vs C SQLite and vec0", Run: mailBench})
}

// mailSettings loads the configuration the mail jobs share.
func mailSettings(env *cliEnv) (*mail.Settings, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	return mail.LoadSettings(cfg, mail.UserHome())
}

// openMirror loads the mail settings and opens the mirror they name.
func openMirror(ctx context.Context, env *cliEnv) (*mail.Settings, *mirror.Store, error) {
	s, err := mailSettings(env)
	if err != nil {
		return nil, nil, err
	}
	store, err := mirrorFor(ctx, env, s)
	return s, store, err
}

func mirrorFor(ctx context.Context, env *cliEnv, s *mail.Settings) (*mirror.Store, error) {
	return mirror.Open(ctx, mirror.Options{DBPath: s.DBPath, BlobDir: s.BlobDir, Accounts: s.Config.Accounts,
		EmbedMaxChars: s.EmbedMaxChars, Log: env.Log, Classifier: s.Classifier(), ClassifyModel: s.ClassifyModel})
}

// mailRoleStatus is the System page's note about mailboxes left without a
// role because MAIL_CLASSIFY_ENDPOINT is off; nothing when there are none.
func mailRoleStatus(ctx context.Context, cfg *config.Config) []host.ServiceStatus {
	s, err := mail.LoadSettings(cfg, mail.UserHome())
	if err != nil || s.ClassifyOff == "" {
		return nil
	}
	if _, err := os.Stat(s.DBPath); err != nil {
		return nil
	}
	db, err := sqlitedb.Open(ctx, s.DBPath, sqlitedb.Options{ReadOnly: true})
	if err != nil {
		return []host.ServiceStatus{{Name: "mail roles", State: host.StateUnknown, Detail: "mail mirror unreadable: " + err.Error()}}
	}
	defer db.Close()
	names, err := mirror.UnclassifiedMailboxes(ctx, db)
	if err != nil {
		return []host.ServiceStatus{{Name: "mail roles", State: host.StateUnknown, Detail: err.Error()}}
	}
	if note := mail.RoleNote(s.ClassifyOff, names); note != "" {
		return []host.ServiceStatus{{Name: "mail roles", State: host.StateWarning, Detail: note}}
	}
	return nil
}

// progressLine rewrites one status line on a terminal and prints plain
// lines elsewhere (logs, pipes).
type progressLine struct {
	w   io.Writer
	tty bool
	n   int
}

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progressLine) update(s string, final bool) {
	switch {
	case p.tty:
		pad := ""
		if len(s) < p.n {
			pad = strings.Repeat(" ", p.n-len(s))
		}
		fmt.Fprintf(p.w, "\r%s%s", s, pad)
		p.n = len(s)
		if final {
			fmt.Fprintln(p.w)
		}
	default:
		fmt.Fprintln(p.w, s)
	}
}

func syncFlags(env *cliEnv, name, description string) (*flag.FlagSet, *bool, *string, *int) {
	fs := newFlagSet(env, "mail "+name, "[options]", description)
	asJSON := fs.Bool("json", false, "print the summary as JSON on stdout")
	account := fs.String("account", "", "limit the run to this account")
	workers := fs.Int("workers", 0, "parallel parsers (default: one per core)")
	return fs, asJSON, account, workers
}

func runSync(ctx context.Context, env *cliEnv, mode mirror.Mode, args []string, description string) error {
	fs, asJSON, account, workers := syncFlags(env, mode.String(), description)
	full := new(bool)
	if mode == mirror.Reconcile {
		full = fs.Bool("full", false, fmt.Sprintf("list every Maildir folder, even those whose directory time shows no change\n(otherwise a reconcile does once the last full one is %s old)", mirror.DefaultFullAfter))
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, store, err := openMirror(ctx, env)
	if err != nil {
		return asNotConfigured(err, mail.ErrNoConfig)
	}
	defer store.Close()
	opts := mirror.SyncOptions{Mode: mode, Workers: *workers, Full: *full}
	if *account != "" {
		opts.Accounts = []string{*account}
	}
	line := newProgressLine(env.Stderr)
	opts.Progress = func(p mirror.Progress) { line.update(p.String(), p.Final) }
	st, err := store.Sync(ctx, opts)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s interrupted; what was committed is kept and the next run resumes", mode)
		}
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "%s: %d files, %d new, %d updated, %d extra copies, %d renamed, %d unchanged, %d removed paths, %d soft-deleted, %d errors in %s\n",
		mode, st.Scanned, st.New, st.Updated, st.PathOnly, st.Renamed, st.Unchanged, st.Removed, st.SoftDeleted, st.Errors, st.Duration.Round(time.Millisecond))
	if st.SkippedFolders > 0 {
		fmt.Fprintf(env.Stdout, "  %d unchanged Maildir folders not listed (--full lists them)\n", st.SkippedFolders)
	}
	for _, u := range st.Unreadable {
		fmt.Fprintf(env.Stdout, "  unreadable (kept as it was): %s\n", u)
	}
	if st.Errors > 0 {
		fmt.Fprintln(env.Stdout, "  run 'steward mail status' to see the files that could not be read")
	}
	return nil
}

func mailBackfill(ctx context.Context, env *cliEnv, args []string) error {
	return runSync(ctx, env, mirror.Backfill, args, "Imports every message file not yet mirrored, newest first, with a progress line.\n"+
		"Interrupting it keeps what was committed; running it again resumes.")
}

func mailReconcile(ctx context.Context, env *cliEnv, args []string) error {
	return runSync(ctx, env, mirror.Reconcile, args, "Diffs paths and modification times against the mirror: removes vanished paths,\n"+
		"ingests new and changed files, soft-deletes messages left without any file.\n"+
		"Maildir folders whose cur/ and new/ times are unchanged since the last reconcile are not\n"+
		"listed again (as notmuch new does); Apple Mail folders always are.")
}

func mailWatch(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "mail watch", "[options]", "Ingests new, changed and removed message files as file events arrive, and runs a full\n"+
		"reconcile at start and every interval (events are an optimisation; reconcile is authoritative).")
	interval := fs.Duration("interval", 10*time.Minute, "full reconcile interval")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, store, err := openMirror(ctx, env)
	if err != nil {
		return err
	}
	defer store.Close()
	err = store.Watch(ctx, mirror.WatchOptions{Reconcile: *interval, OnSync: func(st mirror.SyncStats, err error) {
		if err != nil {
			env.Log.Error("mail sync failed", "mode", st.Mode, "err", err)
			return
		}
		if st.New+st.Updated+st.Removed+st.SoftDeleted+st.Errors+st.Renamed > 0 {
			env.Log.Info("mail synced", "mode", st.Mode, "new", st.New, "updated", st.Updated, "renamed", st.Renamed,
				"removed", st.Removed, "softDeleted", st.SoftDeleted, "errors", st.Errors)
		}
	}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func mailEmbed(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "mail embed", "[options]", "Embeds messages without a current vector through the gateway's local-embed model\n"+
		"(MAIL_EMBED_ENDPOINT; off disables), newest first, in batches of MAIL_EMBED_BATCH.")
	loop := fs.Bool("loop", false, "keep running: drain the backlog, then wait; back off while the endpoint is down")
	limit := fs.Int("limit", 0, "stop after this many messages (default: the whole backlog)")
	asJSON := fs.Bool("json", false, "print the summary as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := mailSettings(env)
	if err != nil {
		return asNotConfigured(err, mail.ErrNoConfig)
	}
	emb := s.Embedder("mail-mirror", "embed")
	if emb == nil {
		return notConfiguredError{fmt.Errorf("embeddings are off (%s); search stays lexical", s.EmbedOff)}
	}
	store, err := mirrorFor(ctx, env, s)
	if err != nil {
		return err
	}
	defer store.Close()
	line := newProgressLine(env.Stderr)
	opts := mirror.EmbedOptions{Embedder: emb, Model: s.EmbedModel, Batch: s.EmbedBatch, Limit: *limit,
		Progress: func(st mirror.EmbedStats) {
			line.update(fmt.Sprintf("embed: %d embedded, %d failed, %d pending", st.Embedded, st.Failed, st.Pending), false)
		}}
	if *loop {
		err := store.EmbedLoop(ctx, mirror.EmbedLoopOptions{EmbedOptions: opts, OnRun: func(st mirror.EmbedStats, err error) {
			if err != nil {
				env.Log.Warn("mail embedding paused", "err", err, "cause", st.LastError, "pending", st.Pending)
			} else if st.Embedded > 0 {
				env.Log.Info("mail embedded", "embedded", st.Embedded, "failed", st.Failed, "pending", st.Pending)
			}
		}})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	st, err := store.Embed(ctx, opts)
	line.update(fmt.Sprintf("embed: %d embedded, %d failed, %d pending", st.Embedded, st.Failed, st.Pending), true)
	if *asJSON {
		if werr := writeJSON(env.Stdout, st); werr != nil {
			return werr
		}
	}
	if errors.Is(err, mirror.ErrEmbedUnavailable) {
		return fmt.Errorf("%w (%s); %d messages stay pending for the next run", err, st.LastError, st.Pending)
	}
	return err
}

func mailReindex(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "mail reindex", "[options]", "Rebuilds the FTS5 and trigram indexes and thread counts from the message rows.")
	vectors := fs.Bool("vectors", false, "also drop every vector; 'steward mail embed' rebuilds them")
	asJSON := fs.Bool("json", false, "print the summary as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, store, err := openMirror(ctx, env)
	if err != nil {
		return err
	}
	defer store.Close()
	st, err := store.Reindex(ctx, mirror.ReindexOptions{Vectors: *vectors})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, st)
	}
	fmt.Fprintf(env.Stdout, "reindexed %d messages in %d threads in %s\n", st.Messages, st.Threads, st.Duration.Round(time.Millisecond))
	return nil
}

func mailStatus(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "mail status", "[options]", "Shows what the mirror holds and the files it could not read.")
	asJSON := fs.Bool("json", false, "print as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, store, err := openMirror(ctx, env)
	if err != nil {
		return err
	}
	defer store.Close()
	st, err := store.Stats(ctx)
	if err != nil {
		return err
	}
	errs, err := store.IngestErrors(ctx, 20)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"stats": st, "ingestErrors": errs, "config": s.Config.Source, "database": s.DBPath})
	}
	fmt.Fprintf(env.Stdout, "mirror %s (accounts from %s)\n", s.DBPath, s.Config.Source)
	fmt.Fprintf(env.Stdout, "  %d messages (%d partial, %d without body), %d deleted, %d threads, %d attachments\n",
		st.Messages, st.PartialBodies, st.NoBodies, st.Deleted, st.Threads, st.Attachments)
	fmt.Fprintf(env.Stdout, "  %d embedded, %d pending", st.Embedded, st.PendingEmbeds)
	if st.VectorDim > 0 {
		fmt.Fprintf(env.Stdout, " (%s, %d dimensions)", st.VectorModel, st.VectorDim)
	}
	fmt.Fprintln(env.Stdout)
	if names, err := mirror.UnclassifiedMailboxes(ctx, store.DB()); err == nil {
		if note := mail.RoleNote(s.ClassifyOff, names); note != "" {
			fmt.Fprintln(env.Stdout, "  "+note)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(env.Stdout, "  %d files could not be read; the latest:\n", st.IngestErrors)
		for _, e := range errs {
			fmt.Fprintf(env.Stdout, "    %s: %s\n", e.Path, e.Error)
		}
	}
	return nil
}

// mailMCP builds `steward mcp mail`. The mirror is opened once read-write so
// that its schema exists, then searched through read-only connections.
func mailMCP(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
	s, err := mailSettings(env)
	if errors.Is(err, mail.ErrNoConfig) {
		// Serve the tools anyway, so that the agent can say what to
		// configure, and open the mirror once mail.yaml exists.
		// One readable line: the host forwards it into its own log, where
		// the multi-line mail.yaml example would be one escaped string.
		env.Log.Warn("mail connector started without accounts: " + localsource.AdviceHead(err.Error()) +
			"; its read tools start working once mail.yaml exists, sending needs a restart")
		return server.NewDeferred(func(ctx context.Context) (server.Options, error) {
			s, err := mailSettings(env)
			if err != nil {
				return server.Options{}, err
			}
			return mailReadOptions(ctx, env, s)
		}, version)
	}
	if err != nil {
		return nil, err
	}
	opts, err := mailReadOptions(ctx, env, s)
	if err != nil {
		return nil, err
	}
	// The writes live as long as the connector process; so do their stores.
	j, err := openJournal(ctx, env, audit.ActorHost)
	if err != nil {
		return nil, err
	}
	w, err := openMailWriter(ctx, env, j)
	if err != nil {
		return nil, err
	}
	opts.Sender = w
	return server.New(opts)
}

// mailReadOptions opens what the mail read tools need: the mirror (created
// if missing), its blobs and the search engine.
func mailReadOptions(ctx context.Context, env *cliEnv, s *mail.Settings) (server.Options, error) {
	store, err := mirrorFor(ctx, env, s)
	if err != nil {
		return server.Options{}, err
	}
	store.Close()
	blobs, err := mirror.NewBlobs(s.BlobDir)
	if err != nil {
		return server.Options{}, err
	}
	cfg, err := env.Config()
	if err != nil {
		return server.Options{}, err
	}
	engine, err := search.Open(ctx, search.Options{DBPath: s.DBPath, Embedder: s.Embedder("mail-mcp", "query-embed"), SemanticOff: s.EmbedOff,
		Live: search.NewLiveMailReader(), Log: env.Log})
	if err != nil {
		return server.Options{}, err
	}
	return server.Options{Engine: engine, Blobs: blobs, Version: version, Log: env.Log,
		Guard: server.NewGuard(mail.UserHome(), cfg.Home)}, nil
}

func mailBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench mail", "[options]", "Generates a synthetic Maildir at the reference archive's scale (78,000 messages, about\n"+
		"45,000 threads, 46% partial/none bodies, about 13,900 attachments, 1,024-dimension vectors),\n"+
		"times 'steward mail backfill' beside 'notmuch new', then runs every retrieval case in a fresh\n"+
		"process (first query + warm samples, median and p95) beside C SQLite and sqlite-vec's exact KNN.\n"+
		"Writes a JSON report. Needs several GB of disk and a few minutes; see docs/benchmarks/mail.md.")
	out := fs.String("out", "mail-bench.json", "report file")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards)")
	keep := fs.Bool("keep", false, "keep the working folder")
	messages := fs.Int("messages", 78000, "active messages to generate")
	dim := fs.Int("dim", 1024, "vector dimension")
	samples := fs.Int("samples", 30, "warm samples per case")
	runCase := fs.String("run-case", "", "internal: run one case in this process ("+bench.CaseNames()+")")
	engine := fs.String("engine", "go", "internal: SQLite engine of --run-case (go, or c in a binary built with -tags 'csqlite fts5')")
	db := fs.String("db", "", "internal: database of --run-case")
	cold := fs.Bool("cold", false, "internal: --run-case without the start-up warm-up of the connection")
	qvec := fs.String("query-vector", "", "internal: query vector file of --run-case")
	subjectWord := fs.String("subject-word", "quarterly", "internal: subject substring of --run-case")
	bodyWord := fs.String("body-word", "project", "internal: body word of --run-case")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *runCase != "" {
		o := bench.CaseOptions{Engine: bench.Engine(*engine), DBPath: *db, Samples: *samples, Cold: *cold}
		return bench.RunNamedCase(ctx, *runCase, o, *qvec, *subjectWord, *bodyWord, env.Stdout)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the steward executable: %w", err)
	}
	rep, err := bench.Run(ctx, bench.RunOptions{Dir: *dir, Keep: *keep, Messages: *messages, Dim: *dim, Samples: *samples, Self: self, Log: env.Stderr})
	if err != nil {
		return err
	}
	rep.Command = "steward bench mail " + strings.Join(args, " ")
	if err := writeJSONFile(*out, rep); err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, rep.Summary())
	fmt.Fprintf(env.Stdout, "report written to %s\n", *out)
	return nil
}
