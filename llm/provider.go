package llm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ModelWire is what a provider transport knows about one model: its wire
// protocol and the capabilities that decide whether a request is admitted.
type ModelWire struct {
	Protocol Protocol
	// ReasoningEffort is sent as reasoning.effort on the Responses
	// protocols ("" sends none).
	ReasoningEffort string
	// MaxOutputTokens fills in, and caps, the request's output limit.
	MaxOutputTokens int
	// NoTools refuses requests that carry tools (toolsMode: none).
	NoTools bool
	// NoImages refuses requests that carry images (imageInput: false).
	NoImages bool
	// ExclusiveToolChoice admits requests that force one tool (or any
	// tool); without it they are refused.
	ExclusiveToolChoice bool
}

// ProviderTransportOptions configures a ProviderTransport.
type ProviderTransportOptions struct {
	// Name is the provider (provider:account) in errors and diagnostics.
	Name string
	// BaseURL is the real endpoint, e.g. https://api.openai.com/v1.
	BaseURL string
	// Credentials supply the bearer token (nil: none is sent).
	Credentials Credentials
	// Models returns the wire settings of a model (nil: chat completions).
	Models func(model string) ModelWire
	// Producer is the ProducerID of this account (reasoning replay).
	Producer string
	// CacheKeySeed seeds the Codex prompt_cache_key (Saivage: the project
	// root), with the request's cache owner (WithCacheOwner), or the model
	// when the request has none.
	CacheKeySeed string
	// Base sends the upstream requests (default: the shared pool).
	Base http.RoundTripper
	// Failures, when set, receives every failed request.
	Failures FailureRecorder
	// Now defaults to time.Now.
	Now func() time.Time
}

// ProviderTransport is an http.RoundTripper that takes chat-completions
// requests (as a gateway or Client sends them to any base URL) and sends
// them to one provider account in the model's wire protocol, answering in
// chat-completions form: JSON, or SSE when the request streams. It adds the
// credentials (refreshing them once after a 401), admits requests by the
// model's capabilities and reports failures to a FailureRecorder. Tokens
// only ever travel in the Authorization header.
type ProviderTransport struct {
	o    ProviderTransportOptions
	base string
}

// NewProviderTransport returns a transport for opts.
func NewProviderTransport(opts ProviderTransportOptions) *ProviderTransport {
	if opts.Base == nil {
		opts.Base = defaultHTTPClient.Transport
	}
	if opts.Models == nil {
		opts.Models = func(string) ModelWire { return ModelWire{Protocol: ProtocolChat} }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &ProviderTransport{o: opts, base: strings.TrimRight(opts.BaseURL, "/")}
}

// IncapableCode is the error code of a request the model's declared
// capabilities refuse; the request is never sent. Its status (409) lets a
// gateway move on to the next candidate.
const IncapableCode = "candidate_incapable"

// RoundTrip serves one chat-completions or embeddings request.
func (t *ProviderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	switch {
	case strings.HasSuffix(req.URL.Path, "/chat/completions"):
	case strings.HasSuffix(req.URL.Path, "/embeddings"):
		return t.send(req, "/embeddings", body, nil, FailedRequest{Endpoint: "/embeddings", Protocol: ProtocolChat})
	default:
		return jsonError(req, http.StatusNotFound, "not_found", fmt.Sprintf("%s serves only chat completions and embeddings", t.o.Name)), nil
	}
	var cr ChatRequest
	if err := json.Unmarshal(body, &cr); err != nil || !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return jsonError(req, http.StatusBadRequest, "invalid_request", "request is not a chat completion object"), nil
	}
	mw := t.o.Models(cr.Model)
	if mw.Protocol == "" {
		mw.Protocol = ProtocolChat
	}
	if why := admit(&cr, mw); why != "" {
		return jsonError(req, http.StatusConflict, IncapableCode, fmt.Sprintf("%s/%s %s", t.o.Name, cr.Model, why)), nil
	}
	if mw.MaxOutputTokens > 0 && (cr.MaxTokens == 0 || cr.MaxTokens > mw.MaxOutputTokens) {
		cr.MaxTokens = mw.MaxOutputTokens
		// Only then is the body rewritten (it parsed as an object above).
		var fields map[string]json.RawMessage
		json.Unmarshal(body, &fields)
		fields["max_tokens"], _ = json.Marshal(cr.MaxTokens)
		body = joinFields(fields)
	}
	fr := FailedRequest{Model: cr.Model, Protocol: mw.Protocol}
	if mw.Protocol == ProtocolChat {
		// A body within the model's limits goes out exactly as received: a
		// request plan's admitted bytes are what the provider gets.
		fr.Endpoint = "/chat/completions"
		return t.send(req, fr.Endpoint, body, nil, fr)
	}
	opts := ResponsesOptions{Protocol: mw.Protocol, ReasoningEffort: mw.ReasoningEffort, Producer: t.o.Producer, Stream: cr.Stream}
	hdr := http.Header{}
	if mw.Protocol == ProtocolCodex {
		opts.PromptCacheKey = cr.PromptCacheKey
		if opts.PromptCacheKey == "" {
			opts.PromptCacheKey = CodexCacheKey(req.Context(), t.o.CacheKeySeed, cr.Model)
		}
		// The header derives from the body's key, never separately.
		hdr.Set("session_id", opts.PromptCacheKey)
		hdr.Set("Accept", "text/event-stream")
		if a, ok := t.o.Credentials.(interface{ AccountID() (string, error) }); ok {
			id, err := a.AccountID()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.o.Name, err)
			}
			if id != "" {
				hdr.Set("chatgpt-account-id", id)
			}
		}
	}
	// The attempt order: credentials, then the protocol's wire body.
	fr.Endpoint = "/responses"
	token, err := t.firstToken(req.Context(), body, fr)
	if err != nil {
		return nil, err
	}
	up, err := ResponsesBody(&cr, opts)
	if err != nil {
		return jsonError(req, http.StatusBadRequest, "invalid_request", err.Error()), nil
	}
	resp, err := t.sendWith(req, fr.Endpoint, up, hdr, fr, token)
	if err != nil || resp.StatusCode/100 != 2 {
		return resp, err
	}
	fr.Body = up
	if cr.Stream {
		return t.translateStream(req, resp, fr)
	}
	return t.translateOnce(req, resp, mw.Protocol == ProtocolCodex, fr), nil
}

