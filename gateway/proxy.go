package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/llm"
)

func (g *Gateway) handleChat(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, "chat", "/chat/completions")
}

func (g *Gateway) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, "embeddings", "/embeddings")
}

// exchange is one client request on its way through the candidates.
type exchange struct {
	g      *Gateway
	w      http.ResponseWriter
	ctx    context.Context
	path   string
	fields map[string]json.RawMessage
	rec    *RequestRecord
	start  time.Time
	seq    int
	fails  []string // one user-safe line per failed attempt
	// unreachable counts the failed attempts that could not connect to
	// their provider at all.
	unreachable int
	// authNext says the next target is another account of the current
	// one's candidate (Candidate.Group), which a 401 moves on to.
	authNext bool
	// plan is the current target's request plan (nil: the client's request
	// is rewritten for each target).
	plan *Plan
}

// retryable reports whether a status from the current target moves the
// request on to the next one.
func (x *exchange) retryable(status int) bool {
	return isRetryable(status) || (x.authNext && status == http.StatusUnauthorized)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, endpoint, path string) {
	start := time.Now()
	rec := &RequestRecord{
		ID: newRequestID(), Time: start, Endpoint: endpoint,
		Service: attributionLabel(r, llm.HeaderUsageService), Action: attributionLabel(r, llm.HeaderUsageAction),
	}
	defer func() {
		rec.Latency = time.Since(start)
		g.record(r.Context(), rec)
	}()
	fail := func(status int, code, msg string) {
		rec.Outcome, rec.Status, rec.Error = OutcomeInvalid, status, msg
		writeError(w, status, "invalid_request_error", code, msg)
	}

	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
		return
	}
	if r.ContentLength > MaxRequestBytes {
		fail(http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body over the %d MiB limit", MaxRequestBytes>>20))
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, MaxRequestBytes), r.ContentLength)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body over the %d MiB limit", MaxRequestBytes>>20))
		} else {
			fail(http.StatusBadRequest, "invalid_body", "could not read the request body")
		}
		return
	}
	fields, err := splitObject(body)
	if err != nil {
		fail(http.StatusBadRequest, "invalid_json", "the request body is not a JSON object")
		return
	}
	var model string
	if err := json.Unmarshal(fields["model"], &model); err != nil || model == "" {
		fail(http.StatusBadRequest, "invalid_model", `"model" must be a non-empty string naming a public model (see GET /v1/models)`)
		return
	}
	rec.PublicModel = model
	if raw, ok := fields["stream"]; ok && endpoint == "chat" {
		if err := json.Unmarshal(raw, &rec.Stream); err != nil {
			fail(http.StatusBadRequest, "invalid_stream", `"stream" must be true or false`)
			return
		}
	}
	chain, ok := g.chains[model]
	if !ok {
		fail(http.StatusNotFound, "model_not_found", fmt.Sprintf("unknown model %q; available: %s", model, strings.Join(g.names, ", ")))
		return
	}

	chain, plans, planned, err := planChain(r.Context(), chain)
	if err != nil {
		fail(http.StatusNotFound, "plan_target_not_found", err.Error())
		return
	}
	w, endLiveness, err := withLiveness(w, r, rec.Stream)
	if err != nil {
		fail(http.StatusBadRequest, "invalid_stream_liveness", err.Error())
		return
	}
	defer endLiveness()
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	x := &exchange{g: g, w: w, ctx: ctx, path: path, fields: fields, rec: rec, start: start}
	for i, t := range chain {
		if ctx.Err() != nil {
			break
		}
		if planned {
			x.plan = plans[i]
			if !t.stream {
				// A plan's bytes ask for a stream; they are not rewritten.
				x.attempt(t, true, 0, OutcomeSkipped, 0, "a request plan streams and this provider is configured not to")
				continue
			}
		}
		x.authNext = t.group != "" && i+1 < len(chain) && chain[i+1].group == t.group
		if t.keyEnv != "" && t.apiKey == "" {
			x.attempt(t, rec.Stream, 0, OutcomeSkipped, 0, t.keyEnv+" is not set")
			continue
		}
		var done bool
		if rec.Stream && t.stream {
			done = x.tryStream(t)
		} else {
			done = x.tryOnce(t, rec.Stream)
		}
		if done {
			return
		}
	}
	x.allFailed(r.Context())
}

// attempt records one try and, if it failed, remembers why for the final error.
func (x *exchange) attempt(t *target, stream bool, status int, outcome Outcome, toHeaders time.Duration, msg string) {
	x.attemptCause(t, stream, status, outcome, toHeaders, msg, "", "", "")
}

