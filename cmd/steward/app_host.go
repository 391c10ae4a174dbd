package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/connectors/trains"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/modelsetup"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/searchprep"
	"github.com/agentstack/agentstack/steward/speech"
	"github.com/agentstack/agentstack/steward/usage"
	"github.com/agentstack/agentstack/steward/watch"
	"github.com/agentstack/agentstack/steward/watch/timewatch"
	"github.com/agentstack/agentstack/steward/watch/trainwatch"
	"github.com/agentstack/agentstack/steward/web"
	"github.com/agentstack/agentstack/steward/writeops"
)

// systemInfo is what the System page shows besides the host itself: the
// gateway's health and each MCP server's state.
func systemInfo(ctx context.Context, gatewayURL, chatModel string, bridge *mcpbridge.Bridge) host.SystemInfo {
	var info host.SystemInfo
	// ?model= makes the gateway say whether chats can be served at all.
	info.Services = append(info.Services, host.ProbeHTTP(ctx, nil, "gateway", strings.TrimSuffix(gatewayURL, "/v1")+"/health?model="+url.QueryEscape(chatModel)))
	for _, s := range bridge.Status() {
		state := map[mcpbridge.State]string{mcpbridge.StateReady: host.StateOK, mcpbridge.StateFailed: host.StateError,
			mcpbridge.StateRestarting: host.StateWarning, mcpbridge.StateStarting: host.StateWarning}[s.State]
		if state == "" {
			state = host.StateUnknown
		}
		detail := fmt.Sprintf("%s, %d tools", s.State, s.Tools)
		if s.Transport == "in-process" {
			detail += ", in process"
		}
		if s.LastError != "" {
			detail += ": " + s.LastError
		}
		info.Services = append(info.Services, host.ServiceStatus{Name: "mcp:" + s.Name, State: state, Detail: detail})
	}
	return info
}

// stack closes what serve opened, in reverse order.
type stack struct{ closers []func() error }

func (s *stack) push(f func() error) { s.closers = append(s.closers, f) }

func (s *stack) close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// hostDeps is what the host shares with the rest of serve.
type hostDeps struct {
	cfg        *config.Config
	sc         *serveConfig
	gw         *gateway.Switch // nil when GATEWAY_BASE_URL names another gateway
	gatewayURL string
	ledger     *usage.Store
	log        *slog.Logger
	pairURL    func() string // the HTTPS listener's address; nil without one
	reload     *reloader     // SIGHUP reloads of the host's files
}

