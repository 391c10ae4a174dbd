// Package mcpbridge connects an agent to MCP servers — third-party ones from
// mcp.json and the products' own connectors — over the official Go SDK, and
// presents their tools as agent.Tool values named mcp__<server>__<tool>.
//
// Every server starts independently with its own start-up deadline, so a slow
// or broken one never holds up the others. A host takes a snapshot of the
// tools between turns (Tools), so a server that connects later shows up at the
// next turn and never changes the tool set mid-turn. A server that crashes is
// reported in Status and restarted with exponential back-off; its tools are
// missing from snapshots while it is down. Server processes get only an
// allow-listed environment plus their own configured variables, so the host's
// secrets never reach them.
package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for Options.
const (
	DefaultStartTimeout = 10 * time.Second
	DefaultBackoffMin   = time.Second
	DefaultBackoffMax   = 60 * time.Second
)

const (
	// terminateGrace is how long a stopping server gets after its stdin is
	// closed before SIGTERM, and again before SIGKILL.
	terminateGrace = 2 * time.Second
	// maxToolsPerServer bounds what one (possibly hostile) server can add to
	// every model request.
	maxToolsPerServer = 512
)

// State is where a server is in its life cycle.
type State string

// Server states shown in Status.
const (
	StateStarting   State = "starting"   // first connection attempt in progress
	StateReady      State = "ready"      // connected; its tools are in snapshots
	StateFailed     State = "failed"     // start failed or the server died; a retry is scheduled unless the config is invalid
	StateRestarting State = "restarting" // a retry is in progress
	StateStopped    State = "stopped"    // the bridge was closed
)

// Backoff is the delay between restarts: Min after the first failure,
// doubling up to Max. It goes back to Min once a server has stayed up for Max.
type Backoff struct {
	Min, Max time.Duration
}

// Options configures a Bridge.
type Options struct {
	// Servers to run, in display order.
	Servers []ServerConfig
	// StartTimeout bounds each server's start (process start, handshake and
	// tool listing); default DefaultStartTimeout.
	StartTimeout time.Duration
	// Environ is the base environment (KEY=VALUE) of every server process;
	// each server's own Env is added on top. Nil means the host's variables
	// named by DefaultEnvAllowList; an empty non-nil slice means none.
	Environ []string
	// Logger receives life-cycle events and servers' stderr; nil discards.
	Logger *slog.Logger
	// RestartBackoff paces restarts; zero fields take DefaultBackoffMin and
	// DefaultBackoffMax.
	RestartBackoff Backoff
	// ClientName is the client name sent in the MCP handshake; default
	// "agentstack".
	ClientName string
	// CustomMethods are private (non-MCP) requests the client may send with
	// CallCustom, such as Steward's steward/prepareSearch.
	CustomMethods []string
	// CallMeta, when set, returns the _meta sent with a tool call made
	// under ctx (the host names the calling chat, so a connector can link
	// what it journals to it); nil or an empty map sends none.
	CallMeta func(ctx context.Context) map[string]any
	// MaxMessageBytes bounds one message a server sends (a stdio line, an
	// HTTP response body or SSE line); a larger one closes the connection
	// with a MessageTooLargeError. 0 means no limit.
	MaxMessageBytes int
	// AlreadyLogged are messages the host has logged itself (its own
	// configuration warnings): a server's stderr record with the same
	// message is not repeated.
	AlreadyLogged []string
}

// ServerStatus is one server's state, for a System page or `--json` output.
type ServerStatus struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // "stdio" or "http"
	State     State     `json:"state"`
	Tools     int       `json:"tools"` // tools in snapshots now (0 unless ready)
	LastError string    `json:"lastError,omitempty"`
	Restarts  int       `json:"restarts"`         // start attempts after the first
	Since     time.Time `json:"since"`            // when State was entered
	RetryAt   time.Time `json:"retryAt,omitzero"` // next attempt, when failed
}

// Bridge runs a set of MCP servers and exposes their tools. Its methods are
// safe for concurrent use.
type Bridge struct {
	opts    Options
	log     *slog.Logger
	servers []*server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every status change
	started bool
	closed  bool
	cancel  context.CancelFunc
	runCtx  context.Context // Start's, for servers Reconfigure adds
	wg      sync.WaitGroup

	// after waits out a restart delay; tests replace it to hold and count
	// restarts without sleeping.
	after func(time.Duration) <-chan time.Time

	active int // tool calls in flight; guarded by mu

	shown *shownLines // servers' stderr records already logged
}

