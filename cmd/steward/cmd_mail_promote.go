package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/dirlock"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/connectors/mail/promote"
	"github.com/agentstack/agentstack/steward/connectors/mail/promote/promotebench"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/wiki"
)

// promoterTimeout bounds one triage call.
const promoterTimeout = 3 * time.Minute

// promoterSettings are the MAIL_PROMOTER_* settings.
type promoterSettings struct {
	endpoint string // API base (…/v1); "" when off
	off      string // the setting that turned promotion off
	model    string
	workers  int
	apiKey   string
}

func readPromoterSettings(cfg *config.Config) (*promoterSettings, error) {
	s := &promoterSettings{
		model:   cfg.String("MAIL_PROMOTER_MODEL", "tier-5"),
		workers: int(cfg.Int("MAIL_PROMOTER_CONCURRENCY", 10, 1, 64)),
		apiKey:  cfg.String("GATEWAY_API_KEY", ""),
	}
	switch ep := cfg.String("MAIL_PROMOTER_LLM_ENDPOINT", "gateway"); strings.ToLower(ep) {
	case "off", "none", "disabled", "0", "false":
		s.off = "MAIL_PROMOTER_LLM_ENDPOINT=" + ep
	case "gateway":
		s.endpoint = cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1")
	default:
		// The setting names the full chat-completions endpoint; the client
		// takes its API base.
		s.endpoint = strings.TrimSuffix(strings.TrimRight(cfg.URL("MAIL_PROMOTER_LLM_ENDPOINT", ""), "/"), "/chat/completions")
	}
	return s, cfg.Err()
}

// promoterStatePath is the promotion state store.
func promoterStatePath(home string) string {
	return filepath.Join(home, "mail-promoter", "state.db")
}

// openPromoter assembles the pipeline from the settings; close releases
// everything it opened. Missing configuration is a notConfiguredError
// (exit 3, which the scheduler reports as skipped).
func openPromoter(ctx context.Context, env *cliEnv, workers int) (p *promote.Promoter, closeAll func(), err error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, nil, err
	}
	ps, err := readPromoterSettings(cfg)
	if err != nil {
		return nil, nil, err
	}
	if ps.off != "" {
		return nil, nil, notConfiguredError{fmt.Errorf("mail promotion is off (%s)", ps.off)}
	}
	ms, err := mailSettings(env)
	if err != nil {
		return nil, nil, asNotConfigured(err, mail.ErrNoConfig)
	}
	if _, err := os.Stat(ms.DBPath); errors.Is(err, os.ErrNotExist) {
		return nil, nil, notConfiguredError{fmt.Errorf("the mail mirror %s does not exist yet; run `steward mail backfill` first", ms.DBPath)}
	}
	ws, err := readWikiSettings(cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(ws.dir); errors.Is(err, os.ErrNotExist) {
		if _, set := cfg.Lookup("STEWARD_WIKI_DIR"); set {
			return nil, nil, notConfiguredError{fmt.Errorf("the wiki %s (STEWARD_WIKI_DIR) does not exist; create it with `steward wiki init`", ws.dir)}
		}
		if err := wiki.InitVault(ws.dir); err != nil {
			return nil, nil, err
		}
		env.Log.Info("created the wiki", "dir", ws.dir)
	}
	var closers []func() error
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	// One run at a time: the scheduler's and a manual one would triage the
	// same threads twice.
	lock, err := dirlock.Acquire(filepath.Dir(promoterStatePath(cfg.Home)))
	if err != nil {
		return nil, nil, fmt.Errorf("another `steward mail promote` is running: %w", err)
	}
	closers = append(closers, lock.Release)
	reader, err := threads.Open(ctx, ms.DBPath)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, reader.Close)
	state, err := promote.OpenStore(ctx, promoterStatePath(cfg.Home))
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, state.Close)
	blobs, err := mirror.NewBlobs(ms.BlobDir)
	if err != nil {
		return nil, nil, err
	}
	opts := promote.Options{Threads: reader, State: state, Blobs: blobs, VaultDir: ws.dir, Log: env.Log,
		Model: llm.NewClient(llm.ClientOptions{BaseURL: ps.endpoint, APIKey: ps.apiKey,
			HTTPClient: &http.Client{Timeout: promoterTimeout}}),
		ModelName: ps.model, Workers: ps.workers,
		Rescan: &wikiAPIRescan{base: ws.apiBase, token: ws.apiToken, tokenFile: filepath.Join(cfg.Home, "wiki-api-token")}}
	if workers > 0 {
		opts.Workers = workers
	}
	if led, err := audit.Open(ctx, filepath.Join(cfg.Home, "audit.db"), audit.Options{Logger: env.Log}); err != nil {
		env.Log.Warn("mail promotion runs without the audit ledger", "err", err)
	} else {
		opts.Audit = led
		closers = append(closers, led.Close)
	}
	p, err = promote.New(opts)
	if err != nil {
		return nil, nil, err
	}
	return p, closeAll, nil
}