// buildHost assembles the host: policy, audit, chats, the connectors through
// the MCP bridge, Web Push and the watch engine. Everything it opens is
// closed by st.
func buildHost(ctx context.Context, env *cliEnv, d hostDeps, st *stack) (*host.Host, error) {
	sc, log := d.sc, d.log
	token, err := host.LoadOrCreateToken(filepath.Join(sc.home, host.TokenFileName), sc.authToken)
	if err != nil {
		return nil, err
	}
	tokenFile := "" // a token set by STEWARD_AUTH_TOKEN cannot be rotated by the host
	if sc.authToken == "" {
		tokenFile = filepath.Join(sc.home, host.TokenFileName)
	}
	rules, err := policy.LoadRules(filepath.Join(sc.home, "policy.yaml"))
	if err != nil {
		return nil, err
	}
	// Built-in rules bind to the connectors registered in this binary (the
	// same list connectorServers starts and keeps user servers from taking).
	voiceServer, voiceOff, err := voiceSettings(d.cfg)
	if err != nil {
		return nil, err
	}
	policyConnectors := mcpNames()
	if voiceServer != nil {
		policyConnectors = append(policyConnectors, voiceServerName)
	}
	var auditLedger *audit.Ledger
	var auditor host.Auditor
	var auditRoute http.Handler
	if auditLedger, err = audit.Open(ctx, filepath.Join(sc.home, "audit.db"), audit.Options{Logger: log}); err != nil {
		// Audit is best-effort: the product runs without it, loudly.
		log.Error("the audit ledger is unavailable; continuing without an audit trail", "err", err)
		auditLedger = nil
	} else {
		st.push(auditLedger.Close)
		auditor, auditRoute = host.LedgerAuditor(auditLedger), auditLedger.Handler()
	}
	// The journal's review route reads the store the connectors write.
	journalStore, err := writeops.Open(ctx, writeops.Path(sc.home), writeops.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	st.push(journalStore.Close)
	chatStore, err := chats.Open(ctx, filepath.Join(sc.home, "chats.db"))
	if err != nil {
		return nil, err
	}
	st.push(chatStore.Close)

	// One trains service per process: the trains connector runs in process
	// over it, and the train watch adapter reads the same instance.
	trainSvc, err := newTrainService(env)
	if err != nil {
		return nil, err
	}
	trainsServer := trains.NewServer(trainSvc, version)
	connectors, err := connectorServers(d.cfg, d.gatewayURL, sc.gatewayKey)
	if err != nil {
		return nil, err
	}
	connectors = inProcess(connectors, trainsServer)
	withVoice := func(servers []mcpbridge.ServerConfig) ([]mcpbridge.ServerConfig, error) {
		if voiceServer == nil {
			return servers, nil
		}
		for _, s := range servers {
			if s.Name == voiceServerName {
				return nil, fmt.Errorf("mcp.json: server %q has the name the voice transport uses while STEWARD_VOICE_TRANSPORT is set; rename it", s.Name)
			}
		}
		return append(servers, *voiceServer), nil
	}
	if connectors, err = withVoice(connectors); err != nil {
		return nil, err
	}
	bridge := mcpbridge.New(mcpbridge.Options{Servers: connectors, Logger: log.With("component", "mcp"),
		CustomMethods: []string{searchprep.Method},
		// The connectors read the same config.env: its warnings are shown once, by serve.
		AlreadyLogged: d.cfg.Warnings,
		// Connectors journal their writes with the calling chat as origin.
		CallMeta: func(ctx context.Context) map[string]any {
			if id, ok := host.ChatIDFrom(ctx); ok {
				return map[string]any{writeops.MetaChatID: id}
			}
			return nil
		}})
	bridge.Start(ctx)
	st.push(bridge.Close)
	// The connectors' readOnlyHint annotations, as the bridge lists them,
	// allow their reads; a user server's are not believed (policy.Options).
	pol, err := policy.New(policy.Options{User: rules, Connectors: policyConnectors, Hints: bridge})
	if err != nil {
		return nil, err
	}
	policyPath := filepath.Join(sc.home, "policy.yaml")
	d.reload.add(policyPath, func() error {
		rules, err := policy.LoadRules(policyPath)
		if err != nil {
			return err
		}
		next, err := policy.New(policy.Options{User: rules, Connectors: policyConnectors, Hints: bridge})
		if err == nil {
			pol.Replace(next)
		}
		return err
	})
	// SIGHUP applies mcp.json: unchanged servers keep running (their calls
	// and sessions intact), changed ones restart, new ones start, removed
	// ones stop; a bad file keeps the servers that run.
	d.reload.add(filepath.Join(sc.home, "mcp.json"), func() error {
		servers, err := connectorServers(d.cfg, d.gatewayURL, sc.gatewayKey)
		if err == nil {
			servers, err = withVoice(inProcess(servers, trainsServer))
		}
		if err != nil {
			return err
		}
		return bridge.Reconfigure(servers)
	})

	pushSvc, err := push.Open(push.Options{Home: sc.home, Contact: d.cfg.String("STEWARD_PUSH_CONTACT", ""), Logger: log})
	if err != nil {
		return nil, err
	}

	// The host's tools are the connectors' plus the watch tools; the engine
	// needs the same list for background turns, and the host is its
	// deliverer, so the watch tools are filled in once the engine exists.
	var engineTools []agent.Tool
	toolSource := func() []agent.Tool { return append(bridge.Tools(), engineTools...) }
	modelKey := sc.gatewayKey
	if modelKey == "" {
		modelKey = "sk-local"
	}
	var inProcess http.Handler
	if d.gw != nil {
		inProcess = d.gw.Handler()
	}
	modelOpts := hostModelOptions(sc, d.gatewayURL, modelKey, inProcess)
	var rates func() map[string]gateway.Rate
	if d.gw != nil {
		rates = d.gw.Rates
	}
	var bg *background // started once the host exists; read by the System page
	dictation := speechRoute(d.cfg, log)
	var transcriber host.Transcriber
	if dictation.Transcriber != nil {
		transcriber = dictation.Transcriber
	}
	h := host.New(host.Options{
		Transcriber: transcriber,
		Token:       token, TokenFile: tokenFile, PairURL: d.pairURL, Version: version, Logger: log, Home: sc.home, AllowedOrigins: sc.allowedOrigins,
		Usage: d.ledger, Rates: rates, AuditHandler: auditRoute, WriteOpsHandler: writeops.Handler(journalStore),
		Web: web.Handler(),
		System: func(ctx context.Context) host.SystemInfo {
			info := systemInfo(ctx, d.gatewayURL, sc.hostTier, bridge)
			applySourceStates(&info, sourceStates(d.cfg))
			info.Services = append(info.Services, mailRoleStatus(ctx, d.cfg)...)
			info.Services = append(info.Services, mailPromotionStatus(ctx, d.cfg)...)
			info.Services = append(info.Services, documentsPDFStatus(d.cfg))
			bg.extend(ctx, &info)
			return info
		},
		Chats: host.ManagerOptions{
			Audit:           auditor,
			Store:           chatStore,
			Model:           llm.NewClient(modelOpts),
			ModelName:       sc.hostTier,
			SystemPrompt:    host.DefaultSystemPrompt,
			Policy:          pol,
			ApprovalTimeout: sc.approvalTimeout,
			Tools:           toolSource,
			Notifier:        pushSvc,
			ContextWindow:   contextWindow(d.gw, sc.hostTier),
			Retry:           chatRetry(),
		},
	})
	st.push(func() error { h.Close(); return nil })
	pushSvc.Mount(h.Handle)
	speech.Mount(h.Handle, dictation)
	voiceStore := &speech.SettingsStore{Path: d.cfg.Path("STEWARD_VOICE_SETTINGS_FILE", filepath.Join(sc.home, "voice-settings.json"))}
	speech.MountSettings(h.Handle, &speech.SettingsRoute{Store: voiceStore, Synth: &speech.Synthesizer{}})
	voiceSettingsTools := speech.Tools(voiceStore, d.cfg.Path("STEWARD_VOICE_CALL_SETTINGS_FILE", filepath.Join(sc.home, "voice-call-settings.json")))
	startVoice(d.cfg, h, bridge, auditor, d.ledger, voiceServer != nil, voiceOff, st, log)
	modelsetup.Mount(h.Handle, setupOptions(env, d))
	startWiki(ctx, env, sc, d.gw, d.gatewayURL, h, st)

	capabilities, err := watch.NewRegistry(writeCapabilities()...)
	if err != nil {
		return nil, err
	}
	engine, err := watch.Open(ctx, watch.Options{
		Path:         d.cfg.Path("WATCH_DB", filepath.Join(sc.home, "watches.db")),
		Adapters:     []watch.Adapter{trainwatch.New(trainwatch.Options{Trains: trainSvc}), timewatch.New(timewatch.Options{})},
		Deliverer:    h.Manager(),
		Notifier:     pushSvc,
		Capabilities: capabilities,
		Tools:        toolSource,
		ReadOnly:     func(tool string) bool { return pol.Decide(tool) == policy.Allow },
		PollInterval: time.Duration(d.cfg.Clamp("WATCH_POLL_MS", 45000, 15000, 3600000)) * time.Millisecond,
		Logger:       log.With("component", "watch"),
		Usage:        d.ledger,
		OnLifecycle: func(ctx context.Context, e watch.Lifecycle) {
			auditLedger.Record(ctx, audit.Event{Actor: "watch", Type: e.Type, Risk: audit.RiskLow, ChatID: e.ChatID,
				Correlation: e.WatchID, Summary: e.Summary, Payload: e.Payload})
		},
	})
	if err != nil {
		return nil, err
	}
	if err := d.cfg.Err(); err != nil {
		engine.Close()
		return nil, err
	}
	engineTools = append(engine.Tools(host.ChatIDFrom), voiceSettingsTools...)
	var actionsAudit actions.Auditor
	if auditLedger != nil {
		actionsAudit = auditLedger
	}
	execute, err := startActions(ctx, d, h, pushSvc, actionsAudit, st)
	if err != nil {
		return nil, err
	}
	engineTools = append(engineTools, execute)
	runCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		engine.Run(runCtx)
	}()
	st.push(func() error {
		stopEngine()
		wg.Wait()
		return engine.Close()
	})
	if bg, err = startBackground(ctx, env, d, bridge, h, engine, pushSvc, st); err != nil {
		return nil, err
	}
	return h, nil
}