// New prepares a bridge; nothing starts until Start. A server whose
// configuration is invalid or whose name repeats an earlier one is reported
// as failed in Status and never started.
func New(opts Options) *Bridge {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.RestartBackoff.Min <= 0 {
		opts.RestartBackoff.Min = DefaultBackoffMin
	}
	if opts.RestartBackoff.Max <= 0 {
		opts.RestartBackoff.Max = DefaultBackoffMax
	}
	opts.RestartBackoff.Max = max(opts.RestartBackoff.Max, opts.RestartBackoff.Min)
	if opts.Environ == nil {
		opts.Environ = AllowedEnv(os.Environ(), DefaultEnvAllowList())
	}
	if opts.ClientName == "" {
		opts.ClientName = "agentstack"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{opts: opts, log: log, changed: make(chan struct{}), after: time.After, shown: newShownLines(opts.AlreadyLogged)}
	seen := map[string]bool{}
	now := time.Now()
	for _, cfg := range opts.Servers {
		s := b.newServer(cfg, now)
		if err := cfg.Validate(); err != nil {
			s.state, s.lastErr, s.invalid = StateFailed, s.mask(err.Error()), true
		} else if seen[cfg.Name] {
			s.state, s.lastErr, s.invalid = StateFailed, fmt.Sprintf("duplicate server name %q; only the first is used", cfg.Name), true
		}
		seen[cfg.Name] = true
		b.servers = append(b.servers, s)
	}
	return b
}

func (b *Bridge) newServer(cfg ServerConfig, now time.Time) *server {
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Env = maps.Clone(cfg.Env)
	cfg.Headers = maps.Clone(cfg.Headers)
	return &server{
		b: b, cfg: cfg, mask: secretMasker(cfg),
		log:   b.log.With("mcp_server", cfg.Name),
		state: StateStarting, since: now,
	}
}

// launchLocked starts s under the bridge's context; b.mu is held.
func (b *Bridge) launchLocked(ctx context.Context, s *server) {
	sctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	b.wg.Go(func() {
		defer close(s.done)
		s.run(sctx)
	})
}

// Reconfigure makes the bridge run exactly servers, as a reloaded mcp.json
// says: a server whose configuration is unchanged keeps running (its session
// and calls in flight intact), a changed one is stopped and started again, a
// new one starts and a removed one stops. An invalid or duplicate
// configuration changes nothing and is returned, so a bad file keeps the
// servers that run.
func (b *Bridge) Reconfigure(servers []ServerConfig) error {
	seen := map[string]bool{}
	for _, cfg := range servers {
		if err := cfg.Validate(); err != nil {
			return err
		}
		if seen[cfg.Name] {
			return fmt.Errorf("duplicate server name %q", cfg.Name)
		}
		seen[cfg.Name] = true
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("the MCP bridge is closed")
	}
	old := map[string]*server{}
	for _, s := range b.servers {
		old[s.cfg.Name] = s
	}
	now := time.Now()
	var next []*server
	var stop []*server
	for _, cfg := range servers {
		if s, ok := old[cfg.Name]; ok && !s.invalid && reflect.DeepEqual(s.cfg, cfg) {
			next = append(next, s)
			delete(old, cfg.Name)
			continue
		}
		next = append(next, b.newServer(cfg, now))
	}
	for _, s := range old {
		stop = append(stop, s)
	}
	b.servers = next
	ctx := b.runCtx
	if b.started {
		for _, s := range next {
			if s.done == nil && !s.invalid {
				b.launchLocked(ctx, s)
			}
		}
	}
	b.notifyLocked()
	b.mu.Unlock()
	for _, s := range stop {
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
		b.log.Info("mcp server removed by a configuration reload", "mcp_server", s.cfg.Name)
	}
	return nil
}

// Start launches every server concurrently and returns at once; each has
// its own start-up deadline. Servers run until Close or until ctx ends.
// Calling Start again, or after Close, does nothing.
func (b *Bridge) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.closed {
		return
	}
	b.started = true
	ctx, b.cancel = context.WithCancel(ctx)
	b.runCtx = ctx
	for _, s := range b.servers {
		if s.invalid {
			continue
		}
		b.launchLocked(ctx, s)
	}
}

