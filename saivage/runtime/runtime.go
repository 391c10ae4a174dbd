// Package runtime is Saivage's Supervisor and card execution: it owns the
// runtime status (Run, Pause, Resume, Stop), executes card workflows node by
// node with the shared agent loop, validates emit_result, runs corrections,
// accepts records, activates children inside the Planner's tool call,
// recovers interrupted sessions and cards, binds model routes to the shared
// gateway (failover, back-off, compaction) and hosts the Analyst.
package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/gitsource"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// DefaultCorrectionBudget is the joint number of corrective rearms of one
// node execution: malformed or plain-text results, record gate failures,
// stale context and pending notifications share it. The next corrective
// cause after the budget fails the node.
const DefaultCorrectionBudget = 16

// DefaultMaxNodeSteps bounds the model calls of one node execution.
const DefaultMaxNodeSteps = 400

// ObservationKind names a runtime observation (for tests and diagnostics).
type ObservationKind string

// Observations.
const (
	ObsStatus     ObservationKind = "status"
	ObsGateParked ObservationKind = "gate_parked" // an autonomous model call waits for Resume
	ObsModelCall  ObservationKind = "model_call"  // a model call is about to be sent
	ObsToolStart  ObservationKind = "tool_start"
	ObsToolEnd    ObservationKind = "tool_end"
	ObsBackoff    ObservationKind = "backoff"
)

// Observation is one runtime observation.
type Observation struct {
	Kind    ObservationKind
	Status  Status
	Session string
	Tool    string
	Delay   time.Duration
}

// Hinter receives freshness hints (see tools.Hinter).
type Hinter = tools.Hinter

// Options configures a Runtime.
type Options struct {
	// Project is the admitted project; the runtime owns its writes.
	Project *project.Project
	// Upstream reaches model providers (default: the gateway transport).
	Upstream http.RoundTripper
	// FailedRequests, when set, receives failed provider requests (see
	// BackendsFromEnv).
	FailedRequests llm.FailureRecorder
	// Hints receives freshness hints after publications.
	Hints  Hinter
	Logger *slog.Logger
	// Sleep waits for back-off; the default honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Environ is the environment commands inherit (filtered).
	Environ func() []string
	// LookupEnv resolves ${NAME} when a reconfiguration is validated.
	LookupEnv func(string) (string, bool)
	// Observe receives observations synchronously; it must not block.
	Observe func(Observation)
	// CorrectionBudget overrides DefaultCorrectionBudget (tests).
	CorrectionBudget int
	// MaxNodeSteps overrides DefaultMaxNodeSteps.
	MaxNodeSteps int
	// HTTPClient performs webfetch requests.
	HTTPClient *http.Client
	// Secrets are extra values redacted from model-visible and operator
	// output (the operator token, for example).
	Secrets []string
	// Clock drives the Oversight schedule and the cooling of model
	// candidates (default: the real clock).
	Clock Clock
	// AnalystMode is frozen at start (default internal): external-only
	// refuses internal Analyst submissions.
	AnalystMode config.AnalystMode
	// WebSearch answers the websearch tool; nil reports it unavailable.
	WebSearch tools.WebSearcher
	// Retrieval serves the observed-collection tools; nil reports them
	// unavailable.
	Retrieval tools.Retrieval
	// Quality runs the code-quality tools and actions; nil reports them
	// unavailable.
	Quality tools.QualityRunner
	// RestartServer, when set, schedules a restart of the server process
	// (restart_server); nil reports the tool unavailable.
	RestartServer func(ctx context.Context, reason string) error
	// GitAfterStep, when set, is called after each durable step of the
	// native Git engine (progress and crash tests).
	GitAfterStep func(gitsource.Step)
	// GitQueryDeadline overrides the five-second synchronous source check
	// deadline (tests on a loaded machine).
	GitQueryDeadline time.Duration
}

// Runtime is one project's live runtime.
type Runtime struct {
	p        *project.Project
	models   *Models
	procs    *tools.Processes
	mcp      *tools.MCPServers
	opts     Options
	log      *slog.Logger
	redact   func(string) string
	recordMu sync.Mutex
	logMu    sync.Mutex

	mu        sync.Mutex
	status    Status
	runID     string
	runCancel context.CancelCauseFunc
	runDone   chan struct{}
	runErr    error
	lastRun   *RunSummary
	paused    bool
	resume    chan struct{}
	inflight  int
	stack     []string
	hold      *MaintenanceHold
	acts      activations

	src       *source // nil when git_workflow is off
	analyst   *Analyst
	ops       *operations
	oversight *oversight
	// avail is the process-local cooling of model candidates.
	avail *availability

	// failed is closed once an owner (an Oversight check) failed in a way
	// no attempt accounts for; failure says how.
	failOnce sync.Once
	failed   chan struct{}
	failure  error
}

