package main

// The background plane of `steward serve`: the scheduler's child jobs, the
// Maildir watcher and the start-up search preparation.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/mail"
	"github.com/agentstack/agentstack/steward/connectors/mail/mirror"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/scheduler"
	"github.com/agentstack/agentstack/steward/searchprep"
	"github.com/agentstack/agentstack/steward/watch"
)

// background is what serve runs besides answering requests; the System page
// reads it.
type background struct {
	sched   *scheduler.Scheduler // nil with STEWARD_SCHEDULER=off
	jobs    []scheduler.Job
	logPath string
	prep    *searchprep.Queue
	watcher *mailWatcher // nil when mail is not configured or events are unavailable
	sys     *systemDeps
}

// schedulerSettings returns the job table and whether the scheduler runs
// in serve (STEWARD_SCHEDULER); an invalid setting is an error naming it.
func schedulerSettings(cfg *config.Config) (jobs []scheduler.Job, enabled bool, err error) {
	if jobs, err = schedulerJobs(cfg); err != nil {
		return nil, false, err
	}
	enabled = cfg.Bool("STEWARD_SCHEDULER", true)
	if err := cfg.Err(); err != nil {
		return nil, false, fmt.Errorf("invalid settings:\n%w", err)
	}
	return jobs, enabled, nil
}

// startBackground validates the scheduler settings, then starts the
// scheduler, the mail watcher and the preparation queue; st stops them.
func startBackground(ctx context.Context, env *cliEnv, d hostDeps, bridge *mcpbridge.Bridge, h *host.Host, engine *watch.Engine, pushSvc *push.Service, st *stack) (*background, error) {
	cfg := d.cfg
	jobs, enabled, err := schedulerSettings(cfg)
	if err != nil {
		return nil, err
	}
	bg := &background{jobs: jobs, logPath: schedulerLogPath(cfg.Home),
		sys: &systemDeps{cfg: cfg, env: env, gatewayURL: d.gatewayURL, bridge: bridge, engine: engine, push: pushSvc}}
	if enabled {
		childEnv := mcpbridge.AllowedEnv(os.Environ(), mcpbridge.DefaultEnvAllowList())
		for k, v := range ownChildEnv(cfg, d.gatewayURL, d.sc.gatewayKey) {
			childEnv = append(childEnv, k+"="+v)
		}
		s, stop, err := startScheduler(ctx, env, cfg, jobs, childEnv)
		if err != nil {
			return nil, err
		}
		bg.sched = s
		st.push(stop)
	} else {
		env.Log.Info("scheduler disabled (STEWARD_SCHEDULER=off); run 'steward scheduler' to keep indexes fresh")
	}
	bg.watcher = startMailWatcher(ctx, env, st)

	bg.prep = searchprep.New(searchprep.Options{
		Connectors: prepConnectors{bridge},
		Endpoints:  embeddingEndpoints(cfg, d.gatewayURL, d.sc.gatewayKey),
		Logger:     env.Log.With("component", "preparation"),
	})
	prepCtx, stopPrep := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { bg.prep.Run(prepCtx) })
	st.push(func() error { stopPrep(); wg.Wait(); return nil })
	h.Handle("GET /system/preparation", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, bg.prep.State())
	}))
	return bg, nil
}

// schedulerStatus returns the jobs as the in-process scheduler observed
// them or, when it is off, as the log tells (another `steward scheduler`
// may be running).
func (bg *background) schedulerStatus() (jobs []scheduler.JobStatus, inProcess bool, err error) {
	if bg.sched != nil {
		return bg.sched.Status(), true, nil
	}
	st, err := scheduler.StatusFromLog(bg.logPath, bg.jobs)
	if err != nil {
		return nil, false, err
	}
	return st.Jobs, false, nil
}

// prepConnectors adapts the bridge to the preparation queue: a connector
// that is not configured or has no preparation request is skipped.
type prepConnectors struct{ b *mcpbridge.Bridge }

func (p prepConnectors) Ready(ctx context.Context, server string) error {
	known := false
	for _, s := range p.b.Status() {
		known = known || s.Name == server
	}
	if !known {
		return fmt.Errorf("no %s connector: %w", server, searchprep.ErrNoPreparation)
	}
	_, err := p.b.Session(ctx, server)
	return err
}

