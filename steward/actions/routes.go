package actions

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Mount registers the web app's routes on handle (the host's authenticated
// mux): GET /actions (?showDone=1, ?hideExpired=1, ?limit=N; filtered in
// SQLite before the limit, with countsTotal, filter-aware countsVisible and
// the legacy counts alias), GET /actions/{id} (the full item; ?select=1 marks
// it read, as selecting it in the app does), POST /actions/{id}/status
// ({"status": "done"|"dismissed"|"read"|"new"}), and GET/POST /settings/actions.
func Mount(handle func(pattern string, h http.Handler), open func(ctx context.Context) (*Store, error)) {
	withStore := func(fn func(w http.ResponseWriter, r *http.Request, s *Store)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := open(r.Context())
			if err != nil {
				writeJSONError(w, http.StatusServiceUnavailable, errors.New("the Action Center store is unavailable"))
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			fn(w, r, s)
		})
	}
	handle("GET /actions", withStore(func(w http.ResponseWriter, r *http.Request, s *Store) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		res, err := s.List(r.Context(), ListOptions{IncludeHandled: q.Get("showDone") == "1", HideExpired: q.Get("hideExpired") == "1", Limit: limit})
		if err != nil {
			writeJSONError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, res)
	}))
	withItem := func(fn func(w http.ResponseWriter, r *http.Request, s *Store, id int64)) http.Handler {
		return withStore(func(w http.ResponseWriter, r *http.Request, s *Store) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				writeJSONError(w, http.StatusBadRequest, errors.New("id: not a number"))
				return
			}
			fn(w, r, s, id)
		})
	}
	handle("GET /actions/{id}", withItem(func(w http.ResponseWriter, r *http.Request, s *Store, id int64) {
		if r.URL.Query().Get("select") == "1" {
			if err := s.MarkRead(r.Context(), id); err != nil {
				writeStoreError(w, err)
				return
			}
		}
		it, err := s.Get(r.Context(), id)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, it)
	}))
	handle("POST /actions/{id}/status", withItem(func(w http.ResponseWriter, r *http.Request, s *Store, id int64) {
		var body struct {
			Status Status `json:"status"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || !body.Status.Valid() {
			writeJSONError(w, http.StatusBadRequest, errors.New("status: one of new, read, done, dismissed"))
			return
		}
		if err := s.SetStatus(r.Context(), id, body.Status); err != nil {
			writeStoreError(w, err)
			return
		}
		writeJSON(w, map[string]any{"ok": true, "id": id, "status": body.Status, "at": time.Now().UTC()})
	}))
	settings := SettingsHandler(open)
	handle("GET /settings/actions", settings)
	handle("POST /settings/actions", settings)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// writeStoreError answers 404 for an unknown item and 500 otherwise.
func writeStoreError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, ErrNotFound) {
		code = http.StatusNotFound
	}
	writeJSONError(w, code, err)
}
