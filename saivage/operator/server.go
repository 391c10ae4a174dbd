// Package operator is Saivage's operator surface: the authenticated REST API
// (bearer auth is checked before any request validation), a WebSocket that
// carries debounced freshness hints (REST stays the source of truth), and
// the composition that starts a server over a project (lock, admission,
// startup recovery, listener, lock endpoint).
package operator

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Server serves the operator API for one runtime.
type Server struct {
	rt      *runtime.Runtime
	token   string
	hub     *SyncHub
	tickets *tickets
	log     *slog.Logger
	mux     *http.ServeMux
}

// ServerOptions configures a Server.
type ServerOptions struct {
	Runtime *runtime.Runtime
	// Token is the bearer token every /api route requires.
	Token string
	// Hub carries live hints (one is created when nil).
	Hub    *SyncHub
	Logger *slog.Logger
}

// NewServer builds the routes.
func NewServer(opts ServerOptions) *Server {
	s := &Server{rt: opts.Runtime, token: opts.Token, hub: opts.Hub, log: opts.Logger, tickets: newTickets()}
	if s.hub == nil {
		s.hub = NewSyncHub(0)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	api := http.NewServeMux()
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		api.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.fail(w, r, err)
			}
		})
	}
	route("GET /api/state", s.getState)
	route("GET /api/runtime/status", s.getStatus)
	route("POST /api/runtime/run", s.control("run"))
	route("POST /api/runtime/pause", s.control("pause"))
	route("POST /api/runtime/resume", s.control("resume"))
	route("POST /api/runtime/stop-project", s.control("stop"))
	route("GET /api/cards/{id}", s.getCard)
	route("GET /api/cards/{id}/children", s.getChildren)
	route("GET /api/cards/{id}/records", s.getRecords)
	route("GET /api/cards/{id}/records/{name}", s.getRecord)
	route("GET /api/cards/{id}/records/{name}/history", s.getRecordHistory)
	route("GET /api/cards/{id}/records/{name}/versions/{version}", s.getRecordVersion)
	route("GET /api/cards/{id}/records/{name}/diff", s.getRecordDiff)
	route("GET /api/cards/{id}/history", s.getCardHistory)
	route("GET /api/cards/{id}/history/{version}", s.getCardVersion)
	route("GET /api/cards/{id}/diff", s.getCardDiff)
	route("GET /api/cards/{id}/agent-sessions", s.getCardSessions)
	route("GET /api/agents", s.getAgents)
	route("GET /api/agents/{id}", s.getAgent)
	route("GET /api/agents/{id}/conversation", s.getConversation)
	route("GET /api/agents/{id}/conversation/versions", s.getConversationVersions)
	route("GET /api/agents/{id}/conversation/versions/{version}", s.getConversationVersion)
	route("GET /api/agents/{id}/llm-exchange", s.getExchange)
	route("GET /api/events", s.getEvents)
	route("GET /api/processes", s.getProcesses)
	route("GET /api/config", s.getConfig)
	route("GET /api/chat", s.getChat)
	route("POST /api/chat", s.postChat)
	route("POST /api/auth/ws-ticket", s.postTicket)
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	})

	root := http.NewServeMux()
	root.HandleFunc("GET /health", s.getHealth)
	root.HandleFunc("GET /health/ready", s.getReady)
	root.HandleFunc("GET /api/live", s.live)
	root.Handle("/api/", s.auth(api))
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	})
	s.mux = root
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Hub returns the live-hint hub.
func (s *Server) Hub() *SyncHub { return s.hub }

// auth checks the bearer token before anything else looks at the request.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="saivage"`)
			writeError(w, http.StatusUnauthorized, "Unauthorized", "missing or wrong bearer token: send Authorization: Bearer <token> (SAIVAGE_AUTH_TOKEN or .saivage/auth-token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	return ok && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// apiError is an error with an HTTP status and a stable code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(code, msg string) error { return &apiError{http.StatusBadRequest, code, msg} }
func notFound(msg string) error         { return &apiError{http.StatusNotFound, "NotFound", msg} }
func conflict(code, msg string) error   { return &apiError{http.StatusConflict, code, msg} }

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, ae.code, s.rt.Redact(ae.msg))
		return
	}
	s.log.Error("operator request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "Internal", "the request failed: "+s.rt.Redact(err.Error()))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeRedacted writes v with configured secrets removed.
func (s *Server) writeRedacted(w http.ResponseWriter, status int, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err = io.WriteString(w, s.rt.Redact(string(b))+"\n")
	return err
}

// bodyless refuses any defined request body.
func bodyless(r *http.Request) error {
	if r.ContentLength > 0 {
		return badRequest("BodyNotAllowed", "this route takes no request body")
	}
	if r.ContentLength < 0 && r.Body != nil {
		var b [1]byte
		if n, _ := r.Body.Read(b[:]); n > 0 {
			return badRequest("BodyNotAllowed", "this route takes no request body")
		}
	}
	return nil
}

// decodeBody strictly decodes a JSON body.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &apiError{http.StatusUnsupportedMediaType, "UnsupportedMediaType", "send application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("InvalidBody", "invalid JSON body: "+err.Error())
	}
	if dec.More() {
		return badRequest("InvalidBody", "trailing data after the JSON body")
	}
	return nil
}

func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("InvalidQuery", name+" must be an integer in "+strconv.Itoa(lo)+".."+strconv.Itoa(hi))
	}
	return n, nil
}

func (s *Server) getHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "service": "saivage"})
}

func (s *Server) getReady(w http.ResponseWriter, r *http.Request) {
	st := s.rt.Status().Status
	switch st {
	case runtime.StatusUninitialized, runtime.StatusStarting, runtime.StatusClosing:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "status": st})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "status": st})
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.rt.Status())
	return nil
}

func (s *Server) getState(w http.ResponseWriter, r *http.Request) error {
	p := s.rt.Project()
	root, err := p.Cards.Get(r.Context(), "project")
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{
		"runtime": s.rt.Status(),
		"project": map[string]any{"root": p.Root, "card": map[string]any{"id": root.ID, "title": root.Title, "status": root.Status}},
		"analyst": s.rt.Analyst().Info(),
	})
}

// control runs a bodyless runtime control operation.
func (s *Server) control(op string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := bodyless(r); err != nil {
			return err
		}
		var err error
		switch op {
		case "run":
			err = s.rt.Run(r.Context())
		case "pause":
			err = s.rt.Pause(r.Context())
		case "resume":
			err = s.rt.Resume(r.Context())
		case "stop":
			err = s.rt.Stop(r.Context())
		}
		if err != nil {
			return conflict("NotAdmitted", err.Error())
		}
		_ = s.rt.LogEvent("control_action", map[string]any{"action": op, "author": "operator"})
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "runtime": s.rt.Status()})
		return nil
	}
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) error {
	m, err := config.Redact(s.rt.Project().Config)
	if err != nil {
		return err
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"config": m, "requires_restart_to_change": true})
}

func (s *Server) getProcesses(w http.ResponseWriter, r *http.Request) error {
	list := s.rt.Processes().List()
	root := s.rt.Project().Root
	for i := range list {
		list[i].Command = s.rt.Redact(list[i].Command)
		list[i].Capture = relTo(root, list[i].Capture)
		list[i].Cwd = relTo(root, list[i].Cwd)
	}
	return s.writeRedacted(w, http.StatusOK, map[string]any{"processes": list, "observed_at": time.Now().UTC()})
}
