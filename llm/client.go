package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	// DefaultStreamInactivity.
	StreamInactivity time.Duration
}

// DefaultStreamInactivity is the stream inactivity limit: the clock starts
// before the request is sent, response headers do not renew it, and only
// SSE data events (not comments or partial frames) do.
const DefaultStreamInactivity = 120 * time.Second

// ErrStreamStalled reports a streamed call that received no data event
// within its inactivity limit. It is not an *APIError, so retry policies
// treat it as transient.
var ErrStreamStalled = errors.New("model stream stalled")

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
}

// NewClient returns a client for opts.BaseURL.
func NewClient(opts ClientOptions) *Client {
	c := &Client{base: strings.TrimRight(opts.BaseURL, "/"), key: opts.APIKey, client: opts.HTTPClient, inactivity: opts.StreamInactivity}
	if c.client == nil {
		c.client = defaultHTTPClient
	}
	if c.inactivity <= 0 {
		c.inactivity = DefaultStreamInactivity
	}
	return c
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

// Chat sends a non-streamed completion request.
func (c *Client) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	r := *req
	r.Stream, r.StreamOptions = false, nil
	resp, err := c.post(ctx, "/chat/completions", &r, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out ChatResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResponseBytes)).Decode(&out); err != nil {
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
// limit ends it with ErrStreamStalled (and the partial response).
func (c *Client) ChatStream(ctx context.Context, req *ChatRequest, onChunk func(StreamChunk) error) (*ChatResponse, error) {
	r := *req
	r.Stream, r.StreamOptions = true, &StreamOptions{IncludeUsage: true}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("%w: no data from the model for %s", ErrStreamStalled, c.inactivity)
	// The clock starts before the request is sent; headers do not renew it.
	timer := time.AfterFunc(c.inactivity, func() { cancel(stalled) })
	defer timer.Stop()
	resp, err := c.post(sctx, "/chat/completions", &r, true)
	if err != nil {
		if context.Cause(sctx) == stalled {
			return nil, stalled
		}
		return nil, err
	}
	defer resp.Body.Close()
	var acc Accumulator
	var dec chunkDecoder
	err = ReadSSE(resp.Body, func(data []byte) error {
		// Only a data event is progress; the time the caller spends in
		// onChunk is not the model's.
		if !timer.Stop() {
			return stalled
		}
		defer timer.Reset(c.inactivity)
		var chunk StreamChunk
		if err := dec.decode(data, &chunk); err != nil {
			return fmt.Errorf("decode stream chunk: %w", err)
		}
		if chunk.Error != nil {
			code, _ := chunk.Error.Code.(string)
			return &APIError{Message: chunk.Error.Message, Type: chunk.Error.Type, Code: code}
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
		if context.Cause(sctx) == stalled {
			return acc.Response(), stalled
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
