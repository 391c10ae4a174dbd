package voice

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Mount registers /voice/call, /quick-call and /voice/status through handle,
// which must require the host token (host.Host.Handle does).
func Mount(handle func(pattern string, h http.Handler), c *Coordinator) {
	handle("POST /voice/call", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveCall(w, r, true) }))
	handle("POST /quick-call", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveCall(w, r, false) }))
	handle("GET /voice/status", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) }))
}

// MountUnavailable registers the same routes answering 503 with reason, so
// a phone shortcut learns what to configure.
func MountUnavailable(handle func(pattern string, h http.Handler), reason string) {
	off := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusServiceUnavailable, reason) })
	handle("POST /voice/call", off)
	handle("POST /quick-call", off)
	handle("GET /voice/status", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Status{Phase: PhaseIdle, Error: reason})
	}))
}

// serveCall reads the body strictly: /quick-call takes {} or {"requestId"},
// /voice/call also an openingLine; anything else is refused.
func (c *Coordinator) serveCall(w http.ResponseWriter, r *http.Request, custom bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "the request body is over 4 KiB")
		return
	}
	var req CallRequest
	if s := strings.TrimSpace(string(b)); s != "" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
			writeError(w, http.StatusBadRequest, `send a JSON object: {} or {"requestId": "…"}`)
			return
		}
		for k := range fields {
			if k != "requestId" && !(custom && k == "openingLine") {
				allowed := `"requestId"`
				if custom {
					allowed += ` and "openingLine"`
				}
				writeError(w, http.StatusBadRequest, "unknown field "+k+": this route takes only "+allowed)
				return
			}
		}
		if err := json.Unmarshal(b, &req); err != nil {
			writeError(w, http.StatusBadRequest, "requestId and openingLine must be strings")
			return
		}
	}
	started, err := c.Start(r.Context(), req)
	var busy *BusyError
	var in *InputError
	var pre *PreflightError
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, started)
	case errors.As(err, &busy):
		writeJSON(w, http.StatusConflict, map[string]any{"error": busy.Error(), "retryAfterMs": busy.RetryAfter.Milliseconds(), "state": busy.State})
	case errors.As(err, &in):
		writeError(w, http.StatusBadRequest, in.Msg)
	case errors.As(err, &pre):
		writeError(w, http.StatusServiceUnavailable, "the call was not started: "+pre.Msg)
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