// chatRetry retries a chat's failed model calls briefly: the user is
// waiting, so an overload is tried twice, not waited out.
func chatRetry() *agent.RetryPolicy {
	return &agent.RetryPolicy{MaxTransient: 3, TransientBase: time.Second,
		OverloadMin: 2 * time.Second, OverloadMax: 8 * time.Second, MaxOverloads: 2}
}

// contextWindow returns the chat model's context window from the in-process
// gateway (nil when another gateway serves the models: its windows are not
// known, and only a provider's rejection compacts).
func contextWindow(gw *gateway.Switch, model string) func() int {
	if gw == nil {
		return nil
	}
	return func() int { return gw.ContextWindow(model) }
}

// hostModelOptions configures the host's model client. With the gateway in
// this process (inProcess, its handler) the client makes no network hop and leaves the time limits
// to the gateway, which times each candidate's attempt and so can move a
// stalled one on to the next candidate. A gateway elsewhere is timed by the
// client with the same settings, and asked for liveness events: while it
// fails over from a stalled candidate they keep the client's inactivity
// limit, which would otherwise run out first, from ending the call; a
// gateway that sends neither data nor liveness still times out.
func hostModelOptions(sc *serveConfig, gatewayURL, key string, inProcess http.Handler) llm.ClientOptions {
	opts := llm.ClientOptions{BaseURL: gatewayURL, APIKey: key, StreamInactivity: sc.streamInactivity, CallTimeLimit: sc.requestTimeout,
		GatewayLiveness: true}
	if inProcess != nil {
		opts.HTTPClient = &http.Client{Transport: gateway.InProcess(inProcess)}
		opts.StreamInactivity, opts.CallTimeLimit, opts.GatewayLiveness = -1, -1, false
	}
	return opts
}
