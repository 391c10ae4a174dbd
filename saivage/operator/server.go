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
	"slices"
	"strconv"
	"strings"
	"sync"
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
	restart func()
	redact  func(string) string
	// gc admits one work collection at a time.
	gc sync.Mutex
}

// ServerOptions configures a Server.
type ServerOptions struct {
	Runtime *runtime.Runtime
	// Token is the bearer token every /api route requires.
	Token string
	// Hub carries live hints (one is created when nil).
	Hub    *SyncHub
	Logger *slog.Logger
	// Restart is called after a confirmed POST /api/runtime/restart-server
	// has been answered; nil makes the route answer 409.
	Restart func()
}

// NewServer builds the routes.
func NewServer(opts ServerOptions) *Server {
	s := &Server{rt: opts.Runtime, token: opts.Token, hub: opts.Hub, log: opts.Logger, tickets: newTickets(), restart: opts.Restart}
	if s.rt != nil {
		s.redact = s.rt.Redact
	}
	if s.hub == nil {
		s.hub = NewSyncHub(0)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	handlers := map[string]func(w http.ResponseWriter, r *http.Request) error{
		"state.get":                   s.getState,
		"runtime.status":              s.getStatus,
		"runtime.run":                 s.control("run"),
		"runtime.pause":               s.control("pause"),
		"runtime.resume":              s.control("resume"),
		"runtime.stop":                s.control("stop"),
		"runtime.contentPolicy":       s.getContentPolicy,
		"runtime.gcWork":              s.postGCWork,
		"runtime.restartServer":       s.postRestart,
		"cards.get":                   s.getCard,
		"cards.children":              s.getChildren,
		"cards.records":               s.getRecords,
		"cards.record":                s.getRecord,
		"cards.recordHistory":         s.getRecordHistory,
		"cards.recordVersion":         s.getRecordVersion,
		"cards.recordDiff":            s.getRecordDiff,
		"cards.history":               s.getCardHistory,
		"cards.version":               s.getCardVersion,
		"cards.diff":                  s.getCardDiff,
		"cards.agentSessions":         s.getCardSessions,
		"executions.list":             s.getExecutions,
		"executions.get":              s.getExecution,
		"executions.file":             s.getExecutionFile(false),
		"executions.download":         s.getExecutionFile(true),
		"agents.list":                 s.getAgents,
		"agents.get":                  s.getAgent,
		"agents.conversation":         s.getConversation,
		"agents.conversationVersions": s.getConversationVersions,
		"agents.conversationVersion":  s.getConversationVersion,
		"agents.llmExchange":          s.getExchange,
		"agents.currentInstructions":  s.getInstructions,
		"agents.conversationImage":    s.getConversationImage,
		"workflows.presentation":      s.getPresentation,
		"events.list":                 s.getEvents,
		"processes.list":              s.getProcesses,
		"config.get":                  s.getConfig,
		"providers.list":              s.getProviders,
		"controlActions.list":         s.getControlActions,
		"externalToolCalls.list":      s.getExternalCalls,
		"files.list":                  s.getFiles,
		"files.content":               s.getFileContent,
		"files.image":                 s.getFileImage,
		"mcp.tools":                   s.getMCPTools,
		"mcp.start":                   s.mcpControl("start"),
		"mcp.stop":                    s.mcpControl("stop"),
		"mcp.restart":                 s.mcpControl("restart"),
		"mcp.servers":                 s.getMCPServers,
		"mcp.register":                s.postMCPDefinition(false),
		"mcp.replace":                 s.postMCPDefinition(true),
		"mcp.unregister":              s.postMCPUnregister,
		"mcp.refresh":                 s.postMCPRefresh,
		"chat.get":                    s.getChat,
		"chat.post":                   s.postChat,
		"analyst.operations":          s.getOperations,
		"analyst.operate":             s.postOperation,
		"cards.notify":                s.postNotification,
		"auth.wsTicket":               s.postTicket,
		"debug.doctor":                s.getDoctor,
		"debug.errors":                s.getErrors,
		"debug.graphs":                s.getGraphs,
	}
	api := http.NewServeMux()
	for _, op := range Operations {
		if op.Public {
			continue
		}
		h, ok := handlers[op.Name]
		if !ok {
			panic("operator: no handler for operation " + op.Name) // a build defect, caught by every test
		}
		api.HandleFunc(op.pattern(), s.contract(op, h))
	}
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	})

	root := http.NewServeMux()
	root.HandleFunc("GET /health", s.getHealth)
	root.HandleFunc("GET /health/ready", s.getReady)
	root.HandleFunc("GET /api/live", s.live)
	root.Handle("/api/", s.auth(api))
	root.Handle("/", newCockpit())
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

// internalMessage is the fixed, safe body of every 500: details go to the
// server log only.
const internalMessage = "the request failed; the server log has the details"

func (s *Server) fail(w http.ResponseWriter, r *http.Request, op string, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, ae.code, s.redact(ae.msg))
		return
	}
	// The path is logged without its query (tickets never reach a log).
	s.log.Error("operator request failed", "operation", op, "phase", "handler", "method", r.Method, "path", r.URL.Path, "err", s.redact(err.Error()))
	writeError(w, http.StatusInternalServerError, "Internal", internalMessage)
}

// contract runs a handler under its registry entry: request admission
// (query keys, body) after authentication, then the handler into a
// buffer; a status the operation does not declare becomes the fixed 500.
func (s *Server) contract(op Operation, h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		buf := &buffered{header: http.Header{}}
		err := admitRequest(op, r)
		if err == nil {
			err = h(buf, r)
		}
		if err != nil {
			buf = &buffered{header: http.Header{}}
			s.fail(buf, r, op.Name, err)
		}
		if buf.status == 0 {
			buf.status = http.StatusOK
		}
		if !slices.Contains(op.Statuses, buf.status) {
			s.log.Error("operator response has an undeclared status", "operation", op.Name, "phase", "contract", "status", buf.status, "path", r.URL.Path)
			writeError(w, http.StatusInternalServerError, "Internal", internalMessage)
			return
		}
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.WriteHeader(buf.status)
		_, _ = w.Write(buf.body.Bytes())
		if buf.after != nil {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			buf.after()
		}
	}
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
