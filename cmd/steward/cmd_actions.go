package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/actions/actionsbench"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/usage"
)

// actionsJobs are the `steward actions JOB` subcommands.
var actionsJobs = []job{
	{"scan", "scan new mail and upcoming events into Action Center items (the scheduler's action-center job)", actionsScan},
	{"list", "list Action Center items (open ones by default)", actionsList},
	{"show", "show one item with its proposal, diagnostics and context snapshot", actionsShow},
}

func init() {
	register(&command{
		Name:    "actions",
		Summary: "the Action Center: scan mail and calendar into items with proposals, list and show them",
		Run:     jobCommand("actions", "Items live in STEWARD_HOME/action-center/actions.db; see docs/actions.md.", actionsJobs),
	})
	registerMCP("actions", actionsMCP)
	registerBench(&benchmark{Name: "actions", Summary: "list_actions over 100,000 items against C SQLite, 10,000 calendar reminders, a scan's model calls at archive scale", Run: actionsBench})
}

// actionsStore is the store with the audit ledger it reports to.
type actionsStore struct {
	*actions.Store
	audit *audit.Ledger
}

// Close flushes the audit events and closes both stores.
func (a *actionsStore) Close() error {
	err := a.Store.Close()
	if a.audit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.audit.Flush(ctx)
		cancel()
		a.audit.Close()
	}
	return err
}

// openActions opens STEWARD_HOME/action-center/actions.db, reporting to
// STEWARD_HOME/audit.db as actor (best-effort, as everywhere).
func openActions(ctx context.Context, env *cliEnv, actor string) (*actionsStore, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	a := &actionsStore{}
	opts := actions.Options{Actor: actor}
	if a.audit, err = audit.Open(ctx, filepath.Join(cfg.Home, "audit.db"), audit.Options{Logger: env.Log}); err != nil {
		env.Log.Warn("the Action Center runs without the audit ledger", "err", err)
		a.audit = nil
	} else {
		opts.Audit = a.audit
	}
	if a.Store, err = actions.Open(ctx, actions.Path(cfg.Home), opts); err != nil {
		if a.audit != nil {
			a.audit.Close()
		}
		return nil, err
	}
	return a, nil
}

