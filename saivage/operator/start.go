package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/runtime"
	"github.com/agentstack/agentstack/saivage/state"
)

// EnvAuthToken is the environment variable holding the operator token.
const EnvAuthToken = "SAIVAGE_AUTH_TOKEN"

// TokenFile is the generated token file under .saivage.
const TokenFile = "auth-token"

// StartOptions configures Start.
type StartOptions struct {
	// Flags are the command-line selections (root, config, host, port).
	Flags     config.Flags
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	// Publisher performs writes (default: exit 1 on unknown outcomes).
	Publisher *state.Publisher
	// Runtime options; Project and Hints are filled in by Start.
	Runtime runtime.Options
	// AnalystMode is the --analyst-mode flag ("" = SAIVAGE_ANALYST_MODE,
	// else internal).
	AnalystMode string
	// Version labels the external MCP endpoint's implementation.
	Version string
}

// App is a started Saivage server.
type App struct {
	Runtime *runtime.Runtime
	Server  *Server
	// URL is the bound operator address (http://host:port).
	URL string
	// TokenSource says where the bearer token came from.
	TokenSource string
	lock        *lock.Lock
	http        *http.Server
	served      chan error
	pub         *state.Publisher
	restart     chan struct{}
	restartOnce sync.Once
	// AnalystMode is the mode frozen at start.
	AnalystMode config.AnalystMode
	// AnalystMCPURL is the external Analyst endpoint (external and both
	// modes only).
	AnalystMCPURL string
	// AnalystMCPTokenSource says where the endpoint's token came from.
	AnalystMCPTokenSource string
	mcpHTTP               *http.Server
}

