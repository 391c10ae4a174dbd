package wiki

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultAPIAddr is where the wiki's local HTTP API listens.
const DefaultAPIAddr = "127.0.0.1:19828"

// maxBody bounds a request body (a page is at most DefaultMaxPageBytes).
const maxBody = DefaultMaxPageBytes + 64<<10

// APIHandler returns the wiki's HTTP API (documented in docs/wiki.md),
// without authentication: wrap it with RequireBearer, or mount it behind
// the host's own token check.
//
//	GET  /health                 liveness and page count
//	GET  /status                 Status
//	GET  /search?q=&limit=&sources=1
//	GET  /pages?prefix=&type=&offset=&limit=
//	GET  /page?path=&offset=     ReadResult (hash for the conflict check)
//	PUT  /page                   WriteRequest → WriteResult; 409 on a conflict
//	GET  /graph?path=&limit=     GraphResult; /graph/full for every node and edge
//	GET  /lint                   LintReport
//	GET  /queue                  tasks and counts
//	POST /queue                  IngestRequest → IngestResult
//	POST /queue/{id}/cancel, /queue/{id}/retry
//	GET  /events                 server-sent events: "queue" on every queue change
//	POST /rescan                 SyncStats
func APIHandler(s *Service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "pages": len(s.vault.Pages())})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.Status(r.Context()))
	})
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w)(s.Search(r.Context(), SearchRequest{Query: q.Get("q"), Limit: atoi(q.Get("limit")), IncludeSources: q.Get("sources") == "1"}))
	})
	mux.HandleFunc("GET /pages", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w)(s.List(r.Context(), ListRequest{Prefix: q.Get("prefix"), Type: q.Get("type"), Offset: atoi(q.Get("offset")), Limit: atoi(q.Get("limit"))}))
	})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w)(s.Read(r.Context(), ReadRequest{Path: q.Get("path"), Offset: atoi(q.Get("offset"))}))
	})
	mux.HandleFunc("PUT /page", func(w http.ResponseWriter, r *http.Request) {
		var req WriteRequest
		if !decode(w, r, &req) {
			return
		}
		reply(w)(s.WritePage(r.Context(), req))
	})
	mux.HandleFunc("GET /graph", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w)(s.GraphSummary(r.Context(), GraphRequest{Path: q.Get("path"), Limit: atoi(q.Get("limit"))}))
	})
	mux.HandleFunc("GET /graph/full", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.Graph(r.Context()))
	})
	mux.HandleFunc("GET /lint", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Lint(r.Context()))
	})
	mux.HandleFunc("GET /queue", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.queueSnapshot(r))
	})
	mux.HandleFunc("POST /queue", func(w http.ResponseWriter, r *http.Request) {
		var req IngestRequest
		if !decode(w, r, &req) {
			return
		}
		reply(w)(s.IngestPath(r.Context(), req))
	})
	mux.HandleFunc("POST /queue/{id}/{op}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "task id must be a number")
			return
		}
		switch r.PathValue("op") {
		case "cancel":
			err = s.queue.Cancel(r.Context(), id)
		case "retry":
			err = s.queue.Retry(r.Context(), id)
		default:
			writeError(w, http.StatusNotFound, "unknown queue operation; use cancel or retry")
			return
		}
		if err != nil {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
		reply(w)(s.queue.Get(r.Context(), id))
	})
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("POST /rescan", func(w http.ResponseWriter, r *http.Request) {
		reply(w)(s.Rescan(r.Context()))
	})
	return mux
}

type queueSnapshot struct {
	Tasks  []*Task     `json:"tasks"`
	Counts QueueCounts `json:"counts"`
}

func (s *Service) queueSnapshot(r *http.Request) (*queueSnapshot, error) {
	tasks, err := s.queue.List(r.Context(), atoi(r.URL.Query().Get("limit")))
	if err != nil {
		return nil, err
	}
	c, err := s.queue.Counts(r.Context())
	return &queueSnapshot{Tasks: tasks, Counts: c}, err
}

// serveEvents streams the queue as server-sent events whenever it changes
// (and every 5 s), so the web app shows ingest progress live.
func (s *Service) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	last := ""
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		snap, err := s.queueSnapshot(r)
		if err != nil {
			return
		}
		b, _ := json.Marshal(snap)
		if string(b) != last {
			last = string(b)
			fmt.Fprintf(w, "event: queue\ndata: %s\n\n", b)
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// RequireBearer refuses requests without "Authorization: Bearer token"
// with 401. The token is compared in constant time.
func RequireBearer(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="steward-wiki"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <LLM_WIKI_API_TOKEN>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// reply writes v, or err with a status that says what went wrong.
func reply(w http.ResponseWriter) func(any, error) {
	return func(v any, err error) {
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, v)
		case errors.Is(err, ErrConflict):
			writeError(w, http.StatusConflict, err.Error())
		case strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "no page"):
			writeError(w, http.StatusNotFound, err.Error())
		default:
			writeError(w, http.StatusBadRequest, err.Error())
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
