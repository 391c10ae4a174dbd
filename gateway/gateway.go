// Package gateway is the OpenAI-compatible model gateway: callers ask for a
// capability (a public model name such as tier-5 or local-embed) and the
// gateway maps it to ordered provider candidates, falls back across them on
// failures that happen before any output, applies the streaming rules, checks
// the optional bearer key, and records one usage row per request.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// MaxRequestBytes bounds a request body.
const MaxRequestBytes = 32 << 20

// DefaultRequestTimeout is the deadline shared by all attempts of a request.
const DefaultRequestTimeout = 120 * time.Second

// Options configures a Gateway.
type Options struct {
	Config *Config
	// LookupEnv resolves providers' api_key_env (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// APIKey, when set, is required as a bearer token on the POST model routes.
	APIKey string
	// RequestTimeout is one deadline for every attempt and the response body
	// (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// StreamInactivity is how long one candidate's stream may go without an
	// SSE data event, counted from the request (headers do not renew it).
	// Before any output the attempt fails and the next candidate is tried;
	// after output started the stream ends with an in-band
	// llm.StreamStalledCode error. 0 means llm.DefaultStreamInactivity.
	StreamInactivity time.Duration
	// AttemptTimeLimit bounds one candidate's attempt, streamed or not,
	// however steadily data arrives; past it the attempt fails like a stall
	// (code llm.CallTimeLimitCode). 0 means llm.DefaultCallTimeLimit.
	AttemptTimeLimit time.Duration
	// Ledger records usage; nil records nothing.
	Ledger Ledger
	Logger *slog.Logger
	// Transport reaches the providers (default: a pooled transport sized for
	// concurrent streams).
	Transport http.RoundTripper
}

// Gateway serves the OpenAI-compatible routes.
type Gateway struct {
	cfg     *Config
	chains  map[string][]*target
	names   []string
	apiKey  []byte
	timeout time.Duration
	// inactivity and attemptLimit are the per-attempt limits.
	inactivity, attemptLimit time.Duration
	ledger                   Ledger
	log                      *slog.Logger
	client                   *http.Client
	secrets                  []string
	handler                  http.Handler
}

// New validates opts.Config and resolves every public name's targets.
func New(opts Options) (*Gateway, error) {
	if opts.Config == nil {
		return nil, errors.New("gateway: no configuration")
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("gateway configuration: %w", err)
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	g := &Gateway{
		cfg:        opts.Config,
		chains:     buildChains(opts.Config, lookup),
		timeout:    opts.RequestTimeout,
		inactivity: opts.StreamInactivity, attemptLimit: opts.AttemptTimeLimit,
		ledger: opts.Ledger,
		log:    opts.Logger,
	}
	if g.timeout <= 0 {
		g.timeout = DefaultRequestTimeout
	}
	if g.inactivity <= 0 {
		g.inactivity = llm.DefaultStreamInactivity
	}
	if g.attemptLimit <= 0 {
		g.attemptLimit = llm.DefaultCallTimeLimit
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if opts.APIKey != "" {
		g.apiKey = []byte(opts.APIKey)
		g.secrets = append(g.secrets, opts.APIKey)
	}
	for name := range g.chains {
		g.names = append(g.names, name)
		for _, t := range g.chains[name] {
			if t.apiKey != "" {
				g.secrets = append(g.secrets, t.apiKey)
			}
		}
	}
	sort.Strings(g.names)
	rt := opts.Transport
	if rt == nil {
		rt = NewTransport()
	}
	g.client = &http.Client{Transport: rt}
	g.handler = g.routes()
	return g, nil
}

// NewTransport returns the pooled HTTP transport the gateway uses upstream,
// sized so that many concurrent streams reuse connections.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Models returns the public model names, sorted.
func (g *Gateway) Models() []string { return append([]string(nil), g.names...) }

// Handler returns the HTTP routes.
func (g *Gateway) Handler() http.Handler { return g.handler }

func (g *Gateway) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", g.auth(g.handleChat))
	mux.HandleFunc("POST /v1/embeddings", g.auth(g.handleEmbeddings))
	mux.HandleFunc("GET /v1/models", g.handleModels)
	mux.HandleFunc("GET /rates", g.handleRates)
	mux.HandleFunc("GET /health", g.handleHealth)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func (g *Gateway) auth(next http.HandlerFunc) http.HandlerFunc {
	if g.apiKey == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), g.apiKey) != 1 {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"missing or wrong bearer key: this gateway requires Authorization: Bearer <GATEWAY_API_KEY>")
			return
		}
		next(w, r)
	}
}

func (g *Gateway) handleModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, n := range g.names {
		out.Data = append(out.Data, model{ID: n, Object: "model", OwnedBy: "steward-gateway"})
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) handleRates(w http.ResponseWriter, r *http.Request) {
	rates := g.cfg.Rates
	if rates == nil {
		rates = map[string]Rate{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"unit": "USD per million tokens", "rates": rates})
}

func (g *Gateway) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"ok": true, "service": "steward-gateway", "models": len(g.names)}
	// ?model=NAME asks whether that name can be served: a gateway without a
	// usable key is up but not useful, and says so.
	if m := r.URL.Query().Get("model"); m != "" {
		rd := g.Ready(m)
		body["ready"] = rd
		if !rd.Ready {
			body["warning"] = rd.Problem
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// Rates returns the configured rates.
func (g *Gateway) Rates() map[string]Rate { return g.cfg.Rates }

// ContextWindow returns the context, in tokens, every candidate of a public
// model name holds (0 when not declared); see Config.ContextWindow.
func (g *Gateway) ContextWindow(public string) int { return g.cfg.ContextWindow(public) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers with an OpenAI-style error object.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}

// scrub removes every configured secret from b, so that a provider that
// echoes a key can never leak it through us.
func (g *Gateway) scrub(b []byte) []byte {
	for _, s := range g.secrets {
		if len(s) >= 4 && strings.Contains(string(b), s) {
			b = []byte(strings.ReplaceAll(string(b), s, "[redacted]"))
		}
	}
	return b
}

func (g *Gateway) scrubString(s string) string { return string(g.scrub([]byte(s))) }

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return "gw-" + hex.EncodeToString(b[:])
}

// attributionLabel reads an attribution header, bounded and never empty.
func attributionLabel(r *http.Request, h string) string {
	v := strings.TrimSpace(r.Header.Get(h))
	if v == "" {
		return "unknown"
	}
	if len(v) > 64 {
		v = v[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// isRetryable reports whether a provider status lets the request move on to
// the next candidate.
func isRetryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

func (g *Gateway) record(ctx context.Context, rec *RequestRecord) {
	sink := traceOf(ctx)
	if g.ledger == nil && sink == nil {
		return
	}
	rec.Error = g.scrubString(rec.Error)
	if rate, ok := g.cfg.Rates[rec.Provider+"/"+rec.UpstreamModel]; ok {
		rec.CostUSD = rate.Cost(rec.Tokens)
	}
	if sink != nil {
		sink.request(*rec)
	}
	if g.ledger != nil {
		g.ledger.RecordRequest(context.WithoutCancel(ctx), *rec)
	}
}

func (g *Gateway) recordAttempt(ctx context.Context, a AttemptRecord) {
	sink := traceOf(ctx)
	if g.ledger == nil && sink == nil {
		return
	}
	a.Error = g.scrubString(a.Error)
	if sink != nil {
		sink.attempt(a)
	}
	if g.ledger != nil {
		g.ledger.RecordAttempt(context.WithoutCancel(ctx), a)
	}
}