type cacheOwnerKey struct{}

// WithCacheOwner returns a context whose Codex requests carry a
// prompt_cache_key derived from owner: the agent (or its summarizer) that
// makes the call, so each owner keeps its own provider-side prompt cache.
func WithCacheOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, cacheOwnerKey{}, owner)
}

// CodexCacheKey is the prompt_cache_key (and session_id header) of a Codex
// request: SHA-256 of seed and the context's cache owner, or of seed and
// model when there is no owner. It is an affinity hint, not a secret.
func CodexCacheKey(ctx context.Context, seed, model string) string {
	if owner, ok := ctx.Value(cacheOwnerKey{}).(string); ok {
		return OwnerCacheKey(seed, owner)
	}
	return cacheKey(seed, "model\x00"+model)
}

// OwnerCacheKey is the Codex prompt_cache_key of an invocation owner under
// seed (the key CodexCacheKey gives a context carrying that owner), for a
// caller that puts the key in the request body itself.
func OwnerCacheKey(seed, owner string) string { return cacheKey(seed, "owner\x00"+owner) }

func cacheKey(seed, owner string) string {
	h := sha256.Sum256([]byte(seed + "\x00" + owner))
	return hex.EncodeToString(h[:16])
}

// Refuses says why the model's declared capabilities refuse a request
// ("" when they admit it): the check a ProviderTransport makes before
// sending, for a caller that admits candidates before building their
// requests.
func (mw ModelWire) Refuses(cr *ChatRequest) string { return admit(cr, mw) }

// admit says why a request cannot go to a model ("" when it can).
func admit(cr *ChatRequest, mw ModelWire) string {
	if mw.NoTools && len(cr.Tools) > 0 {
		return "takes no tools (toolsMode: none)"
	}
	if mw.NoImages {
		for _, m := range cr.Messages {
			if len(m.Images) > 0 {
				return "takes no image input (imageInput: false)"
			}
		}
	}
	if !mw.ExclusiveToolChoice && len(cr.Tools) > 0 {
		if s, ok := cr.ToolChoice.(string); cr.ToolChoice != nil && (!ok || (s != "auto" && s != "none")) {
			return "cannot be forced to call a tool (exclusiveToolChoiceSupport: false)"
		}
	}
	return ""
}

// send posts body to path with the credentials, refreshing them once
// after a 401. A failure answer is reported and returned with its body.
func (t *ProviderTransport) send(orig *http.Request, path string, body []byte, hdr http.Header, fr FailedRequest) (*http.Response, error) {
	token, err := t.firstToken(orig.Context(), body, fr)
	if err != nil {
		return nil, err
	}
	return t.sendWith(orig, path, body, hdr, fr, token)
}