// Close stops every server process (and anything it spawned) and waits for
// them to end. It is idempotent and always returns nil.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	b.wg.Wait()
	b.mu.Lock()
	for _, s := range b.servers {
		if !s.invalid {
			s.setLocked(StateStopped)
		}
	}
	b.mu.Unlock()
	return nil
}

// Tools returns the tools of the servers that are ready now, sorted by
// name. The slice is a snapshot: take one per turn.
func (b *Bridge) Tools() []agent.Tool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []agent.Tool
	for _, s := range b.servers {
		if s.state == StateReady {
			for _, t := range s.tools {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec().Name < out[j].Spec().Name })
	return out
}

// ReadOnlyHint reports whether the tool named tool (as Tools names it) is
// listed by a ready server and whether that server annotated it
// readOnlyHint. The annotation is the server's claim: whether to believe it
// is the caller's decision (Steward's policy believes only its own
// connectors).
func (b *Bridge) ReadOnlyHint(tool string) (readOnly, listed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.servers {
		if s.state != StateReady {
			continue
		}
		for _, t := range s.tools {
			if t.spec.Name == tool {
				return t.readOnly, true
			}
		}
	}
	return false, false
}

// Status reports every configured server, in configuration order.
func (b *Bridge) Status() []ServerStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ServerStatus, 0, len(b.servers))
	for _, s := range b.servers {
		st := ServerStatus{
			Name: s.cfg.Name, Transport: s.cfg.Transport(), State: s.state,
			LastError: s.lastErr, Restarts: s.restarts, Since: s.since, RetryAt: s.retryAt,
		}
		if s.state == StateReady {
			st.Tools = len(s.tools)
		}
		out = append(out, st)
	}
	return out
}

// Updates returns a channel that is closed at the next status change (a
// server changing state, its tool list changing, or the last tool call in
// flight ending). Take a new one after each change.
func (b *Bridge) Updates() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Session waits until the named server is ready (or ctx ends) and returns
// its live session, for direct requests that are not agent tool calls. Only
// that server is waited for.
func (b *Bridge) Session(ctx context.Context, name string) (*mcp.ClientSession, error) {
	var sess *mcp.ClientSession
	err := b.waitFor(ctx, func() (bool, error) {
		s := b.serverLocked(name)
		switch {
		case s == nil:
			return false, fmt.Errorf("no MCP server named %q", name)
		case s.invalid:
			return false, fmt.Errorf("MCP server %q is not usable: %s", name, s.lastErr)
		case s.state == StateStopped:
			return false, fmt.Errorf("MCP server %q is stopped", name)
		case s.state == StateReady:
			sess = s.conn.sess
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for MCP server %q: %w", name, err)
	}
	return sess, nil
}

// ErrMethodNotFound reports a custom request the server does not provide.
var ErrMethodNotFound = errors.New("method not provided by the server")

type customParams struct{ mcp.ParamsBase }

type customResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *customResult) UnmarshalJSON(b []byte) error {
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

// CallCustom sends the private request method (one of Options.CustomMethods)
// with empty parameters to the named server, waiting for it to be ready, and
// returns the raw result. A server without the method gives
// ErrMethodNotFound.
func (b *Bridge) CallCustom(ctx context.Context, name, method string) (json.RawMessage, error) {
	sess, err := b.Session(ctx, name)
	if err != nil {
		return nil, err
	}
	res, err := mcp.CallCustomMethod[*customParams, *customResult](ctx, sess, method, &customParams{})
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound {
			return nil, fmt.Errorf("%s on %s: %w", method, name, ErrMethodNotFound)
		}
		s := b.serverByName(name)
		return nil, fmt.Errorf("%s on %s: %s", method, name, s.mask(err.Error()))
	}
	return res.raw, nil
}

func (b *Bridge) serverByName(name string) *server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.serverLocked(name)
}

func (b *Bridge) callStarted() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

func (b *Bridge) callEnded() {
	b.mu.Lock()
	b.active--
	if b.active == 0 {
		b.notifyLocked()
	}
	b.mu.Unlock()
}

// WaitIdle blocks until no tool call is in flight on any server (or ctx
// ends), for background work that should not compete with interactive
// calls.
func (b *Bridge) WaitIdle(ctx context.Context) error {
	return b.waitFor(ctx, func() (bool, error) { return b.active == 0, nil })
}