// Start takes the project lock, admits the state, settles interrupted
// sessions and cards left running (execution stays stopped), listens and
// publishes the lock's endpoint.
func Start(ctx context.Context, opts StartOptions) (_ *App, err error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Publisher == nil {
		opts.Publisher = state.New(state.Options{})
	}
	in, err := config.ResolveInputs(opts.Flags, opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	mode, _, err := config.ResolveAnalystMode(opts.AnalystMode, opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	stateDir := filepath.Join(in.Root, config.StateDir)
	if _, err := os.Stat(stateDir); err != nil {
		return nil, fmt.Errorf("%s: no Saivage project here (run saivage init first)", in.Root)
	}
	lk, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: opts.Publisher})
	if err != nil {
		return nil, err
	}
	app := &App{lock: lk, pub: opts.Publisher, restart: make(chan struct{}), AnalystMode: mode}
	defer func() {
		if err != nil {
			app.shutdown(context.WithoutCancel(ctx))
		}
	}()
	p, err := project.Open(ctx, project.Options{Root: in.Root, ConfigPath: in.ConfigPath, LookupEnv: opts.LookupEnv, Publisher: opts.Publisher})
	if err != nil {
		return nil, err
	}
	token, source, err := authToken(p, opts.LookupEnv, EnvAuthToken, TokenFile)
	if err != nil {
		return nil, err
	}
	app.TokenSource = source
	var mcpToken string
	if mode.External() {
		if mcpToken, app.AnalystMCPTokenSource, err = authToken(p, opts.LookupEnv, EnvAnalystMCPToken, AnalystMCPTokenFile); err != nil {
			return nil, err
		}
		if mcpToken == token {
			return nil, fmt.Errorf("the external Analyst token must differ from the operator token (%s, %s)", EnvAnalystMCPToken, EnvAuthToken)
		}
	}
	hub := NewSyncHub(0)
	ro := opts.Runtime
	ro.Project, ro.Hints, ro.LookupEnv, ro.AnalystMode = p, hub, opts.LookupEnv, mode
	ro.Secrets = append(ro.Secrets, token)
	if mcpToken != "" {
		ro.Secrets = append(ro.Secrets, mcpToken)
	}
	if err := ro.BackendsFromEnv(opts.LookupEnv); err != nil {
		return nil, err
	}
	if ro.RestartServer == nil {
		ro.RestartServer = func(context.Context, string) error {
			app.restartOnce.Do(func() { close(app.restart) })
			return nil
		}
	}
	if ro.Logger == nil {
		ro.Logger = opts.Logger
	}
	rt, err := runtime.New(ro)
	if err != nil {
		return nil, err
	}
	app.Runtime = rt
	if err := rt.Startup(ctx); err != nil {
		return nil, fmt.Errorf("startup recovery: %w", err)
	}
	listen, err := config.ResolveServer(opts.Flags, opts.LookupEnv, p.Config)
	if err != nil {
		return nil, err
	}
	app.Server = NewServer(ServerOptions{Runtime: rt, Token: token, Hub: hub, Logger: opts.Logger,
		Restart: func() { app.restartOnce.Do(func() { close(app.restart) }) }})
	ln, err := net.Listen("tcp", net.JoinHostPort(listen.Host, strconv.Itoa(listen.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s:%d (%s/%s): %w", listen.Host, listen.Port, listen.HostSource, listen.PortSource, err)
	}
	app.URL = "http://" + ln.Addr().String()
	app.http = &http.Server{Handler: app.Server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	app.served = make(chan error, 1)
	go func() { app.served <- app.http.Serve(ln) }()
	if mode.External() {
		if err := app.serveAnalystMCP(rt, mcpToken, opts); err != nil {
			return nil, err
		}
	}
	if err := lk.PublishEndpoint(app.URL); err != nil {
		return nil, err
	}
	_ = rt.LogEvent("server_started", map[string]any{"url": app.URL, "pid": os.Getpid()})
	return app, nil
}

// RestartRequested is closed once a confirmed restart has been answered;
// the owner closes the app and exits with RestartExitCode.
func (a *App) RestartRequested() <-chan struct{} { return a.restart }

// Done reports the HTTP server ending on its own.
func (a *App) Done() <-chan error { return a.served }

// Close stops serving, halts any Run, contains processes and releases the
// lock.
func (a *App) Close(ctx context.Context) error {
	if a.Runtime != nil {
		_ = a.Runtime.LogEvent("server_stopping", map[string]any{"pid": os.Getpid()})
	}
	return a.shutdown(ctx)
}

// serveAnalystMCP listens on loopback (SAIVAGE_ANALYST_MCP_PORT, else any
// free port) for the external Analyst endpoint.
func (a *App) serveAnalystMCP(rt *runtime.Runtime, token string, opts StartOptions) error {
	port := "0"
	if v, ok := opts.LookupEnv(EnvAnalystMCPPort); ok && strings.TrimSpace(v) != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s %q: must be a port number 1..65535", EnvAnalystMCPPort, v)
		}
		port = strings.TrimSpace(v)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return fmt.Errorf("listen for the external Analyst on 127.0.0.1:%s: %w", port, err)
	}
	path := AnalystMCPPath(rt.Project().Root)
	mux := http.NewServeMux()
	mux.Handle(path, newAnalystMCP(rt, token, opts.Version, opts.Logger))
	a.AnalystMCPURL = "http://" + ln.Addr().String() + path
	a.mcpHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.mcpHTTP.Serve(ln) }()
	return nil
}

func (a *App) shutdown(ctx context.Context) error {
	var errs []error
	if a.mcpHTTP != nil {
		// Closing the listener ends requests; accepted operations keep
		// running until the runtime joins them below.
		_ = a.mcpHTTP.Close()
	}
	if a.http != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := a.http.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("stop HTTP server: %w", err))
			_ = a.http.Close()
		}
		cancel()
	}
	if a.Runtime != nil {
		if err := a.Runtime.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if a.lock != nil && !a.pub.Stopped() {
		if err := a.lock.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// authToken returns the environment variable envName, else .saivage/file,
// created once with a random value and mode 0600.
func authToken(p *project.Project, lookupEnv func(string) (string, bool), envName, file string) (token, source string, err error) {
	if v, ok := lookupEnv(envName); ok {
		if v = strings.TrimSpace(v); v == "" {
			return "", "", fmt.Errorf("%s is set but empty", envName)
		}
		return v, envName, nil
	}
	path := filepath.Join(p.StateDir, file)
	tok, err := ReadTokenFile(path)
	if err == nil {
		return tok, path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	tok = hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	return tok, path, state.SyncDir(p.StateDir)
}

// ReadTokenFile reads a token file, refusing one readable by others.
func ReadTokenFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by other users (mode %o); chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}