// wikiAPIRescan asks the wiki's HTTP API (served by `steward serve`) to
// rescan; the notes are on disk whether or not it answers.
type wikiAPIRescan struct {
	base, token, tokenFile string
}

func (w *wikiAPIRescan) Rescan(ctx context.Context) error {
	token := w.token
	if token == "" {
		b, err := os.ReadFile(w.tokenFile)
		if err != nil {
			return fmt.Errorf("wiki API unavailable: no LLM_WIKI_API_TOKEN and no %s (`steward serve` creates it)", w.tokenFile)
		}
		token = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.base, "/")+"/rescan", nil)
	if err != nil {
		return fmt.Errorf("wiki API unavailable: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("wiki API unavailable at %s (is `steward serve` running?): %w", w.base, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("wiki API rescan: %s: %s", res.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// parseSince reads --since: "all", a date (2006-01-02), or a number of
// days ("30d") or a duration ("36h").
func parseSince(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "" || v == "all":
		return time.Time{}, nil
	case strings.HasSuffix(v, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(v, "d"))
		if err == nil && n > 0 {
			return now.AddDate(0, 0, -n), nil
		}
	default:
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return now.Add(-d), nil
		}
		if t, err := time.ParseInLocation("2006-01-02", v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: use all, a date (2026-01-31), days (30d) or a duration (36h)", v)
}

func mailPromote(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "mail promote", "[--since WHEN] [--limit N] [--dry-run] [--json]",
		"Promotes durable knowledge from mail threads into the wiki (spec: Email To LLM Wiki Promotion).\n"+
			"Recently active threads are read from the mirror, most recent first. A thread whose content\n"+
			"hash is already recorded is not looked at again; noise (no-reply and bulk senders, mailing\n"+
			"lists, junk/trash/drafts, automatic replies, empty bodies) is filtered without a model call.\n"+
			"Each other thread gets one structured model call (MAIL_PROMOTER_LLM_ENDPOINT, model\n"+
			"MAIL_PROMOTER_MODEL, attributed mail-promoter / triage) deciding whether it holds durable\n"+
			"knowledge and which attachments are lasting documents. Durable threads are written as\n"+
			"raw/sources/mail/mail-thread-<id>.md in the wiki (the same file is rewritten when the thread\n"+
			"changes); selected attachments are copied to raw/sources/mail/attachments/. Threads whose\n"+
			"model call fails or answers unusable JSON are deferred and retried by the next run.\n"+
			"MAIL_PROMOTER_CONCURRENCY threads are triaged at once (default 10). After a batch that wrote\n"+
			"something, the wiki API (steward serve) is asked to rescan once.\n"+
			"State: STEWARD_HOME/mail-promoter/state.db. Exit status 3: not configured.")
	sinceFlag := fs.String("since", "30d", "threads active since: all, a date (2026-01-31), days (30d) or a duration (36h)")
	limit := fs.Int("limit", 0, "at most this many threads, most recent first (default: all since --since)")
	dryRun := fs.Bool("dry-run", false, "read and prefilter only: list what the model would be asked, call nothing, write nothing")
	workers := fs.Int("workers", 0, "parallel triage calls (default MAIL_PROMOTER_CONCURRENCY)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	since, err := parseSince(*sinceFlag, time.Now())
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return errUsage
	}
	p, closeAll, err := openPromoter(ctx, env, *workers)
	if err != nil {
		return err
	}
	defer closeAll()
	line := newProgressLine(env.Stderr)
	last := time.Time{}
	rep, err := p.Run(ctx, promote.RunOptions{Since: since, Limit: *limit, DryRun: *dryRun, Progress: func(pr promote.Progress) {
		// On a terminal every thread; in a log, at most one line a second.
		if line.tty || time.Since(last) >= time.Second || pr.Done == pr.Total {
			last = time.Now()
			line.update(pr.String(), false)
		}
	}})
	if rep == nil {
		return err
	}
	if line.tty {
		line.update(promote.Progress{Done: rep.Candidates, Total: rep.Candidates, Counts: rep.Counts}.String(), true)
	}
	if *asJSON {
		if werr := writeJSON(env.Stdout, rep); werr != nil {
			return werr
		}
	} else {
		printPromoteReport(env.Stdout, rep)
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted; what finished is recorded and the next run continues")
	}
	if err != nil {
		return err
	}
	if rep.ModelUnavailable {
		return fmt.Errorf("the model endpoint is unavailable; %d thread(s) deferred to the next run", rep.Deferred)
	}
	return nil
}

func printPromoteReport(w io.Writer, rep *promote.Report) {
	if rep.DryRun {
		fmt.Fprintf(w, "dry run: %d threads — %d unchanged, %d filtered, %d would go to the model\n",
			rep.Candidates, rep.Unchanged, rep.Filtered, rep.WouldTriage)
	} else {
		fmt.Fprintf(w, "promote: %d threads — %d promoted, %d skipped, %d filtered, %d deferred, %d unchanged; %d model calls, %d notes and %d attachments written in %s\n",
			rep.Candidates, rep.Promoted, rep.Skipped, rep.Filtered, rep.Deferred, rep.Unchanged, rep.ModelCalls, rep.Notes, rep.Files,
			(time.Duration(rep.DurationMS) * time.Millisecond).String())
	}
	for _, it := range rep.Items {
		detail := it.Reason
		if it.Note != "" {
			detail += " → " + it.Note
		}
		fmt.Fprintf(w, "  %-9s %s %q: %s\n", it.Outcome, it.Key, it.Subject, detail)
	}
	if rep.More > 0 {
		fmt.Fprintf(w, "  … and %d more (--json lists up to the same number)\n", rep.More)
	}
	switch rep.Rescan {
	case "failed":
		fmt.Fprintf(w, "wiki rescan failed (%s); the notes are written — the wiki picks them up at its next rescan, or run `steward wiki reindex`\n", rep.Error)
	case "done":
		fmt.Fprintln(w, "wiki rescanned")
	}
}

// mailPromotionStatus is the System page's line for promotion: threads per
// recorded outcome and the last run.
func mailPromotionStatus(ctx context.Context, cfg *config.Config) []host.ServiceStatus {
	p := promoterStatePath(cfg.Home)
	if _, err := os.Stat(p); err != nil {
		return []host.ServiceStatus{{Name: "mail promotion", State: host.StateUnknown, Detail: "not run yet (the scheduler's mail-distill job runs `steward mail promote`)"}}
	}
	sum, err := promote.ReadSummary(ctx, p)
	if err != nil {
		return []host.ServiceStatus{{Name: "mail promotion", State: host.StateError, Detail: "promotion state unreadable: " + err.Error()}}
	}
	return []host.ServiceStatus{promotionServiceStatus(sum)}
}

func promotionServiceStatus(sum *promote.Summary) host.ServiceStatus {
	s := host.ServiceStatus{Name: "mail promotion", State: host.StateOK}
	s.Detail = fmt.Sprintf("threads: %d promoted, %d skipped, %d filtered", sum.Threads[promote.OutcomePromoted],
		sum.Threads[promote.OutcomeSkipped], sum.Threads[promote.OutcomeFiltered])
	r := sum.LastRun
	if r == nil {
		return s
	}
	s.Detail += fmt.Sprintf("; last run %s: %d candidates — %d promoted, %d skipped, %d filtered, %d deferred, %d unchanged, %d model calls",
		r.FinishedAt.Format(time.RFC3339), r.Candidates, r.Promoted, r.Skipped, r.Filtered, r.Deferred, r.Unchanged, r.ModelCalls)
	if r.Deferred > 0 {
		s.State = host.StateWarning
		s.Detail += " (deferred threads are retried by the next run)"
	}
	if r.Rescan == "failed" {
		s.State = host.StateWarning
		s.Detail += "; wiki rescan failed: " + r.Error
	}
	return s
}

func init() {
	registerBench(&benchmark{Name: "promote", Summary: "mail → wiki promotion: 1 vs 10 workers against a 50 ms scripted model, unchanged rerun, prefilter share", Run: promoteBench})
}

func promoteBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench promote", "[options]", "Generates a mirror of candidate threads, promotes it against a scripted OpenAI-compatible model\n"+
		"on loopback that answers after --latency, once per --workers value (fresh state and wiki each\n"+
		"time), reruns the last over the unchanged mirror, and runs the prefilter over the synthetic archive\n"+
		"at the reference scale (78,000 messages; a few minutes) to report the share it rejects.\n"+
		"Writes a JSON report; see docs/benchmarks.md.")
	out := fs.String("out", "promote-bench.json", "report file")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards)")
	keep := fs.Bool("keep", false, "keep the working folder")
	nThreads := fs.Int("threads", 1000, "candidate threads")
	latency := fs.Duration("latency", 50*time.Millisecond, "the scripted model's answer time")
	workers := fs.String("workers", "1,10", "worker counts to compare, comma-separated (the first and last are compared)")
	archive := fs.Int("archive-messages", 78000, "messages of the archive the prefilter share is measured on (0 skips it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var ws []int
	for _, f := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(env.Stderr, "--workers %q: give positive numbers separated by commas\n", *workers)
			return errUsage
		}
		ws = append(ws, n)
	}
	if *archive == 0 {
		*archive = -1
	}
	rep, err := promotebench.Run(ctx, promotebench.Options{Dir: *dir, Keep: *keep, Threads: *nThreads, Workers: ws, Latency: *latency,
		ArchiveMessages: *archive, Log: env.Stderr})
	if err != nil {
		return err
	}
	rep.Command = "steward bench promote " + strings.Join(args, " ")
	if err := writeJSONFile(*out, rep); err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, rep.Summary())
	fmt.Fprintf(env.Stdout, "report written to %s\n", *out)
	return nil
}