func (p prepConnectors) CallCustom(ctx context.Context, server, method string) (json.RawMessage, error) {
	raw, err := p.b.CallCustom(ctx, server, method)
	if errors.Is(err, mcpbridge.ErrMethodNotFound) {
		return nil, fmt.Errorf("%w: %w", searchprep.ErrNoPreparation, err)
	}
	return raw, err
}

func (p prepConnectors) WaitIdle(ctx context.Context) error { return p.b.WaitIdle(ctx) }

// embeddingEndpoints lists the mail and document embedding endpoints that
// are on, "gateway" meaning the host's gateway.
func embeddingEndpoints(cfg *config.Config, gatewayURL, gatewayKey string) []searchprep.Endpoint {
	var out []searchprep.Endpoint
	add := func(setting, modelVar, keyVar string) {
		ep := cfg.String(setting, "gateway")
		key := ""
		switch strings.ToLower(ep) {
		case "off", "none", "disabled", "0", "false":
			return
		case "gateway":
			ep, key = gatewayURL, gatewayKey
		default:
			ep = strings.TrimSuffix(strings.TrimRight(ep, "/"), "/embeddings")
			if keyVar != "" {
				key = cfg.String(keyVar, "")
			}
		}
		out = append(out, searchprep.Endpoint{Setting: setting, BaseURL: ep, Model: cfg.String(modelVar, "local-embed"), APIKey: key})
	}
	add("MAIL_EMBED_ENDPOINT", "MAIL_EMBED_MODEL", "GATEWAY_API_KEY")
	add("DOCUMENT_EMBED_ENDPOINT", "DOCUMENT_EMBED_MODEL", "DOCUMENT_EMBED_API_KEY")
	return out
}

// mailWatcher follows file events in the configured Maildirs so that a new
// message is searchable within seconds; the scheduler's mail-reconcile stays
// authoritative.
type mailWatcher struct {
	mu       sync.Mutex
	accounts int
	last     *time.Time
	lastNew  int
	lastErr  string
	batches  int
}

// watcherStatus is the watcher's line on the System page.
func (w *mailWatcher) status() host.ServiceStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := host.ServiceStatus{Name: "mail watcher", State: host.StateOK,
		Detail: fmt.Sprintf("following file events in %d account%s; no event yet in this process", w.accounts, plural(w.accounts))}
	if w.last != nil {
		s.Detail = fmt.Sprintf("following %d account%s; %d batch%s, last at %s (%d new)", w.accounts, plural(w.accounts),
			w.batches, map[bool]string{true: "", false: "es"}[w.batches == 1], w.last.Format(time.RFC3339), w.lastNew)
	}
	if w.lastErr != "" {
		s.State, s.Detail = host.StateWarning, s.Detail+"; last error: "+w.lastErr
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func startMailWatcher(ctx context.Context, env *cliEnv, st *stack) *mailWatcher {
	if runtime.GOOS == "darwin" {
		return nil // kqueue needs a descriptor per folder; reconcile covers Apple Mail
	}
	s, err := mailSettings(env)
	if err != nil {
		if !errors.Is(err, mail.ErrNoConfig) {
			env.Log.Warn("mail watcher not started", "err", err)
		}
		return nil
	}
	store, err := mirrorFor(ctx, env, s)
	if err != nil {
		env.Log.Warn("mail watcher not started", "err", err)
		return nil
	}
	w := &mailWatcher{accounts: len(s.Config.Accounts)}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		store.Watch(wctx, mirror.WatchOptions{EventsOnly: true, OnSync: func(st mirror.SyncStats, err error) {
			now := time.Now()
			w.mu.Lock()
			w.last, w.lastNew, w.batches = &now, st.New, w.batches+1
			w.lastErr = ""
			if err != nil {
				w.lastErr = err.Error()
			}
			w.mu.Unlock()
			if err != nil {
				env.Log.Warn("mail watcher: ingest failed; the next reconcile catches up", "err", err)
			}
		}})
	})
	st.push(func() error { cancel(); wg.Wait(); return store.Close() })
	env.Log.Info("mail watcher following file events", "accounts", w.accounts)
	return w
}
