package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/dirlock"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/config"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/usage"
)

// shutdownGrace is how long in-flight requests may take to finish after a
// stop signal before they are cancelled.
const shutdownGrace = 10 * time.Second

func init() {
	register(&command{
		Name:    "serve",
		Summary: "run Steward: the host on 127.0.0.1:4317 and the model gateway on :4000",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "serve", "", `
Runs the whole product: the host (HTTP on 127.0.0.1:$HOST_PORT, default 4317) and, unless
GATEWAY_BASE_URL points at another gateway, the model gateway in-process on
127.0.0.1:$GATEWAY_PORT (default 4000). Data lives in STEWARD_HOME; the host token is created in
STEWARD_HOME/auth-token on first start unless STEWARD_AUTH_TOKEN is set.
SIGINT or SIGTERM stop it cleanly: in-flight requests finish (or are cancelled after 10 s) and every
store is closed.`)
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			cfg, err := env.Config()
			if err != nil {
				return err
			}
			sc, err := readServeConfig(cfg)
			if err != nil {
				return err
			}
			// Two hosts on one STEWARD_HOME would run every watch and
			// scheduled job twice and race on the same files.
			lock, err := dirlock.Acquire(sc.home)
			if errors.Is(err, dirlock.ErrLocked) {
				return fmt.Errorf("another steward serve is already running on this STEWARD_HOME: %w; stop it first, or set STEWARD_HOME to another directory", err)
			}
			if err != nil {
				return err
			}
			defer lock.Release()
			hostLn, gwLn, err := serveListeners(sc)
			if err != nil {
				return err
			}
			return serve(ctx, env, sc, hostLn, gwLn)
		},
	})
	register(&command{
		Name:    "gateway",
		Summary: "run only the OpenAI-compatible model gateway",
		Run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlagSet(env, "gateway", "[--port N]", `
Runs the model gateway alone on 127.0.0.1 (GATEWAY_PORT, default 4000), configured by
GATEWAY_CONFIG (default STEWARD_HOME/gateway.yaml; built-in defaults when absent), recording usage
in STEWARD_HOME/usage.db. Any OpenAI client can use it: base URL http://127.0.0.1:4000/v1.`)
			port := fs.Int("port", 0, "port to listen on (overrides GATEWAY_PORT)")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			cfg, err := env.Config()
			if err != nil {
				return err
			}
			sc, err := readServeConfig(cfg)
			if err != nil {
				return err
			}
			if *port != 0 {
				sc.gatewayPort = *port
			}
			ln, err := listen("gateway", "GATEWAY_PORT", sc.gatewayPort)
			if err != nil {
				return err
			}
			sc.gatewayBaseURL = ""
			return serve(ctx, env, sc, nil, ln)
		},
	})
}

// serveConfig is the validated configuration of serve and gateway.
type serveConfig struct {
	home           string
	hostPort       int
	gatewayPort    int
	gatewayBaseURL string // empty: run the gateway in-process
	gatewayConfig  string
	gatewayKey     string
	requestTimeout time.Duration
	// streamInactivity is how long a model attempt may send nothing.
	streamInactivity time.Duration
	authToken        string
	allowedOrigins   []string
	hostTier         string
	approvalTimeout  time.Duration
	lookup           func(string) (string, bool)
	// tlsCert and tlsKey enable the HTTPS listener on all interfaces at
	// tlsPort (both set, or neither).
	tlsCert, tlsKey string
	tlsPort         int
}

func readServeConfig(cfg *config.Config) (*serveConfig, error) {
	sc := &serveConfig{
		home:            cfg.Home,
		hostPort:        cfg.Port("HOST_PORT", 4317),
		gatewayPort:     cfg.Port("GATEWAY_PORT", 4000),
		gatewayBaseURL:  cfg.URL("GATEWAY_BASE_URL", ""),
		gatewayConfig:   cfg.Path("GATEWAY_CONFIG", filepath.Join(cfg.Home, "gateway.yaml")),
		gatewayKey:      cfg.String("GATEWAY_API_KEY", ""),
		requestTimeout:  cfg.Millis("GATEWAY_REQUEST_TIMEOUT_MS", gateway.DefaultRequestTimeout, time.Second, time.Hour),
		authToken:       cfg.String("STEWARD_AUTH_TOKEN", ""),
		hostTier:        cfg.String("HOST_TIER", "tier-5"),
		approvalTimeout: cfg.Millis("APPROVAL_TIMEOUT_MS", policy.DefaultApprovalTimeout, time.Second, 24*time.Hour),
		lookup:          cfg.Lookup,
		tlsCert:         cfg.Path("STEWARD_TLS_CERT", ""),
		tlsKey:          cfg.Path("STEWARD_TLS_KEY", ""),
	}
	sc.streamInactivity = cfg.Millis("MODEL_STREAM_INACTIVITY_MS", defaultStreamInactivity(sc.requestTimeout), time.Second, time.Hour)
	sc.tlsPort = cfg.Port("STEWARD_TLS_PORT", min(sc.hostPort+1, 65535))
	for _, o := range strings.Split(cfg.String("HOST_ALLOWED_ORIGINS", ""), ",") {
		if o = strings.TrimSpace(o); o != "" {
			sc.allowedOrigins = append(sc.allowedOrigins, o)
		}
	}
	if err := cfg.Err(); err != nil {
		return nil, fmt.Errorf("invalid settings:\n%w", err)
	}
	switch {
	case sc.tlsCert != "" && sc.tlsKey == "":
		return nil, errors.New("invalid settings:\nSTEWARD_TLS_KEY is not set: the HTTPS listener needs both STEWARD_TLS_CERT and STEWARD_TLS_KEY (or neither)")
	case sc.tlsCert == "" && sc.tlsKey != "":
		return nil, errors.New("invalid settings:\nSTEWARD_TLS_CERT is not set: the HTTPS listener needs both STEWARD_TLS_CERT and STEWARD_TLS_KEY (or neither)")
	}
	return sc, nil
}

