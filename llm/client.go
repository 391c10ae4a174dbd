package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Attribution labels a model call for the usage ledger.
type Attribution struct {
	Service string // e.g. "host", "mail-mirror"
	Action  string // e.g. "chat", "embed"
}

type attributionKey struct{}

// WithAttribution returns a context whose model calls are attributed to a.
func WithAttribution(ctx context.Context, a Attribution) context.Context {
	return context.WithValue(ctx, attributionKey{}, a)
}

// AttributionFrom returns the attribution set by WithAttribution.
func AttributionFrom(ctx context.Context) (Attribution, bool) {
	a, ok := ctx.Value(attributionKey{}).(Attribution)
	return a, ok
}

// Attribution headers understood by the gateway.
const (
	HeaderUsageService = "X-Usage-Service"
	HeaderUsageAction  = "X-Usage-Action"
)

// MaxResponseBytes bounds a non-streamed response body.
const MaxResponseBytes = 64 << 20

// ClientOptions configures a Client.
type ClientOptions struct {
	// BaseURL ends in /v1, e.g. http://127.0.0.1:4000/v1.
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// HTTPClient defaults to a client without a timeout (use contexts) whose
	// pool keeps enough idle connections for many concurrent streams.
	HTTPClient *http.Client
	// StreamInactivity is how long a streamed call may go without a data
	// event before it fails with ErrStreamStalled; 0 means
	// DefaultStreamInactivity, a negative value no limit (for a caller
	// whose transport enforces its own, as the gateway's Router does).
	StreamInactivity time.Duration
	// CallTimeLimit bounds a chat call's whole time with the model, streamed
	// or not, however steadily data arrives; past it the call fails with
	// ErrCallTimeLimit. 0 means DefaultCallTimeLimit, a negative value no
	// limit.
	CallTimeLimit time.Duration
	// GatewayLiveness asks the server — an agentstack gateway — for liveness
	// events on streams (HeaderStreamLiveness): while the gateway fails over
	// from a stalled candidate it sends them, and they renew the inactivity
	// limit (never the absolute one). Only with a positive inactivity limit.
	GatewayLiveness bool
}

// DefaultStreamInactivity is the stream inactivity limit: the clock starts
// before the request is sent, response headers do not renew it, and only
// SSE data events (not comments or partial frames) do.
const DefaultStreamInactivity = 120 * time.Second

// DefaultCallTimeLimit is the absolute limit on one chat call, paired with
// the inactivity limit: a model that keeps streaming (a generation loop, a
// trickle of keep-alive data) is still cut off. Like the inactivity clock it
// starts before the request is sent and does not count the caller's time
// in onChunk.
const DefaultCallTimeLimit = 900 * time.Second

// ErrCallTimeLimit reports a chat call that ran past its absolute time
// limit. Like ErrStreamStalled it is not an *APIError, so retry policies
// treat it as transient.
var ErrCallTimeLimit = errors.New("model call exceeded its time limit")

// ErrStreamStalled reports a streamed call that received no data event
// within its inactivity limit. It is not an *APIError, so retry policies
// treat it as transient.
var ErrStreamStalled = errors.New("model stream stalled")

// In-band error codes of a stream that a gateway ended on one of these
// limits after output had started; the client reports them as
// ErrStreamStalled and ErrCallTimeLimit.
const (
	StreamStalledCode = "stream_stalled"
	CallTimeLimitCode = "call_time_limit"
)

// limitError is a limit reported in band by a gateway: its message, and the
// limit's sentinel error for errors.Is.
type limitError struct {
	limit error
	msg   string
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.limit }

// defaultHTTPClient is shared by clients without their own: one pool per
// process, sized so that concurrent chats reuse connections instead of
// dialling for every request (net/http keeps only 2 idle per host by default).
var defaultHTTPClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return &http.Client{Transport: t}
}()

// Client calls an OpenAI-compatible endpoint.
type Client struct {
	base       string
	key        string
	client     *http.Client
	inactivity time.Duration
	limit      time.Duration
	liveness   bool // GatewayLiveness with an inactivity limit
}

// NewClient returns a client for opts.BaseURL.
func NewClient(opts ClientOptions) *Client {
	c := &Client{base: strings.TrimRight(opts.BaseURL, "/"), key: opts.APIKey, client: opts.HTTPClient, inactivity: opts.StreamInactivity, limit: opts.CallTimeLimit}
	if c.client == nil {
		c.client = defaultHTTPClient
	}
	if c.inactivity == 0 {
		c.inactivity = DefaultStreamInactivity
	}
	if c.limit == 0 {
		c.limit = DefaultCallTimeLimit
	}
	c.liveness = opts.GatewayLiveness && c.inactivity >= time.Millisecond
	return c
}