// New binds the project's model routes and returns an uninitialized
// runtime.
func New(opts Options) (*Runtime, error) {
	p := opts.Project
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Sleep == nil {
		opts.Sleep = agent.Sleep
	}
	if opts.CorrectionBudget <= 0 {
		opts.CorrectionBudget = DefaultCorrectionBudget
	}
	if opts.MaxNodeSteps <= 0 {
		opts.MaxNodeSteps = DefaultMaxNodeSteps
	}
	models, err := BindModels(p.Config, ModelsOptions{Upstream: opts.Upstream, Logger: opts.Logger, Root: p.Root, FailedRequests: opts.FailedRequests})
	if err != nil {
		return nil, err
	}
	secrets := providerSecrets(p.Config)
	for _, m := range p.Config.MCPServers {
		for _, v := range m.Env {
			secrets = append(secrets, v)
		}
		for _, v := range m.Headers {
			secrets = append(secrets, v)
		}
	}
	secrets = append(secrets, opts.Secrets...)
	redact := tools.NewRedactor(secrets)
	rt := &Runtime{p: p, models: models, opts: opts, log: opts.Logger, redact: redact, status: StatusUninitialized, resume: make(chan struct{}), failed: make(chan struct{})}
	rt.procs = tools.NewProcesses(tools.ProcessesOptions{CaptureDir: filepath.Join(p.StateDir, "work", "processes"), Environ: opts.Environ})
	rt.mcp = tools.NewMCPServers(p.Config.MCPServers, rt.root(), opts.Logger)
	if p.Config.GitOn() {
		rt.mcp.Freeze()
	}
	if err := rt.mcp.EnableDefinitions(filepath.Join(p.StateDir, tools.MCPDefinitionsFile), p.Publisher); err != nil {
		return nil, err
	}
	if pol := p.Workflows.Git(); pol != nil {
		repo, err := project.OpenSource(context.Background(), p.Root, pol, project.SourceOptions{AfterStep: opts.GitAfterStep, Environ: opts.Environ, QueryDeadline: opts.GitQueryDeadline})
		if err != nil {
			return nil, err
		}
		rt.src = &source{rt: rt, repo: repo, policy: pol}
	}
	rt.analyst = newAnalyst(rt)
	rt.ops = newOperations()
	rt.oversight = newOversight(rt, opts.Clock)
	rt.avail = newAvailability(opts.Clock)
	return rt, nil
}

// toolEnv is the tool environment shared by card and global callers.
func (rt *Runtime) toolEnv(caller tools.Caller) *tools.Env {
	env := &tools.Env{Root: rt.root(), StateDir: filepath.Join(rt.root(), ".saivage"), Cards: rt.p.Cards, Workflows: rt.p.Workflows,
		Config: rt.p.Config, Processes: rt.procs, RecordMu: &rt.recordMu, Runtime: toolRuntime{rt}, Hints: rt.opts.Hints,
		Events: rt, Evidence: evidence{rt}, MCP: rt.mcp, HTTPClient: rt.opts.HTTPClient, Redact: rt.redact,
		WebSearch: rt.opts.WebSearch, Retrieval: rt.opts.Retrieval, Quality: rt.opts.Quality, RestartServer: rt.opts.RestartServer,
		Caller: caller}
	if rt.src != nil && caller.Global() {
		env.SourceGate = rt.src.admitFiles
	}
	return env
}

// Project returns the runtime's project.
func (rt *Runtime) Project() *project.Project { return rt.p }

// Models returns the bound model routes.
func (rt *Runtime) Models() *Models { return rt.models }

// Processes returns the managed process registry.
func (rt *Runtime) Processes() *tools.Processes { return rt.procs }

// Analyst returns the global Analyst session owner.
func (rt *Runtime) Analyst() *Analyst { return rt.analyst }

// Redact removes configured secrets and credential patterns from text.
func (rt *Runtime) Redact(s string) string { return rt.redact(s) }

// Startup settles the configured global sessions (a sole final unmatched
// call gets an uncertainty result and a notice) and publishes every card
// left running as stopped, leaf to root. Execution stays stopped until an
// explicit Run.
func (rt *Runtime) Startup(ctx context.Context) error {
	rt.mu.Lock()
	if rt.status != StatusUninitialized {
		rt.mu.Unlock()
		return fmt.Errorf("startup: the runtime is %s", rt.status)
	}
	rt.setStatusLocked(StatusStarting)
	rt.mu.Unlock()
	err := rt.startup(ctx)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err != nil {
		rt.runErr = err
		rt.setStatusLocked(StatusError)
		return err
	}
	rt.setStatusLocked(StatusStopped)
	rt.mcp.StartAutostart()
	return nil
}