// stewardStreamInactivity is Steward's default stream inactivity limit: a
// third of the default request deadline, so that a model that stalls leaves
// the next candidates time to answer within the one deadline every attempt
// shares (with Saivage's 120 s, equal to the deadline, a stall used it all
// and no other candidate was ever tried).
const stewardStreamInactivity = 40 * time.Second

// defaultStreamInactivity is MODEL_STREAM_INACTIVITY_MS when unset: 40 s, or
// a third of a shorter GATEWAY_REQUEST_TIMEOUT_MS. Under 3 s a failover has
// no room anyway, and the deadline alone ends the call.
func defaultStreamInactivity(requestTimeout time.Duration) time.Duration {
	third := requestTimeout / 3
	if third < time.Second {
		return llm.DefaultStreamInactivity
	}
	return min(stewardStreamInactivity, third)
}

// serveListeners opens the host's port and, unless GATEWAY_BASE_URL names
// another gateway, the gateway's (gwLn is then nil).
func serveListeners(sc *serveConfig) (hostLn, gwLn net.Listener, err error) {
	if hostLn, err = listen("host", "HOST_PORT", sc.hostPort); err != nil {
		return nil, nil, err
	}
	if sc.gatewayBaseURL == "" {
		if gwLn, err = listen("gateway", "GATEWAY_PORT", sc.gatewayPort); err != nil {
			hostLn.Close()
			return nil, nil, err
		}
	}
	return hostLn, gwLn, nil
}

func listen(what, envVar string, port int) (net.Listener, error) {
	return listenOn("127.0.0.1", what, envVar, port)
}

// listenAll listens on every interface (the HTTPS listener).
func listenAll(what, envVar string, port int) (net.Listener, error) {
	return listenOn("", what, envVar, port)
}

func listenOn(addr, what, envVar string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("%s port %d is already in use (is Steward already running? set %s to use another port)", what, port, envVar)
		}
		return nil, fmt.Errorf("listen for %s on port %d: %w", what, port, err)
	}
	return ln, nil
}

