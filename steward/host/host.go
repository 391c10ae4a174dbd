// Package host is Steward's HTTP host on 127.0.0.1:4317: health, the
// authenticated data routes and (later) the WebSocket protocol and web app.
package host

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Options configures the host.
type Options struct {
	// Token authenticates every data route.
	Token   string
	Version string
	Logger  *slog.Logger
}

// Host serves Steward's HTTP routes.
type Host struct {
	opts    Options
	started time.Time
	mux     *http.ServeMux
}

// New returns a host with its routes registered.
func New(opts Options) *Host {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{opts: opts, started: time.Now(), mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /health", h.handleHealth)
	return h
}

// Handler returns the host's HTTP handler.
func (h *Host) Handler() http.Handler { return h.mux }

// Handle registers an authenticated route.
func (h *Host) Handle(pattern string, handler http.Handler) {
	h.mux.Handle(pattern, h.RequireToken(handler))
}

func (h *Host) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"ok": true, "service": "steward-host", "version": h.opts.Version,
		"uptimeSeconds": int(time.Since(h.started).Seconds()),
	})
}

// RequireToken lets a request through only with the host token in the
// Authorization header (never in the URL).
func (h *Host) RequireToken(next http.Handler) http.Handler {
	want := []byte(h.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="steward"`)
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "missing or wrong token: send Authorization: Bearer <token from STEWARD_HOME/auth-token>"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