// Failed is closed when an owner failed unexpectedly (an Oversight check
// whose own session could not be read or written, or that panicked): new
// Analyst submissions are refused from then on, and the process owner
// closes the application and exits 1.
func (rt *Runtime) Failed() <-chan struct{} { return rt.failed }

// Failure is the unexpected owner failure, once Failed is closed.
func (rt *Runtime) Failure() error {
	select {
	case <-rt.failed:
		return rt.failure
	default:
		return nil
	}
}

// ownerFailed closes admissions and reports the first unexpected owner
// failure; it never waits for anything (the failing owner may be what a
// cleanup would join).
func (rt *Runtime) ownerFailed(owner string, err error) {
	rt.failOnce.Do(func() {
		rt.failure = fmt.Errorf("%s failed unexpectedly: %w", owner, err)
		rt.analyst.refuse()
		rt.log.Error("unexpected owner failure; the server closes and exits 1", "owner", owner, "err", rt.redact(err.Error()))
		rt.logEvent("owner_failed", map[string]any{"owner": owner, "error": rt.redact(err.Error())})
		close(rt.failed)
	})
}

// MCP returns the outbound MCP servers.
func (rt *Runtime) MCP() *tools.MCPServers { return rt.mcp }

func (rt *Runtime) startup(ctx context.Context) error {
	if err := rt.p.CheckSourcePolicy(ctx); err != nil {
		return err
	}
	globals := []string{rt.p.Workflows.Analyst()}
	if ov := rt.p.Workflows.Oversight(); ov != "" {
		if _, err := os.Stat(filepath.Join(rt.p.StateDir, "agents", ov, "index.json")); err == nil {
			globals = append(globals, ov) // established Oversight only; absent stays absent
		}
	}
	for _, g := range globals {
		did, err := rt.globalSession(g).settle(false)
		if err != nil {
			return fmt.Errorf("settle session of %s: %w", g, err)
		}
		if did != "" {
			rt.logEvent("session_recovered", map[string]any{"session": rt.globalSession(g).id, "recovery": did})
		}
	}
	return rt.recoverChain(ctx)
}

// Close halts any Run and contains every managed process.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.analyst.close()
	rt.ops.close()
	rt.mu.Lock()
	var err error
	switch rt.status {
	case StatusRunning, StatusPausing, StatusPaused:
		err = rt.haltLocked(ctx, StatusClosing)
	default:
		rt.setStatusLocked(StatusClosing)
		rt.mu.Unlock()
	}
	rt.oversight.close()
	rt.procs.KillWhere(func(string) bool { return true })
	rt.mcp.Close()
	return err
}

func (rt *Runtime) hint(topic, key string) {
	if rt.opts.Hints != nil {
		rt.opts.Hints.Hint(topic, key)
	}
}

func (rt *Runtime) observe(o Observation) {
	if rt.opts.Observe != nil {
		rt.opts.Observe(o)
	}
}

// LogEvent appends an app log event (serialised across writers).
func (rt *Runtime) LogEvent(typ string, data map[string]any) error {
	rt.logMu.Lock()
	defer rt.logMu.Unlock()
	err := rt.p.LogEvent(typ, data)
	if err == nil {
		rt.hint("events", "")
	}
	return err
}

func (rt *Runtime) logEvent(typ string, data map[string]any) {
	if err := rt.LogEvent(typ, data); err != nil {
		rt.log.Error("app log append failed", "type", typ, "err", err)
	}
}

// Reconfigure validates a complete configuration candidate (decode,
// interpolation, shape and full workflow compilation against the
// project's prompts) and publishes it as the next-start config.yaml. The
// running process keeps its installed configuration.
func (rt *Runtime) Reconfigure(ctx context.Context, yaml string) error {
	cfg, err := config.Decode([]byte(yaml), config.DecodeOptions{File: "candidate config.yaml", LookupEnv: rt.opts.LookupEnv})
	if err != nil {
		return err
	}
	if cfg.CardTypes == nil {
		cfg.CardTypes = templates.ClassicCardTypes()
	}
	if err := config.Validate(cfg); err != nil {
		return err
	}
	if _, err := workflow.Compile(ctx, cfg, workflow.Options{Prompts: os.DirFS(rt.p.StateDir)}); err != nil {
		return err
	}
	if _, err := BindModels(cfg, ModelsOptions{Root: rt.p.Root}); err != nil {
		return err
	}
	if err := rt.p.Publisher.Replace(rt.p.ConfigPath, []byte(yaml)); err != nil {
		return err
	}
	rt.logEvent("config_replaced", map[string]any{"requires_restart": true})
	return nil
}