// movedOn records a try whose status moves the request on, with the
// structured code and type of its error object (read within 64 KiB), so a
// caller can tell an overload alias (type overloaded_error, code
// server_is_overloaded) from another 5xx without reading prose, and its
// Retry-After header.
func (x *exchange) movedOn(t *target, stream bool, resp *http.Response, toHeaders time.Duration) {
	var code, typ string
	if ae := (*llm.APIError)(nil); errors.As(llm.ReadAPIError(resp), &ae) {
		code, typ = ae.Code, ae.Type
	}
	x.attemptCause(t, stream, resp.StatusCode, OutcomeRetryable, toHeaders, "HTTP "+fmt.Sprint(resp.StatusCode), code, typ, resp.Header.Get("Retry-After"))
}

func (x *exchange) attemptCause(t *target, stream bool, status int, outcome Outcome, toHeaders time.Duration, msg, code, typ, retryAfter string) {
	x.seq++
	x.rec.Attempts = x.seq
	if outcome != OutcomeOK {
		line := t.String() + ": " + msg
		x.fails = append(x.fails, line)
	}
	x.g.recordAttempt(x.ctx, AttemptRecord{
		RequestID: x.rec.ID, Seq: x.seq, Time: time.Now(), Provider: t.provider, UpstreamModel: t.model,
		Stream: stream, Status: status, Outcome: outcome, TimeToHeaders: toHeaders, Error: msg, Code: code, Type: typ,
		RetryAfter: retryAfter,
	})
}

// sendFailed records an attempt whose request got no response, counting
// it as unreachable when the connection itself failed (llm.IsUnreachable,
// the test the gateway's callers apply to its answer).
func (x *exchange) sendFailed(t *target, stream bool, a *attemptTimers, toHeaders time.Duration, err error) {
	if llm.IsUnreachable(err) {
		x.unreachable++
	}
	x.attempt(t, stream, 0, OutcomeRetryable, toHeaders, a.failure("", err))
}

func (x *exchange) allFailed(clientCtx context.Context) {
	rec := x.rec
	switch {
	case clientCtx.Err() != nil:
		rec.Outcome, rec.Status, rec.Error = OutcomeCancelled, 499, "client closed the request"
		return
	case x.ctx.Err() != nil:
		rec.Outcome, rec.Status = OutcomeTimeout, http.StatusGatewayTimeout
		rec.Error = fmt.Sprintf("no answer within the request deadline of %s", x.g.timeout)
	default:
		rec.Outcome, rec.Status = OutcomeFailed, http.StatusBadGateway
		rec.Error = "every provider for " + rec.PublicModel + " failed"
	}
	if len(x.fails) > 0 {
		rec.Error += ": " + strings.Join(x.fails, "; ")
	}
	code := "upstream_failed"
	switch {
	case rec.Outcome == OutcomeTimeout:
		code = "timeout"
	case x.unreachable > 0 && x.unreachable == len(x.fails):
		code = llm.UnreachableCode // nothing listens where the model is served
	}
	writeError(x.w, rec.Status, "upstream_error", code, x.g.scrubString(rec.Error))
}

// upstreamBody is the client's request for t: the public model replaced by
// the upstream one, and usage requested on streams.
func (x *exchange) upstreamBody(t *target, stream bool) []byte {
	f := make(map[string]json.RawMessage, len(x.fields)+1)
	for k, v := range x.fields {
		f[k] = v
	}
	f["model"], _ = json.Marshal(t.model)
	if x.rec.Endpoint == "chat" {
		if stream {
			f["stream"] = json.RawMessage("true")
			opts := map[string]json.RawMessage{}
			json.Unmarshal(f["stream_options"], &opts)
			opts["include_usage"] = json.RawMessage("true")
			f["stream_options"], _ = json.Marshal(opts)
		} else {
			delete(f, "stream")
			delete(f, "stream_options")
		}
	}
	return joinObject(f)
}

// attemptTimers are the limits on one candidate's attempt: the absolute
// limit and, for a stream, the inactivity limit. Each cancels the attempt's
// context with its own error as the cause, which moves a request that has
// not produced output on to the next candidate.
type attemptTimers struct {
	ctx              context.Context
	cancel           context.CancelCauseFunc
	idle, abs        *time.Timer // nil when the limit does not apply
	inactivity       time.Duration
	stalled, tooLong error
}