// serve runs the host on hostLn (when not nil) and the gateway on gwLn (when
// not nil) until ctx ends, then shuts both down and closes the stores.
func serve(ctx context.Context, env *cliEnv, sc *serveConfig, hostLn, gwLn net.Listener) (err error) {
	cfg, err := env.Config()
	if err != nil {
		return err
	}
	log := env.Log
	sources := sourceStates(cfg) // read before anything starts: what the user has set up
	var servers []*http.Server
	st := &stack{}
	defer func() {
		if cerr := st.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var tlsLn net.Listener // the HTTPS listener, when configured
	closeListeners := func() {
		for _, ln := range []net.Listener{hostLn, gwLn, tlsLn} {
			if ln != nil {
				ln.Close()
			}
		}
	}

	if hostLn != nil {
		// A bad scheduler setting stops start-up before any store or
		// connector is opened (startBackground reads them again later).
		if _, _, err := schedulerSettings(cfg); err != nil {
			closeListeners()
			return err
		}
	}

	// The HTTPS listener for phones: a broken certificate setting stops
	// start-up before anything is opened.
	var certs *host.CertReloader
	if hostLn != nil && sc.tlsCert != "" {
		if certs, err = sc.certReloader(log); err != nil {
			closeListeners()
			return err
		}
		if tlsLn, err = listenAll("HTTPS", "STEWARD_TLS_PORT", sc.tlsPort); err != nil {
			closeListeners()
			return err
		}
	}

	ledger, err := usage.Open(ctx, filepath.Join(sc.home, "usage.db"), usage.Options{Logger: log})
	if err != nil {
		closeListeners()
		return err
	}
	st.push(ledger.Close)

	reload := &reloader{log: log}
	var gw *gateway.Switch
	if gwLn != nil {
		g, err := newGateway(sc, sc.lookup, ledger, log)
		if err != nil {
			closeListeners()
			return err
		}
		gw = gateway.NewSwitch(g)
		reload.add(sc.gatewayConfig, func() error {
			g, err := newGateway(sc, sc.lookup, ledger, log)
			if err == nil {
				gw.Swap(g)
			}
			return err
		})
		servers = append(servers, &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
		log.Info("gateway listening", "url", "http://"+gwLn.Addr().String()+"/v1", "models", strings.Join(g.Models(), ","))
		if rd := g.Ready(sc.hostTier); !rd.Ready && hostLn != nil {
			printNoModel(env.Stderr, rd, sc, "http://"+hostLn.Addr().String())
		}
	}
	if hostLn != nil {
		gatewayURL := sc.gatewayBaseURL
		if gatewayURL == "" {
			gatewayURL = "http://" + gwLn.Addr().String() + "/v1"
		}
		var pairURL func() string
		if certs != nil {
			port := tlsLn.Addr().(*net.TCPAddr).Port
			pairURL = func() string { return httpsURL(certs, port) }
		}
		h, err := buildHost(ctx, env, hostDeps{cfg: cfg, sc: sc, gw: gw, gatewayURL: gatewayURL, ledger: ledger, log: log, pairURL: pairURL, reload: reload}, st)
		if err != nil {
			closeListeners()
			return err
		}
		servers = append([]*http.Server{{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}, servers...)
		log.Info("host listening", "url", "http://"+hostLn.Addr().String(), "home", sc.home, "model", sc.hostTier)
		printNextSteps(env.Stdout, "http://"+hostLn.Addr().String(), sc.home, sources)
		if tlsLn != nil {
			servers = append(servers, &http.Server{Handler: h.Handler(), TLSConfig: certs.TLSConfig(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
				TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}) // HTTP/1.1 only (see host.CertReloader.TLSConfig)
			log.Info("HTTPS listening on all interfaces", "url", pairURL(), "port", sc.tlsPort, "cert", sc.tlsCert)
		}
	}

	listeners := []net.Listener{}
	if hostLn != nil {
		listeners = append(listeners, hostLn)
	}
	if gwLn != nil {
		listeners = append(listeners, gwLn)
	}
	if tlsLn != nil {
		listeners = append(listeners, tlsLn)
	}
	reload.run(ctx)
	errc := make(chan error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveOne := srv.Serve
			if srv.TLSConfig != nil {
				serveOne = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
			}
			if err := serveOne(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests", "grace", shutdownGrace)
	case runErr = <-errc:
		log.Error("server failed; stopping", "err", runErr)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Warn("in-flight requests cancelled at the end of the grace period", "err", err)
			srv.Close()
		}
	}
	wg.Wait()
	log.Info("stopped")
	return runErr
}

// newGateway builds the gateway from GATEWAY_CONFIG, resolving provider keys
// with lookup.
func newGateway(sc *serveConfig, lookup func(string) (string, bool), ledger gateway.Ledger, log *slog.Logger) (*gateway.Gateway, error) {
	gcfg, found, err := gateway.LoadConfig(sc.gatewayConfig)
	if err != nil {
		return nil, err
	}
	if !found {
		log.Info("no gateway config; using built-in defaults (tier-1 and local-embed on Ollama, tier-2…6 on DeepSeek)", "path", sc.gatewayConfig)
	}
	return gateway.New(gateway.Options{
		Config: gcfg, LookupEnv: lookup, APIKey: sc.gatewayKey,
		RequestTimeout: sc.requestTimeout, AttemptTimeLimit: sc.requestTimeout, StreamInactivity: sc.streamInactivity,
		Ledger: ledger, Logger: log,
	})
}

// printNoModel tells, in one block, that chats cannot work yet and how to
// fix it.
func printNoModel(w io.Writer, rd gateway.Readiness, sc *serveConfig, hostURL string) {
	fmt.Fprintf(w, `
  No usable chat model.
    %s.
  Fix it in one of these ways:
    - open %s and fill in the first-run screen (any OpenAI-compatible provider), or
    - run: steward setup, or
    - put the missing key in %s (for the built-in DeepSeek tiers: DEEPSEEK_API_KEY=sk-…)
      and restart, or write %s yourself (see the README).

`, sentence(strings.TrimPrefix(rd.Problem, "no usable chat model: ")), hostURL, filepath.Join(sc.home, config.EnvFileName), sc.gatewayConfig)
}

// sentence capitalises s's first letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
