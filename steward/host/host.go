// Package host is Steward's HTTP host on 127.0.0.1:4317: health, the
// WebSocket protocol at /ws, chat turns with the tool policy and approvals,
// uploads, quick send, and the usage and audit views. Every data route and
// the WebSocket need the host token; /health does not.
package host

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/steward/pathguard"
	"github.com/agentstack/agentstack/steward/usage"
)

// Options configures the host.
type Options struct {
	// Token authenticates every data route and the WebSocket.
	Token string
	// TokenFile is where a rotated token is stored (STEWARD_HOME/auth-token);
	// empty when the token comes from STEWARD_AUTH_TOKEN, which the host
	// cannot change, so rotation is refused.
	TokenFile string
	// PairURL returns the address a phone opens (the HTTPS listener's when
	// configured), shown with a QR code on the System page.
	PairURL func() string
	// ResolveAction lets GET /resolve?action=ID open an Action Center item.
	ResolveAction ActionResolver
	Version       string
	Logger        *slog.Logger
	// Home is STEWARD_HOME; uploads go to Home/uploads.
	Home string
	// AllowedOrigins are extra browser origins (HOST_ALLOWED_ORIGINS), e.g.
	// https://mac.tailnet.ts.net:4318. The host's own origin is always allowed.
	AllowedOrigins []string
	// Chats configures the ChatManager; its Clients is set by the host.
	Chats ManagerOptions
	// Usage serves GET /usage; Rates prices it.
	Usage *usage.Store
	Rates func() map[string]gateway.Rate
	// AuditHandler serves GET /audit (already filtering and paginating).
	AuditHandler http.Handler
	// WriteOpsHandler serves GET /writeops and GET /writeops/{id}, the
	// write journal the tool cards of journaled writes link to.
	WriteOpsHandler http.Handler
	// Web serves the web app at / without a token (it holds no data; every
	// data route it calls needs the token), e.g. steward/web.Handler().
	Web http.Handler
	// System adds the gateway, connectors and manifest tools to
	// GET /system/status; it is given a context bounded to a few seconds.
	System func(ctx context.Context) SystemInfo
	// Transcriber, when set, lets /quick-send take a recording instead of
	// text (steward/speech).
	Transcriber Transcriber
}

// Host serves Steward's HTTP routes.
type Host struct {
	opts           Options
	log            *slog.Logger
	started        time.Time
	mux            *http.ServeMux
	hub            *hub
	manager        *ChatManager
	files          *files
	originPatterns []string
	allowedOrigins map[string]bool
	health         healthLog // last state of each System page item
	requests       requestCache

	tokenMu sync.RWMutex
	token   string // the current host token; rotation replaces it

	ctx    context.Context // cancelled by Close: ends turns and connections
	cancel context.CancelFunc
	turns  sync.WaitGroup
}

// New returns a host with its routes registered.
func New(opts Options) *Host {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{opts: opts, log: opts.Logger, started: time.Now(), mux: http.NewServeMux(),
		hub: &hub{clients: map[*wsClient]struct{}{}, log: opts.Logger}, allowedOrigins: map[string]bool{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.requests.now = time.Now
	h.token = opts.Token
	for _, o := range opts.AllowedOrigins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			h.allowedOrigins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
			h.originPatterns = append(h.originPatterns, u.Host)
		}
	}
	if opts.Chats.Store != nil {
		mo := opts.Chats
		mo.Clients = h.hub
		if mo.Logger == nil {
			mo.Logger = opts.Logger
		}
		if mo.Usage == nil && opts.Usage != nil {
			mo.Usage = opts.Usage
		}
		if mo.Files == nil {
			userHome, _ := os.UserHomeDir()
			mo.Files = &fileOpener{store: mo.Store, guard: pathguard.New(pathguard.Options{Home: userHome, DataDir: opts.Home})}
		}
		h.manager = NewManager(mo)
		h.files = &files{dir: filepath.Join(opts.Home, "uploads"), store: mo.Store}
		h.mux.HandleFunc("GET /ws", h.handleWS)
		h.Handle("POST /upload", http.HandlerFunc(h.handleUpload))
		h.Handle("GET /file/{token}", http.HandlerFunc(h.handleFile))
		h.Handle("POST /quick-send", http.HandlerFunc(h.handleQuickSend))
	}
	h.mux.HandleFunc("GET /health", h.handleHealth)
	if opts.Usage != nil {
		h.Handle("GET /usage", http.HandlerFunc(h.handleUsage))
	}
	if opts.AuditHandler != nil {
		h.Handle("GET /audit", opts.AuditHandler)
		h.Handle("GET /audit/{id}", opts.AuditHandler)
	}
	if opts.WriteOpsHandler != nil {
		h.Handle("GET /writeops", opts.WriteOpsHandler)
		h.Handle("GET /writeops/{id}", opts.WriteOpsHandler)
	}
	h.mux.HandleFunc("GET /pair", h.handlePair)
	h.Handle("GET /system/status", http.HandlerFunc(h.handleSystemStatus))
	h.Handle("GET /resolve", http.HandlerFunc(h.handleResolve))
	h.Handle("GET /system/pairing", http.HandlerFunc(h.handlePairing))
	h.Handle("POST /system/token", http.HandlerFunc(h.handleRotateToken))
	if opts.Web != nil {
		h.mux.Handle("GET /", opts.Web)
	}
	return h
}

// Manager returns the host's chat manager (nil without a chat store).
func (h *Host) Manager() *ChatManager { return h.manager }

// Handler returns the host's HTTP handler, which refuses foreign browser origins.
func (h *Host) Handler() http.Handler { return h.checkOrigin(h.mux) }

// Handle registers an authenticated route.
func (h *Host) Handle(pattern string, handler http.Handler) {
	h.mux.Handle(pattern, h.RequireToken(handler))
}

// Close ends running turns and WebSocket connections, and waits for the turns
// to record their outcome.
func (h *Host) Close() {
	h.cancel()
	h.hub.closeAll()
	h.turns.Wait()
}

func (h *Host) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"ok": true, "service": "steward-host", "version": h.opts.Version,
		"uptimeSeconds": int(time.Since(h.started).Seconds()),
	})
}

// Token returns the current host token.
func (h *Host) Token() string {
	h.tokenMu.RLock()
	defer h.tokenMu.RUnlock()
	return h.token
}

func (h *Host) validToken(got string) bool {
	want := h.Token()
	return want != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}

// RequireToken lets a request through only with the host token in the
// Authorization header (never in the URL).
func (h *Host) RequireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !h.validToken(got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="steward"`)
			writeJSONError(w, http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token from STEWARD_HOME/auth-token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin refuses requests from browser pages of other origins than the
// host's own and the configured ones. Requests without Origin (curl,
// shortcuts, same-origin GETs) pass to the token check.
func (h *Host) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !h.originAllowed(origin, r) {
			writeJSONError(w, http.StatusForbidden, "this browser origin is not allowed; add it to HOST_ALLOWED_ORIGINS")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Host) originAllowed(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return h.allowedOrigins[strings.ToLower(u.Scheme+"://"+u.Host)]
}

func (h *Host) audit(ctx context.Context, e AuditEvent) {
	if h.opts.Chats.Audit != nil {
		h.opts.Chats.Audit.Audit(context.WithoutCancel(ctx), e)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