// actionsModel is the planner over the gateway (HOST_TIER).
func actionsModel(env *cliEnv) (*actions.Planner, error) {
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	client := llm.NewClient(llm.ClientOptions{BaseURL: cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"), APIKey: cfg.String("GATEWAY_API_KEY", "sk-local")})
	return &actions.Planner{Model: client, ModelName: cfg.String("HOST_TIER", "tier-5")}, cfg.Err()
}

func actionsMCP(ctx context.Context, env *cliEnv) (*mcp.Server, error) {
	planner, err := actionsModel(env)
	if err != nil {
		return nil, err
	}
	cfg, _ := env.Config()
	var (
		mu    sync.Mutex
		store *actionsStore
	)
	open := func(ctx context.Context) (*actions.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		if store == nil {
			s, err := openActions(ctx, env, audit.ActorAgent)
			if err != nil {
				return nil, err
			}
			store = s
		}
		return store.Store, nil
	}
	return actions.NewServer(actions.ServerOptions{Open: open, Planner: planner, Version: version,
		Flows: newLocalEmbedder(cfg, "gateway", actions.Service, actions.AttrFlowRetrieve.Action, 10*time.Second)}), nil
}

// bridgeReader runs the planner's read-only lookups through Steward's own
// connectors as MCP child processes, started on first use.
type bridgeReader struct {
	env    map[string]string
	once   sync.Once
	bridge *mcpbridge.Bridge
	err    error
}

func (r *bridgeReader) Read(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	server, name, ok := mcpbridge.SplitToolName(tool)
	if !ok {
		return "", fmt.Errorf("%s is not a connector tool", tool)
	}
	r.once.Do(func() {
		self, err := os.Executable()
		if err != nil {
			r.err = err
			return
		}
		var servers []mcpbridge.ServerConfig
		for _, n := range []string{"mail", "calendar", "contacts", "wiki"} {
			if _, ok := mcpServers[n]; ok {
				servers = append(servers, mcpbridge.ServerConfig{Name: n, Command: self, Args: []string{"mcp", n}, Env: r.env})
			}
		}
		r.bridge = mcpbridge.New(mcpbridge.Options{Servers: servers})
		r.bridge.Start(context.WithoutCancel(ctx))
	})
	if r.err != nil {
		return "", r.err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := r.bridge.Session(sctx, server)
	if err != nil {
		return "", fmt.Errorf("connector %s: %w", server, err)
	}
	var m map[string]any
	json.Unmarshal(args, &m)
	res, err := sess.CallTool(sctx, &mcp.CallToolParams{Name: name, Arguments: m})
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", errors.New(b.String())
	}
	return b.String(), nil
}

func (r *bridgeReader) Close() {
	if r.bridge != nil {
		r.bridge.Close()
	}
}

func actionsScan(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "actions scan", "[options]",
		"Runs both Action Center producers once. Calendar: indexed, non-cancelled events starting within\n"+
			"ACTION_CENTER_CALENDAR_DAYS (3) become event-reminder items, without a model call. Mail: the first run\n"+
			"marks the last 14 days seen (ACTION_CENTER_NO_SEED=1 reviews them instead); later runs take genuinely new\n"+
			"message ids (at most 300), drop junk, no-reply, bulk, survey and empty mail deterministically, and let the\n"+
			"model (HOST_TIER through the gateway) analyse at most 50 threads, read related mail/calendar/contacts/wiki\n"+
			"and propose steps. Nothing is sent: every proposed write needs the user's approval when executed.\n"+
			"Exits 3 when neither mail nor a calendar index is configured.")
	asJSON := fs.Bool("json", false, "print the report as JSON (the scheduler reads it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	days := int(cfg.Int("ACTION_CENTER_CALENDAR_DAYS", actions.DefaultCalendarDays, 1, 60))
	noSeed := cfg.Bool("ACTION_CENTER_NO_SEED", false)
	calPath := cfg.Path("CALENDAR_INDEX_DB", filepath.Join(cfg.Home, "calendar-index.sqlitedb"))
	if err := cfg.Err(); err != nil {
		return err
	}
	opts := actions.ScanOptions{NoSeed: noSeed, Calendar: actions.ReminderOptions{IndexPath: calPath, Days: days}}
	if !*asJSON {
		opts.Progress = func(line string) { fmt.Fprintln(env.Stderr, line) }
	}
	ms, mailErr := mailSettings(env)
	if mailErr != nil && !errors.Is(mailErr, mail.ErrNoConfig) {
		return mailErr // a broken mail.yaml is reported, never skipped quietly
	}
	if _, calErr := os.Stat(calPath); mailErr != nil && calErr != nil {
		return notConfiguredError{fmt.Errorf("the Action Center has nothing to scan: %w, and no calendar index at %s", mailErr, calPath)}
	}
	store, err := openActions(ctx, env, audit.ActorScheduler)
	if err != nil {
		return err
	}
	defer store.Close()
	var mailNote string
	if mailErr == nil {
		r, err := threads.Open(ctx, ms.DBPath)
		if err != nil {
			mailNote = "mail mirror not readable yet (run `steward mail reconcile`): " + err.Error()
		} else {
			defer r.Close()
			opts.Mail = r
		}
	}
	if opts.Planner, err = actionsModel(env); err != nil {
		return err
	}
	reader := &bridgeReader{env: ownChildEnv(cfg, cfg.URL("GATEWAY_BASE_URL", "http://127.0.0.1:4000/v1"), cfg.String("GATEWAY_API_KEY", ""))}
	defer reader.Close()
	opts.Context = reader
	opts.Flows = actions.FlowEmbedders{
		Index: newLocalEmbedder(cfg, "gateway", actions.Service, actions.AttrFlowIndex.Action, 30*time.Second),
		Query: newLocalEmbedder(cfg, "gateway", actions.Service, actions.AttrFlowRetrieve.Action, 30*time.Second)}
	if ledger, err := usage.Open(ctx, filepath.Join(cfg.Home, "usage.db"), usage.Options{Logger: env.Log}); err == nil {
		defer ledger.Close()
		opts.Record = func(ctx context.Context, tool string, d time.Duration, ok bool, errText string) {
			ledger.RecordTool(ctx, usage.ToolCall{Time: time.Now(), Service: actions.Service, Action: "background-read", Tool: tool, Duration: d, OK: ok, Error: errText})
		}
	}
	rep, err := store.Scan(ctx, opts)
	if err != nil {
		return err
	}
	if mailNote != "" {
		rep.Mail = mailNote
	} else if mailErr != nil {
		rep.Mail = "mail not configured: " + mailErr.Error()
	}
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	printScanReport(env, rep)
	return nil
}

func printScanReport(env *cliEnv, rep *actions.ScanReport) {
	w := env.Stdout
	if rep.Disabled {
		fmt.Fprintln(w, "The Action Center is disabled (System page or POST /settings/actions); nothing scanned.")
		return
	}
	if rep.Mail != "" {
		fmt.Fprintf(w, "mail: %s\n", rep.Mail)
	}
	fmt.Fprintf(w, "mail: %d in the pool, %d new, %d threads; %d seeded as seen\n", rep.Pool, rep.NewMessages, rep.Threads, rep.Seeded)
	fmt.Fprintf(w, "  prefilter rejected %d threads %v\n", rep.Prefiltered, rep.Rejections)
	fmt.Fprintf(w, "  analysed %d (%d model calls, %d context reads): %d created, %d updated, %d reopened, %d no action, %d failed (retried next scan), %d deferred\n",
		rep.Analysed, rep.ModelCalls, rep.Reads, rep.Created, rep.Updated, rep.Reopened, rep.NoAction, rep.Failed, rep.Deferred)
	if rep.Calendar.Skipped != "" {
		fmt.Fprintf(w, "calendar: %s\n", rep.Calendar.Skipped)
	} else {
		fmt.Fprintf(w, "calendar: %d upcoming events, %d reminders created, %d updated\n", rep.Calendar.Events, rep.Calendar.Created, rep.Calendar.Updated)
	}
	for _, d := range rep.Diagnostics {
		fmt.Fprintf(w, "  ! %s\n", d)
	}
}

func actionsList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "actions list", "[options]", "Lists Action Center items, most recently updated first.")
	all := fs.Bool("all", false, "include done and dismissed items")
	hideExpired := fs.Bool("hide-expired", false, "leave out items whose due date has passed")
	limit := fs.Int("limit", actions.DefaultListLimit, "at most this many (1–100)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	store, err := openActions(ctx, env, audit.ActorUser)
	if err != nil {
		return err
	}
	defer store.Close()
	res, err := store.List(ctx, actions.ListOptions{IncludeHandled: *all, HideExpired: *hideExpired, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env.Stdout, res)
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRIORITY\tDUE\tTITLE")
	for _, it := range res.Items {
		due := ""
		if it.DueAt != nil {
			due = it.DueAt.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", it.ID, it.Status, it.Priority, due, it.Title)
	}
	tw.Flush()
	fmt.Fprintf(env.Stdout, "open: %d new, %d read; done %d, dismissed %d\n", res.CountsTotal[actions.StatusNew], res.CountsTotal[actions.StatusRead],
		res.CountsTotal[actions.StatusDone], res.CountsTotal[actions.StatusDismissed])
	return nil
}

func actionsShow(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "actions show", "ID", "Prints one item as JSON: proposal, diagnostics and context snapshot.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if fs.NArg() != 1 || err != nil {
		fs.Usage()
		return errUsage
	}
	store, err := openActions(ctx, env, audit.ActorUser)
	if err != nil {
		return err
	}
	defer store.Close()
	it, err := store.Get(ctx, id)
	if err != nil {
		return err
	}
	return writeJSON(env.Stdout, it)
}

// startActions gives the host the Action Center: its web routes and
// settings on the authenticated mux, the host-native execute_action_step
// (which runs a step through the calling turn's policy wrapper), and the
// poll that announces new items by Web Push.
func startActions(ctx context.Context, d hostDeps, h *host.Host, notifier actions.Notifier, auditor actions.Auditor, st *stack) (agent.Tool, error) {
	store, err := actions.Open(ctx, actions.Path(d.sc.home), actions.Options{Audit: auditor, Actor: audit.ActorHost})
	if err != nil {
		return nil, err
	}
	st.push(store.Close)
	open := func(context.Context) (*actions.Store, error) { return store, nil }
	actions.Mount(h.Handle, open)
	loop := &actions.NotifierLoop{Store: store, Notifier: notifier, Log: d.log.With("component", "actions"),
		Interval: time.Duration(d.cfg.Clamp("ACTION_CENTER_NOTIFY_MS", 30000, 1000, 3600000)) * time.Millisecond}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); loop.Run(runCtx) }()
	st.push(func() error { stop(); wg.Wait(); return nil })
	return actions.ExecuteTool(actions.ExecuteOptions{Open: open, Dispatch: policy.CallWrapped,
		Record: func(ctx context.Context, tool string, dur time.Duration, ok bool, errText string) {
			chatID, _ := host.ChatIDFrom(ctx)
			d.ledger.RecordTool(ctx, usage.ToolCall{Time: time.Now(), Service: actions.Service, Action: "execute-step", ChatID: chatID,
				Tool: tool, Duration: dur, OK: ok, Error: errText})
		}}), nil
}

func actionsBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench actions", "[options]", "Measures the Action Center: (1) list_actions' default page over stored items, "+
		"beside the same SQL through C SQLite when built with -tags 'csqlite fts5': 60 rounds alternating the engines, 25 calls each a round, "+
		"the ratio being the median of the rounds' ratios of CPU time (user+sys; wall-clock ones beside), with its 10th–90th percentile spread; (2) calendar reminder "+
		"generation over indexed events (first pass and an unchanged pass); (3) a mail scan over a generated archive with the model "+
		"simulated in process, reporting model calls, analysed threads and the prefilter's rejections. Prints a JSON report; see docs/benchmarks.md.")
	items := fs.Int("items", 100000, "stored items for the list case")
	events := fs.Int("events", 10000, "indexed events for the reminder case")
	messages := fs.Int("messages", 78000, "generated archive for the scan case (negative skips it)")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards)")
	repeats := fs.Int("repeats", 5, "runs of the reminder passes, each into a new store; the report gives their medians")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	work := *dir
	if work == "" {
		tmp, err := os.MkdirTemp("", "steward-bench-actions-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	rep, err := actionsbench.Run(ctx, actionsbench.Options{Dir: work, Items: *items, Events: *events, Messages: *messages, Repeats: *repeats, Log: env.Stderr})
	if err != nil {
		return err
	}
	rep.Command = "steward bench actions " + strings.Join(args, " ")
	checks := actionsChecks(rep)
	printChecks(env.Stderr, checks)
	return writeJSON(env.Stdout, struct {
		*actionsbench.Report
		Checks []benchCheck `json:"checks"`
	}{rep, checks})
}

// actionsChecks evaluates the targets on a report.
func actionsChecks(rep *actionsbench.Report) []benchCheck {
	l := rep.List
	list := benchCheck{Target: fmt.Sprintf("list_actions warm median over %d items ≤ 2 × the same SQL through C SQLite", l.Items)}
	if l.C == nil {
		list.Measured = "no C baseline: " + l.CEngine + " (build with -tags 'csqlite fts5')"
	} else {
		list.Measured = fmt.Sprintf("%.3f ms vs %.3f ms (CPU %.3f vs %.3f); Go/C per round, median of %d rounds of %d calls: CPU %.2f × (p10–p90 %.2f–%.2f), "+
			"wall %.2f × (%.2f–%.2f); load average %s", l.Go.Median, l.C.Median, l.GoCPU.Median, l.CCPU.Median, l.Rounds, l.PerRound,
			l.Ratio, l.RatioP10, l.RatioP90, l.WallRatio, l.WallRatioP10, l.WallRatioP90, rep.LoadAverage)
		list.Met = l.Ratio <= 2
	}
	r := rep.Reminders
	checks := []benchCheck{list, {Target: fmt.Sprintf("calendar reminders over %d events < 200 ms", r.Events),
		Measured: fmt.Sprintf("medians of %d runs: %.1f ms first pass (%d created; CPU %.1f ms), %.1f ms unchanged pass (CPU %.1f ms); samples %v / %v ms; load average %s",
			r.Repeats, r.FirstMs, r.Created, r.FirstCPUMs, r.UnchangedMs, r.UnchangedCPUMs, r.FirstSamples, r.UnchangedSamples, rep.LoadAverage),
		Met: r.FirstMs < 200 && r.UnchangedMs < 200}}
	if s := rep.Scan; s != nil {
		checks = append(checks, benchCheck{Target: fmt.Sprintf("a scan over %d messages makes ≤ 50 model calls", s.Messages),
			Measured: fmt.Sprintf("%d calls, %d threads analysed, %d deferred; prefilter rejected %d %v", s.ModelCalls, s.Report.Analysed,
				s.Report.Deferred, s.Report.Prefiltered, s.Report.Rejections),
			Met: s.ModelCalls <= 50 && s.Report.Analysed <= 50})
	}
	return checks
}