// callTimers are the limits on one chat call: the absolute limit and, for a
// stream, the inactivity limit. Each cancels the call's context with its own
// error as the cause. Both start before the request is sent; pause and
// resume keep the caller's time out of them.
type callTimers struct {
	stalled, tooLong error
	inactivity       time.Duration
	idle, abs        *time.Timer // nil when the limit does not apply
	left             time.Duration
	since            time.Time
}

func (c *Client) startTimers(ctx context.Context, stream bool) (context.Context, *callTimers, context.CancelCauseFunc) {
	sctx, cancel := context.WithCancelCause(ctx)
	t := &callTimers{
		tooLong: fmt.Errorf("%w: the model was still answering after %s", ErrCallTimeLimit, c.limit),
		left:    c.limit, since: time.Now(),
	}
	if c.limit > 0 {
		t.abs = time.AfterFunc(c.limit, func() { cancel(t.tooLong) })
	}
	if stream && c.inactivity > 0 {
		t.inactivity = c.inactivity
		t.stalled = fmt.Errorf("%w: no data from the model for %s", ErrStreamStalled, c.inactivity)
		if c.liveness {
			t.stalled = fmt.Errorf("%w: neither data nor a liveness event from the gateway at %s for %s", ErrStreamStalled, c.base, c.inactivity)
		}
		t.idle = time.AfterFunc(c.inactivity, func() { cancel(t.stalled) })
	}
	return sctx, t, cancel
}

// pause stops the clocks while the caller handles a chunk; it returns the
// limit's error when one has already run out.
func (t *callTimers) pause() error {
	if t.idle != nil && !t.idle.Stop() {
		return t.stalled
	}
	if t.abs != nil && !t.abs.Stop() {
		return t.tooLong
	}
	t.left -= time.Since(t.since)
	return nil
}

// alive renews the inactivity limit on a gateway's liveness event, which is
// not the model's output: the absolute limit runs on.
func (t *callTimers) alive() error {
	if t.idle == nil {
		return nil
	}
	if !t.idle.Stop() {
		return t.stalled
	}
	t.idle.Reset(t.inactivity)
	return nil
}

// resume restarts the clocks after a chunk: the inactivity limit afresh,
// the absolute limit with what is left of it.
func (t *callTimers) resume() {
	t.since = time.Now()
	if t.abs != nil {
		t.abs.Reset(t.left)
	}
	if t.idle != nil {
		t.idle.Reset(t.inactivity)
	}
}

func (t *callTimers) stop() {
	if t.abs != nil {
		t.abs.Stop()
	}
	if t.idle != nil {
		t.idle.Stop()
	}
}

// cause returns the limit's error when a limit ended the call.
func (t *callTimers) cause(sctx context.Context) error {
	if c := context.Cause(sctx); c != nil && (c == t.stalled || c == t.tooLong) {
		return c
	}
	return nil
}

func (c *Client) post(ctx context.Context, path string, body any, stream bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
		if c.liveness {
			req.Header.Set(HeaderStreamLiveness, strconv.FormatInt(c.inactivity.Milliseconds(), 10))
		}
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if a, ok := AttributionFrom(ctx); ok {
		req.Header.Set(HeaderUsageService, a.Service)
		req.Header.Set(HeaderUsageAction, a.Action)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, ReadAPIError(resp)
	}
	return resp, nil
}

// ReadAPIError decodes an error response into an *APIError.
func ReadAPIError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er ErrorResponse
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(body, &er) == nil && er.Error.Message != "" {
		e.Message, e.Type = er.Error.Message, er.Error.Type
		if s, ok := er.Error.Code.(string); ok {
			e.Code = s
		}
	} else {
		e.Message = strings.TrimSpace(string(body))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

// Chat sends a non-streamed completion request. The client's absolute time
// limit ends it with ErrCallTimeLimit.
func (c *Client) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	r := *req
	r.Stream, r.StreamOptions = false, nil
	sctx, timers, cancel := c.startTimers(ctx, false)
	defer cancel(nil)
	defer timers.stop()
	resp, err := c.post(sctx, "/chat/completions", &r, false)
	if err != nil {
		if lim := timers.cause(sctx); lim != nil {
			return nil, lim
		}
		return nil, err
	}
	defer resp.Body.Close()
	var out ChatResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResponseBytes)).Decode(&out); err != nil {
		if lim := timers.cause(sctx); lim != nil {
			return nil, lim
		}
		return nil, fmt.Errorf("decode completion: %w", err)
	}
	if len(out.Choices) == 0 {
		return nil, errors.New("decode completion: no choices")
	}
	return &out, nil
}

