package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// Stream liveness (docs/protocol.md, "Model gateway: stream liveness"): a
// client whose own inactivity limit would end the call before a stalled
// candidate's attempt does — so before the failover — declares that limit
// in llm.HeaderStreamLiveness. While no candidate has answered, the gateway
// then sends an explicit liveness event whenever it has been silent for
// llm.LivenessInterval of it. The first one commits the response (200,
// text/event-stream), so an answer that comes later as an HTTP error is
// sent in band instead, with its status as "http_status".

// withLiveness wraps w for a streamed chat whose client asked for liveness
// events; end must be called when the exchange is over. Other requests get
// w back unchanged. A malformed header is an error for the client.
func withLiveness(w http.ResponseWriter, r *http.Request, stream bool) (http.ResponseWriter, func(), error) {
	v := r.Header.Get(llm.HeaderStreamLiveness)
	if !stream || v == "" {
		return w, func() {}, nil
	}
	limit, err := llm.ParseStreamLiveness(v)
	if err != nil {
		return w, func() {}, err
	}
	lw := &livenessWriter{w: w, header: http.Header{}, interval: llm.LivenessInterval(limit)}
	lw.mu.Lock() // beat reads timer
	lw.timer = time.AfterFunc(lw.interval, lw.beat)
	lw.mu.Unlock()
	return lw, lw.end, nil
}

// maxInBandError bounds the error body kept to send in band.
const maxInBandError = 64 << 10

// livenessWriter sends liveness events until the exchange writes its
// answer. The exchange's headers live in header until it writes, so the
// timer never races with it over the real ResponseWriter's map.
type livenessWriter struct {
	w        http.ResponseWriter
	header   http.Header
	interval time.Duration
	timer    *time.Timer

	mu        sync.Mutex
	committed bool // liveness events went out: the status is 200, the body SSE
	answered  bool // the exchange wrote its status
	ended     bool // the handler is returning: nothing may write any more
	broken    bool // a write to the client failed
	errStatus int  // after commit, the exchange's non-2xx status…
	errBody   bytes.Buffer
}

func (lw *livenessWriter) Header() http.Header { return lw.header }

// beat sends one liveness event, committing the response first if needed.
func (lw *livenessWriter) beat() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.answered || lw.ended || lw.broken {
		return
	}
	if !lw.committed {
		h := lw.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		lw.w.WriteHeader(http.StatusOK)
		lw.committed = true
	}
	if _, err := io.WriteString(lw.w, "event: "+llm.LivenessEvent+"\ndata: "+llm.LivenessData+"\n\n"); err != nil {
		lw.broken = true
		return
	}
	lw.flushLocked()
	lw.timer.Reset(lw.interval)
}

func (lw *livenessWriter) WriteHeader(status int) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.writeHeaderLocked(status)
}

func (lw *livenessWriter) writeHeaderLocked(status int) {
	if lw.answered {
		return
	}
	lw.answered = true
	lw.timer.Stop()
	if !lw.committed {
		h := lw.w.Header()
		for k, v := range lw.header {
			h[k] = v
		}
		lw.w.WriteHeader(status)
		return
	}
	if status/100 != 2 {
		lw.errStatus = status
	}
}

func (lw *livenessWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.writeHeaderLocked(http.StatusOK)
	if lw.errStatus != 0 {
		if room := maxInBandError - lw.errBody.Len(); room > 0 {
			lw.errBody.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	return lw.w.Write(p)
}

// Flush hands what was written to the client.
func (lw *livenessWriter) Flush() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.errStatus == 0 {
		lw.flushLocked()
	}
}

func (lw *livenessWriter) flushLocked() {
	if f, ok := lw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// end stops the liveness events and, when the response was committed
// before an HTTP error, sends that error in band.
func (lw *livenessWriter) end() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.timer.Stop()
	lw.ended = true
	if !lw.committed || lw.errStatus == 0 || lw.broken {
		return
	}
	body := lw.errBody.Bytes()
	var er llm.ErrorResponse
	json.Unmarshal(body, &er)
	if er.Error.Message == "" {
		er.Error.Message = providerMessage(body)
	}
	if er.Error.Type == "" {
		er.Error.Type = "upstream_error"
	}
	b, _ := json.Marshal(inBandError{Object: "chat.completion.chunk", Choices: []struct{}{}, Error: inBandErrorBody{
		Message: er.Error.Message, Type: er.Error.Type, Code: er.Error.Code, HTTPStatus: lw.errStatus}})
	fmt.Fprintf(lw.w, "data: %s\n\ndata: [DONE]\n\n", b)
	lw.flushLocked()
}

// inBandError is an HTTP error answer sent as a stream's error event.
type inBandError struct {
	Object  string          `json:"object"`
	Choices []struct{}      `json:"choices"`
	Error   inBandErrorBody `json:"error"`
}

type inBandErrorBody struct {
	Message    string `json:"message"`
	Type       string `json:"type,omitempty"`
	Code       any    `json:"code,omitempty"`
	HTTPStatus int    `json:"http_status"`
}
