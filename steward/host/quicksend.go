package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Transcriber turns a quick-send recording into text (steward/speech). Its
// errors may carry the HTTP status to answer with (HTTPStatus).
type Transcriber interface {
	TranscribeText(ctx context.Context, audio []byte, contentType string) (string, error)
	MaxBytes() int64
}

// requestIDTTL is how long a quick-send requestId is remembered: a Shortcut
// retried over a flaky phone connection gets the first answer, not a second
// turn.
const requestIDTTL = 10 * time.Minute

// maxRequestID bounds a caller's request id.
const maxRequestID = 128

// quickSendInput is a quick send's text, or its recording to transcribe,
// and its optional request id.
type quickSendInput struct {
	text, requestID  string
	audio            []byte
	audioContentType string
}

// readQuickSend reads POST /quick-send: JSON {"text", "requestId"}, or a
// recording with an audio/* content type (the request id then in the
// X-Request-Id header or ?requestId=). It answers the error itself.
func (h *Host) readQuickSend(w http.ResponseWriter, r *http.Request) (quickSendInput, bool) {
	var in quickSendInput
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if strings.HasPrefix(ct, "audio/") || strings.HasPrefix(ct, "video/webm") || strings.HasPrefix(ct, "video/mp4") {
		in.requestID, in.audioContentType = r.Header.Get("X-Request-Id"), r.Header.Get("Content-Type")
		if in.requestID == "" {
			in.requestID = r.URL.Query().Get("requestId")
		}
		t := h.opts.Transcriber
		if t == nil {
			writeJSONError(w, http.StatusServiceUnavailable, "this host cannot transcribe audio: set STEWARD_WHISPER_BIN and STEWARD_WHISPER_MODEL, or send text")
			return in, false
		}
		audio, err := io.ReadAll(http.MaxBytesReader(w, r.Body, t.MaxBytes()))
		if err != nil {
			writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the recording is over %d bytes", t.MaxBytes()))
			return in, false
		}
		in.audio = audio
	} else {
		var body struct {
			Text      string `json:"text"`
			RequestID string `json:"requestId"`
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "the request is over 1 MiB")
			return in, false
		}
		if err := json.Unmarshal(b, &body); err != nil {
			writeJSONError(w, http.StatusBadRequest, `send JSON: {"text": "…"}, or a recording with an audio/* content type`)
			return in, false
		}
		in.text, in.requestID = strings.TrimSpace(body.Text), body.RequestID
	}
	if len(in.requestID) > maxRequestID {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("requestId is over %d characters", maxRequestID))
		return in, false
	}
	return in, true
}

// transcribe fills in.text from its recording; it answers the error itself.
func (h *Host) transcribe(w http.ResponseWriter, r *http.Request, in *quickSendInput) bool {
	if in.audio == nil {
		return true
	}
	text, err := h.opts.Transcriber.TranscribeText(r.Context(), in.audio, in.audioContentType)
	if err != nil {
		status := http.StatusBadGateway
		var hs interface{ HTTPStatus() int }
		if errors.As(err, &hs) {
			status = hs.HTTPStatus()
		}
		writeJSONError(w, status, "transcription failed: "+err.Error())
		return false
	}
	if in.text = strings.TrimSpace(text); in.text == "" {
		writeJSONError(w, http.StatusUnprocessableEntity, "nothing was heard in the recording")
		return false
	}
	return true
}

// requestCache remembers quick-send answers by request id for ten minutes;
// a duplicate arriving while the first still runs waits for its answer.
type requestCache struct {
	mu      sync.Mutex
	entries map[string]*cachedRequest
	now     func() time.Time
}

type cachedRequest struct {
	done   chan struct{}
	at     time.Time
	status int
	body   []byte
}

// claim returns the entry for id and whether the caller owns it (must run
// the request and call finish).
func (c *requestCache) claim(id string) (*cachedRequest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.entries {
		if e.body != nil && now.Sub(e.at) > requestIDTTL {
			delete(c.entries, k)
		}
	}
	if e, ok := c.entries[id]; ok {
		return e, false
	}
	if c.entries == nil {
		c.entries = map[string]*cachedRequest{}
	}
	e := &cachedRequest{done: make(chan struct{}), at: now}
	c.entries[id] = e
	return e, true
}

// finish records the answer, or forgets the id when the request failed
// before it started a turn (a retry should then run).
func (c *requestCache) finish(id string, e *cachedRequest, status int, body []byte, keep bool) {
	c.mu.Lock()
	if keep {
		e.status, e.body, e.at = status, body, c.now()
	} else {
		delete(c.entries, id)
	}
	c.mu.Unlock()
	close(e.done)
}

// recorder captures a handler's answer for the request cache.
type recorder struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (r *recorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return r.ResponseWriter.Write(b)
}

// idempotent runs a quick send once per request id: a repeat within ten
// minutes gets the first answer (after it is ready) with Idempotent-Replayed.
// Answers of refused requests (4xx before any turn) are not remembered.
func (h *Host) idempotent(w http.ResponseWriter, r *http.Request, id string, run func(w http.ResponseWriter)) {
	if id == "" {
		run(w)
		return
	}
	e, owner := h.requests.claim(id)
	if !owner {
		select {
		case <-e.done:
		case <-r.Context().Done():
			return
		}
		if e.body == nil {
			// The first attempt was refused before it ran; run this one.
			h.idempotent(w, r, id, run)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(e.status)
		w.Write(e.body)
		return
	}
	rec := &recorder{ResponseWriter: w}
	defer func() { h.requests.finish(id, e, rec.status, rec.body, rec.status != 0 && rec.status < 400) }()
	run(rec)
}