// WaitStarted blocks until every server has finished its first start
// attempt, successful or not, or ctx ends. It is for command-line tools and
// tests; a host does not need to wait.
func (b *Bridge) WaitStarted(ctx context.Context) error {
	return b.waitFor(ctx, func() (bool, error) {
		for _, s := range b.servers {
			if s.state == StateStarting {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitFor re-evaluates cond (under the lock) at every status change.
func (b *Bridge) waitFor(ctx context.Context, cond func() (bool, error)) error {
	for {
		b.mu.Lock()
		ok, err := cond()
		ch := b.changed
		b.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes everyone waiting on Updates; b.mu must be held.
func (b *Bridge) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// serverLocked finds a server by name, preferring the one that runs over an
// invalid duplicate; b.mu must be held.
func (b *Bridge) serverLocked(name string) *server {
	for _, s := range b.servers {
		if s.cfg.Name == name && !s.invalid {
			return s
		}
	}
	for _, s := range b.servers {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// server is one configured server and its supervisor's state.
type server struct {
	b       *Bridge
	cfg     ServerConfig
	log     *slog.Logger
	mask    func(string) string
	invalid bool // never started: bad or duplicate configuration

	// cancel stops this server alone (Reconfigure); done closes when its
	// run has returned.
	cancel context.CancelFunc
	done   chan struct{}

	// Guarded by b.mu.
	state    State
	conn     *conn // set while ready
	tools    []*bridgeTool
	lastErr  string
	restarts int
	since    time.Time
	retryAt  time.Time
}

// setLocked enters a state and wakes waiters; b.mu must be held.
func (s *server) setLocked(st State) {
	s.state, s.since = st, time.Now()
	if st != StateFailed {
		s.retryAt = time.Time{}
	}
	if st != StateReady {
		s.conn, s.tools = nil, nil
	}
	s.b.notifyLocked()
}

func (s *server) set(st State) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.setLocked(st)
}

// run is the supervisor: start, serve until the session ends, wait out the
// back-off, start again — until ctx ends.
func (s *server) run(ctx context.Context) {
	defer s.set(StateStopped)
	bo := s.b.opts.RestartBackoff
	delay := bo.Min
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			s.b.mu.Lock()
			s.restarts++
			s.setLocked(StateRestarting)
			s.b.mu.Unlock()
		}
		c, tools, err := s.connect(ctx)
		if err == nil {
			up := time.Now()
			err = s.serve(ctx, c, tools)
			if time.Since(up) >= bo.Max {
				delay = bo.Min
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.b.mu.Lock()
		s.lastErr = s.mask(err.Error())
		s.setLocked(StateFailed)
		s.retryAt = time.Now().Add(delay)
		s.b.mu.Unlock()
		s.log.Warn("mcp server down; will restart", "error", s.lastErr, "retry_in", delay)

		select {
		case <-ctx.Done():
			return
		case <-s.b.after(delay):
		}
		delay = min(2*delay, bo.Max)
	}
}

// conn is one live connection (and, for stdio, one process).
type conn struct {
	// ctx ends when the connection is being closed; it bounds tool calls, so
	// none outlives its server.
	ctx     context.Context
	cancel  context.CancelFunc
	sess    *mcp.ClientSession
	proc    *process           // nil for HTTP servers
	http    *http.Client       // nil for stdio servers
	local   *mcp.ServerSession // the in-process server's side; nil otherwise
	refresh chan struct{}
	// oversize is set when the server sent a message over
	// Options.MaxMessageBytes (the connection then ends).
	oversize atomic.Bool
}

// exited is closed when a stdio server's process ends; nil (never ready)
// for HTTP servers.
func (c *conn) exited() <-chan struct{} {
	if c.proc == nil {
		return nil
	}
	return c.proc.exited
}

// close ends calls in flight, the process (for stdio) and the session, and
// reports how the process ended.
func (c *conn) close() (exit string) {
	c.cancel()
	if c.proc != nil {
		// The process goes first: the session's Close waits for requests in
		// flight, which end once the server is gone.
		exit = c.proc.stop()
	}
	if c.sess != nil {
		_ = c.sess.Close()
	}
	if c.local != nil {
		_ = c.local.Close()
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	return exit
}

// connect starts the server and lists its tools within StartTimeout.
func (s *server) connect(ctx context.Context) (*conn, []*bridgeTool, error) {
	c := &conn{refresh: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(ctx)
	var transport mcp.Transport
	switch {
	case s.cfg.Server != nil:
		st, ct := mcp.NewInMemoryTransports()
		local, err := s.cfg.Server.Connect(c.ctx, st, nil)
		if err != nil {
			c.cancel()
			return nil, nil, fmt.Errorf("start in process: %w", err)
		}
		c.local, transport = local, ct
	case s.cfg.URL != "":
		ht := newHeaderTransport(s.cfg)
		ht.maxBody, ht.onHit = s.b.opts.MaxMessageBytes, func() { c.oversize.Store(true) }
		c.http = &http.Client{Transport: ht}
		transport = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: c.http}
	default:
		p, err := startProcess(s.cfg, s.b.opts.Environ, newStderrSink(s.log, s.mask, s.cfg.Name, s.b.shown))
		if err != nil {
			c.cancel()
			return nil, nil, errors.New(s.mask("start: " + err.Error()))
		}
		c.proc = p
		transport = p.transport(s.b.opts.MaxMessageBytes, func() { c.oversize.Store(true) })
	}
	caps := &mcp.ClientCapabilities{} // no sampling or elicitation on offer
	roots := s.roots()
	if len(roots) > 0 {
		caps.RootsV2 = &mcp.RootCapabilities{} // a fixed list: no listChanged
	}
	client := mcp.NewClient(&mcp.Implementation{Name: s.b.opts.ClientName, Version: "1"}, &mcp.ClientOptions{
		Logger:       s.log,
		Capabilities: caps,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.refresh <- struct{}{}:
			default: // a refresh is already pending
			}
		},
	})

	client.AddRoots(roots...)
	for _, m := range s.b.opts.CustomMethods {
		if err := mcp.AddSendingCustomMethod[*customParams, *customResult](client, m); err != nil {
			c.close()
			return nil, nil, fmt.Errorf("register %s: %w", m, err)
		}
	}

	startCtx, cancel := context.WithTimeout(c.ctx, s.b.opts.StartTimeout)
	defer cancel()
	// A server that dies during the handshake fails the start at once, even
	// if something it spawned keeps its stdout open.
	if c.proc != nil {
		go func() {
			select {
			case <-c.proc.exited:
				cancel()
			case <-startCtx.Done():
			}
		}()
	}
	startErr := func(step string, err error) error {
		timedOut := ctx.Err() == nil && errors.Is(startCtx.Err(), context.DeadlineExceeded)
		exitedEarly := c.proc != nil && c.proc.exitStatus() != ""
		exit := c.close()
		switch {
		case exitedEarly:
			err = errProcessExited
		case timedOut:
			err = fmt.Errorf("did not start within %s", s.b.opts.StartTimeout)
		}
		return s.describe(fmt.Errorf("%s: %w", step, err), exit, c)
	}
	sess, err := client.Connect(startCtx, transport, nil)
	if err != nil {
		return nil, nil, startErr("start", err)
	}
	c.sess = sess
	tools, err := s.listTools(startCtx, sess)
	if err != nil {
		return nil, nil, startErr("list tools", err)
	}
	if c.proc != nil {
		s.log.Info("mcp server ready", "tools", len(tools), "pid", c.proc.cmd.Process.Pid)
	} else {
		s.log.Info("mcp server ready", "tools", len(tools))
	}
	return c, tools, nil
}

// roots are the MCP roots offered to the server: its configured Roots as
// file:// URIs, for stdio servers only.
func (s *server) roots() []*mcp.Root {
	if s.cfg.URL != "" {
		return nil
	}
	var out []*mcp.Root
	for _, dir := range s.cfg.Roots {
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}
		out = append(out, &mcp.Root{URI: u.String(), Name: filepath.Base(dir)})
	}
	return out
}

// serve publishes the connection's tools and keeps them current until the
// session ends (or the process exits) or ctx does.
func (s *server) serve(ctx context.Context, c *conn, tools []*bridgeTool) error {
	s.b.mu.Lock()
	s.lastErr = ""
	s.setLocked(StateReady)
	s.conn, s.tools = c, tools
	s.b.mu.Unlock()

	done := make(chan error, 1)
	go func() { done <- c.sess.Wait() }()
	for {
		var err error
		select {
		case <-ctx.Done():
			s.detach(c)
			c.close()
			return ctx.Err()
		case err = <-done:
			if err == nil {
				err = errors.New("connection closed")
			}
		case <-c.exited():
			err = errProcessExited
		case <-c.refresh:
			lctx, cancel := context.WithTimeout(c.ctx, s.b.opts.StartTimeout)
			tools, err := s.listTools(lctx, c.sess)
			cancel()
			if err != nil {
				s.log.Warn("mcp server: refresh tool list", "error", s.mask(err.Error()))
				continue
			}
			s.b.mu.Lock()
			if s.conn == c {
				s.tools = tools
				s.b.notifyLocked()
			}
			s.b.mu.Unlock()
			s.log.Info("mcp server tool list changed", "tools", len(tools))
			continue
		}
		s.detach(c)
		exit := c.close()
		return s.describe(fmt.Errorf("server went away: %w", err), exit, c)
	}
}

// detach takes c's tools out of snapshots before the (possibly slow) close.
func (s *server) detach(c *conn) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.conn == c {
		s.setLocked(StateFailed)
	}
}

// describe adds what the process left behind (exit status, last stderr
// lines) to err and masks configured secrets.
func (s *server) describe(err error, exit string, c *conn) error {
	msg := err.Error()
	if exit != "" {
		msg += " (" + exit + ")"
	}
	if c.proc != nil {
		if tail := c.proc.stderr.Tail(); tail != "" {
			msg += "; stderr: " + tail
		}
	}
	return errors.New(s.mask(msg))
}

// listTools fetches every page of the server's tool list and wraps each
// tool for the agent.
func (s *server) listTools(ctx context.Context, sess *mcp.ClientSession) ([]*bridgeTool, error) {
	var out []*bridgeTool
	seen := map[string]bool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(out) == maxToolsPerServer {
			s.log.Warn("mcp server lists too many tools; ignoring the rest", "kept", maxToolsPerServer)
			break
		}
		if hidden, _ := t.Meta[MetaHidden].(bool); hidden {
			continue // a companion (such as a preflight) that the agent never calls itself
		}
		name := ToolName(s.cfg.Name, t.Name)
		if seen[name] {
			s.log.Warn("mcp server lists a tool twice; ignoring the repeat", "tool", t.Name)
			continue
		}
		seen[name] = true
		params, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		preflight, _ := t.Meta[MetaPreflight].(string)
		out = append(out, &bridgeTool{
			s: s, remote: t.Name, preflight: preflight, readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
			spec: agent.ToolSpec{Name: name, Description: desc, Parameters: params},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out, nil
}

// bridgeTool is one MCP tool as an agent.Tool. It belongs to the server, not
// to one connection, so a snapshot taken before a restart still works after.
type bridgeTool struct {
	s      *server
	remote string // the tool's name on the server
	spec   agent.ToolSpec
	// preflight is the server's companion tool that validates and
	// normalises this tool's arguments before an approval card shows them.
	preflight string
	// readOnly is the server's readOnlyHint annotation: a claim by the
	// server, which only a policy that trusts the server may act on.
	readOnly bool
}

// ReadOnlyHint reports whether the tool's server annotated it readOnlyHint.
func (t *bridgeTool) ReadOnlyHint() bool { return t.readOnly }

// Tool metadata keys (in a tool's _meta) that Steward's own connectors use.
const (
	// MetaPreflight names a companion tool on the same server that takes
	// the tool's arguments and returns them validated and normalised as its
	// structured content, or an error result when they are invalid. The
	// approval gate calls it before showing the card and again on the
	// user's edited arguments.
	MetaPreflight = "steward/preflight"
	// MetaHidden marks a tool the agent is not shown (a preflight companion).
	MetaHidden = "steward/hidden"
)

// Preflight validates and normalises arguments through the tool's
// preflight companion (see MetaPreflight); without one it returns args
// unchanged.
func (t *bridgeTool) Preflight(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if t.preflight == "" {
		return args, nil
	}
	res, err := t.call(ctx, t.preflight, args)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		out, _ := convertResult(res)
		return nil, errors.New(strings.TrimSpace(out.Content))
	}
	if res.StructuredContent == nil {
		return nil, fmt.Errorf("preflight of %s returned no arguments", t.spec.Name)
	}
	norm, err := json.Marshal(res.StructuredContent)
	if err != nil || len(norm) == 0 || norm[0] != '{' {
		return nil, fmt.Errorf("preflight of %s returned arguments that are not a JSON object", t.spec.Name)
	}
	return norm, nil
}

// Spec returns the tool's name, description and argument schema.
func (t *bridgeTool) Spec() agent.ToolSpec { return t.spec }

// Call runs the tool on its server's current session. A server that is down
// or goes away during the call gives an error at once; ctx bounds the wait
// for a live server's answer.
func (t *bridgeTool) Call(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
	res, err := t.call(ctx, t.remote, args)
	if err != nil {
		return agent.ToolResult{}, err
	}
	return convertResult(res)
}

// call runs the server's tool remote with args on the current session.
func (t *bridgeTool) call(ctx context.Context, remote string, args json.RawMessage) (*mcp.CallToolResult, error) {
	s := t.s
	s.b.mu.Lock()
	c, state, lastErr := s.conn, s.state, s.lastErr
	s.b.mu.Unlock()
	if c == nil {
		msg := fmt.Sprintf("call %s: MCP server %q is not connected (%s)", t.spec.Name, s.cfg.Name, state)
		if lastErr != "" {
			msg += ": " + lastErr
		}
		return nil, errors.New(msg)
	}
	arguments, err := callArgs(args)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", t.spec.Name, err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)() // the server stopping ends the call
	s.b.callStarted()
	defer s.b.callEnded()
	params := &mcp.CallToolParams{Name: remote, Arguments: arguments}
	if f := s.b.opts.CallMeta; f != nil {
		if meta := f(ctx); len(meta) > 0 {
			params.Meta = meta
		}
	}
	res, err := c.sess.CallTool(callCtx, params)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("call %s: %w", t.spec.Name, ctx.Err())
	case c.oversize.Load():
		return nil, fmt.Errorf("call %s: %w; the connection was closed", t.spec.Name, &MessageTooLargeError{Limit: s.b.opts.MaxMessageBytes})
	case c.ctx.Err() != nil, errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		s.b.mu.Lock()
		closing := s.b.closed
		s.b.mu.Unlock()
		if closing {
			return nil, fmt.Errorf("call %s: the MCP bridge is shutting down", t.spec.Name)
		}
		return nil, fmt.Errorf("call %s: MCP server %q went away before answering; it will be restarted", t.spec.Name, s.cfg.Name)
	default:
		return nil, fmt.Errorf("call %s: %s", t.spec.Name, s.mask(err.Error()))
	}
}

// callArgs passes the model's arguments through unchanged, as long as they
// are a JSON object; absent arguments become {}.
func callArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, errors.New("arguments must be a JSON object")
	}
	return json.RawMessage(trimmed), nil
}

// headerTransport adds a server's configured headers to requests for its own
// host only, so a redirect elsewhere never carries its credentials.
type headerTransport struct {
	base    http.RoundTripper
	host    string
	headers map[string]string
	// maxBody bounds responses (see limitBody); 0 means no limit.
	maxBody int
	onHit   func()
}

func newHeaderTransport(cfg ServerConfig) *headerTransport {
	u, _ := url.Parse(cfg.URL) // validated
	var base http.RoundTripper = http.DefaultTransport
	if t, ok := base.(*http.Transport); ok {
		base = t.Clone() // own idle pool, closed with the connection
	}
	return &headerTransport{base: base, host: u.Host, headers: cfg.Headers}
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && strings.EqualFold(r.URL.Host, t.host) {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		limitBody(resp, t.maxBody, t.onHit)
	}
	return resp, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (t *headerTransport) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// RefreshTools re-lists the named server's tools on its current connection
// (no reconnect) and publishes the new list. It fails when the server is not
// ready or ctx ends first; the previous list stays in place on failure.
func (b *Bridge) RefreshTools(ctx context.Context, name string) (int, error) {
	b.mu.Lock()
	s := b.serverLocked(name)
	if s == nil {
		b.mu.Unlock()
		return 0, fmt.Errorf("no MCP server named %q", name)
	}
	c := s.conn
	b.mu.Unlock()
	if c == nil {
		return 0, fmt.Errorf("MCP server %q is not ready", name)
	}
	tools, err := s.listTools(ctx, c.sess)
	if err != nil {
		return 0, fmt.Errorf("refresh tools of %s: %s", name, s.mask(err.Error()))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.conn != c {
		return 0, fmt.Errorf("MCP server %q reconnected during the refresh; refresh again", name)
	}
	s.tools = tools
	b.notifyLocked()
	return len(tools), nil
}