// startAttempt starts an attempt's clocks; they run from before the
// request is sent.
func (x *exchange) startAttempt(stream bool) *attemptTimers {
	ctx, cancel := context.WithCancelCause(x.ctx)
	a := &attemptTimers{ctx: ctx, cancel: cancel, inactivity: x.g.inactivity,
		stalled: fmt.Errorf("%w: no data from the model for %s", llm.ErrStreamStalled, x.g.inactivity),
		tooLong: fmt.Errorf("%w: the model was still answering after %s", llm.ErrCallTimeLimit, x.g.attemptLimit)}
	// A request deadline no later than the attempt limit ends the attempt
	// first: it is the call's limit, and no other candidate has time left.
	if dl, ok := x.ctx.Deadline(); !ok || time.Until(dl) > x.g.attemptLimit {
		a.abs = time.AfterFunc(x.g.attemptLimit, func() { cancel(a.tooLong) })
	}
	if stream {
		a.idle = time.AfterFunc(a.inactivity, func() { cancel(a.stalled) })
	}
	return a
}

// progress restarts the inactivity clock after a data event.
func (a *attemptTimers) progress() {
	if a.idle != nil {
		a.idle.Reset(a.inactivity)
	}
}

func (a *attemptTimers) stop() {
	if a.abs != nil {
		a.abs.Stop()
	}
	if a.idle != nil {
		a.idle.Stop()
	}
	a.cancel(nil)
}

// expired returns the limit that ended the attempt (nil if none did).
func (a *attemptTimers) expired() error {
	if c := context.Cause(a.ctx); c == a.stalled || c == a.tooLong {
		return c
	}
	return nil
}

// failure is the user-safe line of a failed attempt: the limit that ended
// it, or what went wrong.
func (a *attemptTimers) failure(what string, err error) string {
	if lim := a.expired(); lim != nil {
		return lim.Error()
	}
	return what + err.Error()
}

// send posts to t within the attempt's context and returns the response
// once its headers arrived.
func (x *exchange) send(ctx context.Context, t *target, stream bool) (*http.Response, time.Duration, error) {
	body, err := x.planBody(t, stream)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.baseURL+x.path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	if t.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.apiKey)
	}
	began := time.Now()
	resp, err := x.g.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL adds nothing for the user and could carry secrets
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("request deadline exceeded")
		}
		return nil, time.Since(began), err
	}
	return resp, time.Since(began), nil
}

// tryOnce asks t without streaming. When the client asked for a stream (a
// provider that cannot stream), a successful answer is re-emitted as SSE.
// It reports whether the exchange is finished.
func (x *exchange) tryOnce(t *target, clientStream bool) bool {
	a := x.startAttempt(false)
	defer a.stop()
	resp, toHeaders, err := x.send(a.ctx, t, false)
	if ie := (*IntegrityError)(nil); errors.As(err, &ie) {
		x.integrityFailed(ie)
		return true
	}
	if err != nil {
		x.sendFailed(t, false, a, toHeaders, err)
		return false
	}
	defer resp.Body.Close()
	if x.retryable(resp.StatusCode) {
		x.movedOn(t, false, resp, toHeaders)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, llm.MaxResponseBytes))
	if err != nil {
		x.attempt(t, false, resp.StatusCode, OutcomeRetryable, toHeaders, a.failure("response body: ", err))
		return false
	}
	return x.finish(t, resp, toHeaders, body, clientStream)
}

// finish answers the client with a complete upstream body.
func (x *exchange) finish(t *target, resp *http.Response, toHeaders time.Duration, body []byte, clientStream bool) bool {
	rec := x.rec
	rec.Provider, rec.UpstreamModel, rec.Status = t.provider, t.model, resp.StatusCode
	if resp.StatusCode/100 != 2 {
		x.attempt(t, false, resp.StatusCode, OutcomeRejected, toHeaders, "HTTP "+fmt.Sprint(resp.StatusCode))
		rec.Outcome, rec.Error = OutcomeRejected, providerMessage(body)
		x.markFirstByte()
		x.w.Header().Set("Content-Type", "application/json")
		x.w.WriteHeader(resp.StatusCode)
		x.w.Write(x.g.scrub(body))
		return true
	}
	var parsed struct {
		Usage *llm.Usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		x.attempt(t, false, resp.StatusCode, OutcomeRetryable, toHeaders, "answer is not JSON")
		return false
	}
	x.attempt(t, false, resp.StatusCode, OutcomeOK, toHeaders, "")
	rec.Outcome, rec.Tokens = OutcomeOK, parsed.Usage.Tokens()
	x.markFirstByte()
	if clientStream {
		if err := writeSynthesizedStream(x.w, body); err != nil && x.ctx.Err() != nil {
			rec.Outcome = OutcomeCancelled
		}
		return true
	}
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	x.w.WriteHeader(resp.StatusCode)
	x.w.Write(body)
	return true
}