// firstToken fetches the attempt's credentials; a failure is reported
// with body (what the attempt would have sent) and nothing is sent.
func (t *ProviderTransport) firstToken(ctx context.Context, body []byte, fr FailedRequest) (string, error) {
	token, err := t.token(ctx, "")
	if err != nil {
		fr.Body = body
		t.fail(fr, 0, "auth_refresh", "")
	}
	return token, err
}

// sendWith is send with the attempt's credentials already fetched.
func (t *ProviderTransport) sendWith(orig *http.Request, path string, body []byte, hdr http.Header, fr FailedRequest, token string) (*http.Response, error) {
	ctx := orig.Context()
	fr.Body = body
	resp, err := t.post(ctx, orig, path, body, hdr, token)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && t.o.Credentials != nil {
		drain(resp)
		fresh, rerr := t.token(ctx, token)
		if rerr != nil {
			t.fail(fr, http.StatusUnauthorized, "auth", "")
			return jsonError(orig, http.StatusUnauthorized, "invalid_api_key",
				fmt.Sprintf("%s rejected the credentials and %v", t.o.Name, rerr)), nil
		}
		resp, err = t.post(ctx, orig, path, body, hdr, fresh)
	}
	if err != nil {
		t.fail(fr, 0, "network", "")
		return nil, fmt.Errorf("%s %s: %w", t.o.Name, path, err)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		code, typ := errorFields(b)
		t.fail(fr, resp.StatusCode, FailureCause(resp.StatusCode, code, typ), code)
		if code == InvalidEncryptedContentCode {
			b, _ = json.Marshal(ErrorResponse{Error: ErrorBody{Message: t.o.Name + ": " + invalidEncryptedMessage, Type: typ, Code: code}})
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Del("Content-Length")
		resp.Header.Del("Content-Encoding")
	}
	return resp, nil
}

// token returns the token to send: the current one, or (rejected set) a
// refreshed one.
func (t *ProviderTransport) token(ctx context.Context, rejected string) (string, error) {
	if t.o.Credentials == nil {
		return "", nil
	}
	if rejected != "" {
		return t.o.Credentials.Refresh(ctx, rejected)
	}
	return t.o.Credentials.Token(ctx)
}

func (t *ProviderTransport) post(ctx context.Context, orig *http.Request, path string, body []byte, hdr http.Header, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if v := orig.Header.Get("Accept"); v != "" {
		req.Header.Set("Accept", v)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return t.o.Base.RoundTrip(req)
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func (t *ProviderTransport) fail(fr FailedRequest, status int, cause, code string) {
	if t.o.Failures == nil {
		return
	}
	fr.Time, fr.Provider, fr.Status, fr.Cause, fr.Code = t.o.Now(), t.o.Name, status, cause, code
	t.o.Failures.RecordFailure(fr)
}

// InvalidEncryptedContentCode is the provider's error code for encrypted
// reasoning it could not verify. Sending the same history again fails the
// same way, so the failure is terminal: not retried, no other account tried.
const InvalidEncryptedContentCode = "invalid_encrypted_content"

// invalidEncryptedMessage replaces the provider's message (which quotes part
// of the encrypted content) with what the user can do.
const invalidEncryptedMessage = "the provider rejected the encrypted reasoning replayed from earlier turns (" +
	InvalidEncryptedContentCode + "); retrying would send the same history and fail again: " +
	"start a new session, or compact this conversation, to continue"

// explain gives a failure whose remedy is the user's a message saying what
// to do.
func explain(e *APIError) *APIError {
	if e.Code == InvalidEncryptedContentCode {
		e.Message = invalidEncryptedMessage
	}
	return e
}

// errorFields reads the structured code and type of an error body.
func errorFields(b []byte) (code, typ string) {
	var er ErrorResponse
	if json.Unmarshal(b, &er) != nil {
		return "", ""
	}
	code, _ = er.Error.Code.(string)
	return code, er.Error.Type
}

// statusOf is the HTTP status that stands for an in-band failure.
func statusOf(e *APIError) int {
	switch FailureCause(0, e.Code, e.Type) {
	case "rate_limit":
		return http.StatusTooManyRequests
	case "context_length", "content_policy", "request", "invalid_encrypted_content":
		return http.StatusBadRequest
	case "overloaded":
		return 529
	}
	return http.StatusBadGateway
}

// translateOnce answers a non-streamed request from a Responses JSON body,
// or (Codex, which always streams) from the accumulated stream.
func (t *ProviderTransport) translateOnce(orig *http.Request, resp *http.Response, stream bool, fr FailedRequest) *http.Response {
	defer resp.Body.Close()
	var out *ChatResponse
	var err error
	if stream {
		var acc Accumulator
		s := ResponsesStream{Producer: t.o.Producer}
		err = s.Run(resp.Body, func(c StreamChunk) error { acc.Add(c); return nil })
		out = acc.Response()
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		if err == nil {
			out, err = ChatResponseFromResponses(b, t.o.Producer)
		}
	}
	if err != nil {
		return t.failed(orig, err, fr)
	}
	b, _ := json.Marshal(out)
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: orig}
}

// failed turns a failed translation into an error answer and reports it.
func (t *ProviderTransport) failed(orig *http.Request, err error, fr FailedRequest) *http.Response {
	var ae *APIError
	if errors.As(err, &ae) {
		t.fail(fr, statusOf(ae), FailureCause(0, ae.Code, ae.Type), ae.Code)
		return jsonError(orig, statusOf(ae), ae.Code, fmt.Sprintf("%s: %s", t.o.Name, ae.Message))
	}
	t.fail(fr, http.StatusBadGateway, "protocol", "")
	return jsonError(orig, http.StatusBadGateway, "protocol_error", fmt.Sprintf("%s: %v", t.o.Name, err))
}

// translateStream answers a streamed request with chat-completions SSE
// translated from the provider's Responses stream. A stream that fails
// before any output becomes an HTTP error answer (so a gateway can fail
// over on it); a failure after output started ends the stream with an
// in-band error event.
func (t *ProviderTransport) translateStream(orig *http.Request, resp *http.Response, fr FailedRequest) (*http.Response, error) {
	pr, pw := io.Pipe()
	started := make(chan error, 1) // nil once output started
	go func() {
		defer resp.Body.Close()
		s := ResponsesStream{Producer: t.o.Producer}
		begun := false
		err := s.Run(resp.Body, func(c StreamChunk) error {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if !begun {
				begun = true
				started <- nil
			}
			_, err = fmt.Fprintf(pw, "data: %s\n\n", b)
			return err
		})
		if !begun {
			if err == nil {
				err = errors.New("responses stream finished without output")
			}
			started <- err
			pw.Close()
			return
		}
		// A reader that went away (its context ended or it closed the body)
		// is not a provider failure.
		if err != nil && orig.Context().Err() == nil && !errors.Is(err, io.ErrClosedPipe) {
			var ae *APIError
			body := ErrorBody{Message: fmt.Sprintf("%s: %v", t.o.Name, err), Code: "protocol_error"}
			if errors.As(err, &ae) {
				body = ErrorBody{Message: fmt.Sprintf("%s: %s", t.o.Name, ae.Message), Code: ae.Code, Type: ae.Type}
				t.fail(fr, 0, FailureCause(0, ae.Code, ae.Type), ae.Code)
			} else {
				t.fail(fr, 0, "protocol", "")
			}
			b, _ := json.Marshal(StreamChunk{Error: &body})
			fmt.Fprintf(pw, "data: %s\n\n", b)
		}
		if err == nil {
			io.WriteString(pw, "data: [DONE]\n\n")
		}
		pw.CloseWithError(err)
	}()
	if err := <-started; err != nil {
		if ctxErr := orig.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return t.failed(orig, err, fr), nil
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, ContentLength: -1, Request: orig}, nil
}

func jsonError(orig *http.Request, status int, code, msg string) *http.Response {
	b, _ := json.Marshal(ErrorResponse{Error: ErrorBody{Message: msg, Type: "provider_error", Code: code}})
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: orig}
}

// joinFields re-encodes a request's top-level fields.
func joinFields(f map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(f)
	return b
}

// FailureCause classifies a failed provider request from its HTTP status
// (0 for an in-band failure) and the structured error code and type of its
// answer, never from message text.
func FailureCause(status int, code, typ string) string {
	switch {
	case code == "context_length_exceeded":
		return "context_length"
	case code == "content_policy_violation" || code == "content_filter":
		return "content_policy"
	case code == InvalidEncryptedContentCode:
		return "invalid_encrypted_content"
	case status == 529 || typ == "overloaded_error" || code == "server_is_overloaded":
		return "overloaded"
	case status == http.StatusTooManyRequests || code == "rate_limit_exceeded" || code == "insufficient_quota":
		return "rate_limit"
	case status == http.StatusUnauthorized || status == http.StatusForbidden || code == "invalid_api_key":
		return "auth"
	case status >= 500 || code == "server_error":
		return "server"
	case status >= 400:
		return "request"
	}
	return "provider"
}