// ChatStream sends a streamed completion request, calls onChunk for every
// chunk as it arrives (onChunk may be nil; an error from it stops the stream)
// and returns the accumulated response. An in-band error event ends the
// stream with an *APIError; no data event within the client's inactivity
// limit ends it with ErrStreamStalled, and a stream still running at the
// absolute limit with ErrCallTimeLimit (both with the partial response).
// With GatewayLiveness a gateway's liveness events renew the inactivity
// limit; they are never chunks.
func (c *Client) ChatStream(ctx context.Context, req *ChatRequest, onChunk func(StreamChunk) error) (*ChatResponse, error) {
	r := *req
	r.Stream, r.StreamOptions = true, &StreamOptions{IncludeUsage: true}
	// The clocks start before the request is sent; headers do not renew them.
	sctx, timers, cancel := c.startTimers(ctx, true)
	defer cancel(nil)
	defer timers.stop()
	resp, err := c.post(sctx, "/chat/completions", &r, true)
	if err != nil {
		if lim := timers.cause(sctx); lim != nil {
			return nil, lim
		}
		return nil, err
	}
	defer resp.Body.Close()
	var acc Accumulator
	var dec chunkDecoder
	err = readStream(resp.Body, c.liveness, timers.alive, func(data []byte) error {
		// Only a data event is progress; the time the caller spends in
		// onChunk is not the model's.
		if err := timers.pause(); err != nil {
			return err
		}
		defer timers.resume()
		var chunk StreamChunk
		if err := dec.decode(data, &chunk); err != nil {
			return fmt.Errorf("decode stream chunk: %w", err)
		}
		if chunk.Error != nil {
			code, _ := chunk.Error.Code.(string)
			switch code {
			case StreamStalledCode:
				return &limitError{ErrStreamStalled, chunk.Error.Message}
			case CallTimeLimitCode:
				return &limitError{ErrCallTimeLimit, chunk.Error.Message}
			}
			e := &APIError{Message: chunk.Error.Message, Type: chunk.Error.Type, Code: code}
			if c.liveness {
				e.Status = inBandStatus(data)
			}
			return e
		}
		acc.Add(chunk)
		if onChunk != nil {
			return onChunk(chunk)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return acc.Response(), ctx.Err()
		}
		if lim := timers.cause(sctx); lim != nil {
			return acc.Response(), lim
		}
		return acc.Response(), err
	}
	return acc.Response(), nil
}

// BaseURL returns the endpoint the client calls, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Embed returns one vector per input, in input order.
func (c *Client) Embed(ctx context.Context, model string, inputs []string) ([][]float32, error) {
	return c.embed(ctx, model, inputs, false)
}

// EmbedPartial is Embed for callers that retry or skip single inputs: an
// input the server returned no vector for gets a nil vector instead of
// failing the whole call. Out-of-range or repeated indexes still fail it.
func (c *Client) EmbedPartial(ctx context.Context, model string, inputs []string) ([][]float32, error) {
	return c.embed(ctx, model, inputs, true)
}

func (c *Client) embed(ctx context.Context, model string, inputs []string, partial bool) ([][]float32, error) {
	resp, err := c.post(ctx, "/embeddings", &EmbeddingsRequest{Model: model, Input: inputs}, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out EmbeddingsResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResponseBytes)).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode embeddings: %w", err)
	}
	if len(out.Data) > len(inputs) || (!partial && len(out.Data) != len(inputs)) {
		return nil, fmt.Errorf("decode embeddings: %d vectors for %d inputs", len(out.Data), len(inputs))
	}
	vecs := make([][]float32, len(inputs))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(vecs) || vecs[d.Index] != nil {
			return nil, fmt.Errorf("decode embeddings: bad or repeated index %d", d.Index)
		}
		vecs[d.Index] = d.Embedding
	}
	return vecs, nil
}

// Embedder embeds texts with one fixed model; it is what search code needs.
type Embedder struct {
	Client *Client
	Model  string
	Attribution
	// Partial makes Embed use EmbedPartial: inputs without a vector in the
	// answer come back nil instead of failing the batch.
	Partial bool
}

// Embed embeds texts with e.Model, attributed to e.Attribution.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.Service != "" {
		ctx = WithAttribution(ctx, e.Attribution)
	}
	return e.Client.embed(ctx, e.Model, texts, e.Partial)
}