func (x *exchange) markFirstByte() {
	if x.rec.TTFB == 0 {
		x.rec.TTFB = time.Since(x.start)
	}
}

// providerMessage extracts the message of an OpenAI error object, bounded.
func providerMessage(body []byte) string {
	var er llm.ErrorResponse
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &er) == nil && er.Error.Message != "" {
		msg = er.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// refusesStreaming reports a provider's structured refusal of the stream
// parameter itself (a 400 or 422 whose error names "stream" or
// "stream_options" as its param, as OpenAI-compatible APIs do for a model
// that cannot stream), never a guess from the message's words.
func refusesStreaming(status int, body []byte) bool {
	if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		return false
	}
	var er llm.ErrorResponse
	if json.Unmarshal(body, &er) != nil {
		return false
	}
	p, _ := er.Error.Param.(string)
	return p == "stream" || p == "stream_options"
}

// tryStream asks t for a native stream. Until the first event has been
// forwarded nothing is committed and a failure moves on to the next
// candidate; afterwards a failure ends the client's stream with an error
// event and [DONE], never switching providers mid-output.
func (x *exchange) tryStream(t *target) bool {
	a := x.startAttempt(true)
	defer a.stop()
	resp, toHeaders, err := x.send(a.ctx, t, true)
	if ie := (*IntegrityError)(nil); errors.As(err, &ie) {
		x.integrityFailed(ie)
		return true
	}
	if err != nil {
		x.sendFailed(t, true, a, toHeaders, err)
		return false
	}
	defer resp.Body.Close()
	if x.retryable(resp.StatusCode) {
		x.movedOn(t, true, resp, toHeaders)
		return false
	}
	if resp.StatusCode/100 != 2 || !isEventStream(resp.Header.Get("Content-Type")) {
		body, err := io.ReadAll(io.LimitReader(resp.Body, llm.MaxResponseBytes))
		if err != nil {
			x.attempt(t, true, resp.StatusCode, OutcomeRetryable, toHeaders, a.failure("response body: ", err))
			return false
		}
		// A plan's bytes are fixed: its candidate cannot be asked again
		// without streaming.
		if x.plan == nil && refusesStreaming(resp.StatusCode, body) {
			// The provider refuses streaming: ask again without it and re-emit.
			x.attempt(t, true, resp.StatusCode, OutcomeRetryable, toHeaders, "streaming refused; retrying without streaming")
			return x.tryOnce(t, true)
		}
		// A plain JSON answer to a stream request is re-emitted as SSE.
		return x.finish(t, resp, toHeaders, body, true)
	}

	events := eventReaders.Get().(*bufio.Reader)
	events.Reset(resp.Body)
	defer func() {
		events.Reset(nil)
		eventReaders.Put(events)
	}()
	first, data, err := readEvent(events, nil, nil)
	if err != nil {
		x.attempt(t, true, resp.StatusCode, OutcomeRetryable, toHeaders, a.failure("stream ended before any output: ", err))
		return false
	}
	x.attempt(t, true, resp.StatusCode, OutcomeOK, toHeaders, "")
	rec := x.rec
	rec.Provider, rec.UpstreamModel, rec.Status, rec.Outcome = t.provider, t.model, resp.StatusCode, OutcomeOK

	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	x.w.WriteHeader(http.StatusOK)
	flusher, _ := x.w.(http.Flusher)
	var calls toolCallNormalizer
	for {
		x.noteUsage(data)
		if fixed, ok := calls.normalize(data); ok {
			first = append(append([]byte("data: "), fixed...), '\n', '\n')
		}
		x.markFirstByte()
		if _, err := x.w.Write(first); err != nil {
			rec.Outcome, rec.Error = OutcomeCancelled, "client went away during the stream"
			return true
		}
		if flusher != nil {
			flusher.Flush()
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return true
		}
		a.progress()                                              // the client's time to take the event is not the model's
		first, data, err = readEvent(events, first[:0], data[:0]) // both were written out
		if err != nil {
			break
		}
	}
	// The upstream stream broke after output started.
	reason, code := "the provider's stream ended before [DONE]", "stream_interrupted"
	rec.Outcome = OutcomeStreamError
	switch lim := a.expired(); {
	case lim != nil:
		rec.Outcome, reason, code = OutcomeTimeout, lim.Error(), llm.StreamStalledCode
		if lim == a.tooLong {
			code = llm.CallTimeLimitCode
		}
	case x.ctx.Err() == context.DeadlineExceeded:
		rec.Outcome, code, reason = OutcomeTimeout, llm.CallTimeLimitCode, fmt.Sprintf("request deadline of %s exceeded during the stream", x.g.timeout)
	case x.ctx.Err() != nil:
		rec.Outcome, rec.Error = OutcomeCancelled, "client went away during the stream"
		return true
	case err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF):
		reason = "the provider's stream failed: " + err.Error()
	}
	rec.Error = reason
	b, _ := json.Marshal(llm.StreamChunk{Object: "chat.completion.chunk", Choices: []llm.StreamChoice{},
		Error: &llm.ErrorBody{Message: x.g.scrubString(reason), Type: "upstream_error", Code: code}})
	fmt.Fprintf(x.w, "data: %s\n\ndata: [DONE]\n\n", b)
	if flusher != nil {
		flusher.Flush()
	}
	return true
}

// noteUsage records the usage carried by a stream event, if any.
func (x *exchange) noteUsage(data []byte) {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	var c struct {
		Usage *llm.Usage `json:"usage"`
	}
	if json.Unmarshal(data, &c) == nil && c.Usage != nil {
		x.rec.Tokens = c.Usage.Tokens()
	}
}

func isEventStream(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// eventReaders recycles the 32 KiB buffers that read upstream streams:
// readEvent copies what it returns, so nothing refers to a buffer after its
// stream.
var eventReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// readBody reads a request body of n bytes (n < 0: unknown) in one
// allocation when n is known; a chat's history makes bodies of tens of
// kilobytes, which io.ReadAll would grow and copy several times.
func readBody(r io.Reader, n int64) ([]byte, error) {
	if n < 0 || n > MaxRequestBytes {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, n+1) // +1: the read that returns io.EOF needs room
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// readEvent reads one server-sent event: its raw bytes (ending in a blank
// line) and its data payload, appended to raw and data (empty slices whose
// memory may be reused). io.EOF means a clean end with no partial event.
func readEvent(r *bufio.Reader, raw, data []byte) ([]byte, []byte, error) {
	var hasData bool
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// An over-long line: collect it whole, copying its head out of
			// the reader's buffer before the next read overwrites it.
			head := append([]byte(nil), line...)
			rest, err2 := r.ReadBytes('\n')
			line, err = append(head, rest...), err2
		}
		if err != nil {
			if err == io.EOF && len(raw) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 {
			if len(raw) == 0 {
				continue // stray blank line between events
			}
			raw = append(raw, '\n')
			if !hasData {
				raw, data = raw[:0], data[:0] // comment-only event: forward nothing
				continue
			}
			return raw, bytes.TrimSpace(data), nil
		}
		raw = append(raw, trimmed...)
		raw = append(raw, '\n')
		if v, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			hasData = true
		}
	}
}

// writeSynthesizedStream re-emits a complete chat completion as SSE chunks.
func writeSynthesizedStream(w http.ResponseWriter, body []byte) error {
	var resp llm.ChatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	base := llm.StreamChunk{ID: resp.ID, Object: "chat.completion.chunk", Created: resp.Created, Model: resp.Model}
	var out bytes.Buffer
	emit := func(c llm.StreamChunk) {
		b, _ := json.Marshal(c)
		fmt.Fprintf(&out, "data: %s\n\n", b)
	}
	for _, ch := range resp.Choices {
		m := ch.Message
		calls := make([]llm.ToolCall, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			idx := i
			tc.Index = &idx
			if tc.Type == "" {
				tc.Type = "function"
			}
			calls[i] = tc
		}
		c := base
		finish := ch.FinishReason
		c.Choices = []llm.StreamChoice{{Index: ch.Index, Delta: llm.Delta{Role: "assistant", Content: m.Content, ReasoningContent: m.ReasoningContent, ToolCalls: calls}}}
		emit(c)
		c.Choices = []llm.StreamChoice{{Index: ch.Index, FinishReason: &finish}}
		emit(c)
	}
	if resp.Usage != nil {
		c := base
		c.Choices = []llm.StreamChoice{}
		c.Usage = resp.Usage
		emit(c)
	}
	out.WriteString("data: [DONE]\n\n")
	_, err := w.Write(out.Bytes())
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}
