// Package llm speaks the OpenAI-compatible chat-completions and embeddings
// protocol that every model provider, the gateway and both products share:
// wire types, a client for plain and streamed (SSE) completions with tool
// calls and usage, and a stream accumulator tolerant of real servers' quirks.
// ProviderTransport reaches providers that speak the OpenAI Responses API or
// the Codex backend's dialect of it, with auth profiles and capability
// admission, behind the same chat-completions interface.
package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Message is one conversation entry.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// ReasoningContent carries a thinking model's reasoning (DeepSeek's
	// reasoning_content); it is kept so a tool-calling turn can be replayed.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ReasoningItems are a Responses-protocol model's encrypted reasoning,
	// replayed only to the account that produced them.
	ReasoningItems []ReasoningItem `json:"reasoning_items,omitempty"`
	Name           string          `json:"name,omitempty"`
	ToolCalls      []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID     string          `json:"tool_call_id,omitempty"`
	// Images are image parts sent after Content (a tool result's images,
	// for example). A message with images is serialised with an array
	// content of one text part followed by image_url data-URL parts.
	Images []Image `json:"-"`
}

// Image is one image part of a message.
type Image struct {
	// MIME is the media type (image/png).
	MIME string
	Data []byte
}

// DataURL renders the image as a base64 data URL.
func (i Image) DataURL() string {
	return "data:" + i.MIME + ";base64," + base64.StdEncoding.EncodeToString(i.Data)
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

// messageFields is Message without its methods (plain encoding).
type messageFields Message

// MarshalJSON writes a message with images as array content; any other
// message keeps the plain string content.
func (m Message) MarshalJSON() ([]byte, error) {
	if len(m.Images) == 0 {
		return json.Marshal(messageFields(m))
	}
	parts := make([]contentPart, 0, 1+len(m.Images))
	parts = append(parts, contentPart{Type: "text", Text: m.Content})
	for _, img := range m.Images {
		parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: img.DataURL()}})
	}
	return json.Marshal(struct {
		messageFields
		Content []contentPart `json:"content"`
	}{messageFields(m), parts})
}

// UnmarshalJSON reads string content or array content (text parts joined,
// data-URL image parts into Images).
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		messageFields
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message(raw.messageFields)
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []contentPart
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("message content parts: %w", err)
		}
		for _, p := range parts {
			switch p.Type {
			case "text":
				m.Content += p.Text
			case "image_url":
				if p.ImageURL == nil {
					return errors.New("image_url part without image_url")
				}
				img, err := parseDataURL(p.ImageURL.URL)
				if err != nil {
					return err
				}
				m.Images = append(m.Images, img)
			}
		}
	default:
		return fmt.Errorf("message content must be a string or an array of parts")
	}
	return nil
}

func parseDataURL(u string) (Image, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	mime, data, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 {
		return Image{}, fmt.Errorf("image_url is not a base64 data URL")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return Image{}, fmt.Errorf("image data URL: %w", err)
	}
	return Image{MIME: mime, Data: b}, nil
}

// Tool declares a function the model may call.
type Tool struct {
	Type     string      `json:"type"` // always "function"
	Function FunctionDef `json:"function"`
}

// FunctionDef is a callable function with its JSON Schema parameters.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is the model's request to call a function. In stream deltas Index
// says which call a fragment belongs to.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// StreamOptions asks a streaming provider for a final usage chunk.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatRequest is a chat-completions request.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools,omitempty"`
	ToolChoice    any            `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	// ResponseFormat asks for structured output (see JSONSchemaFormat).
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// PromptCacheKey, on a request for a Codex model, is its
	// prompt_cache_key (OwnerCacheKey), carried in the body so that it is
	// part of what the caller admitted and hashed; a ProviderTransport
	// derives one from the context when it is empty.
	PromptCacheKey string `json:"prompt_cache_key,omitempty"`
}

// ResponseFormat is the OpenAI response_format: "json_object", or
// "json_schema" with the schema the answer must follow.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema names a JSON schema for structured output. Strict asks the
// provider to enforce it; callers still validate the answer, since not
// every OpenAI-compatible provider does.
type JSONSchema struct {
	Name   string `json:"name"`
	Schema any    `json:"schema"`
	Strict bool   `json:"strict,omitempty"`
}

// JSONSchemaFormat returns the response_format asking for answers that
// follow schema.
func JSONSchemaFormat(name string, schema any) *ResponseFormat {
	return &ResponseFormat{Type: "json_schema", JSONSchema: &JSONSchema{Name: name, Schema: schema, Strict: true}}
}

// Usage is a provider's token accounting. Providers report cached input in
// different fields; Tokens normalises them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// DeepSeek reports cache hits and misses beside prompt_tokens.
	PromptCacheHitTokens  int `json:"prompt_cache_hit_tokens,omitempty"`
	PromptCacheMissTokens int `json:"prompt_cache_miss_tokens,omitempty"`
	// OpenAI reports cached input inside prompt_tokens_details.
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
	// Some compatible servers report cache writes Anthropic-style.
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
}

// Tokens are normalised token counts: Input excludes cached reads, so each
// count is priced at exactly one rate.
type Tokens struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cacheRead"`
	CacheWrite int `json:"cacheWrite"`
}

// Tokens normalises u.
func (u *Usage) Tokens() Tokens {
	if u == nil {
		return Tokens{}
	}
	read := u.PromptCacheHitTokens
	if read == 0 && u.PromptTokensDetails != nil {
		read = u.PromptTokensDetails.CachedTokens
	}
	input := u.PromptTokens - read - u.CacheCreationInputTokens
	if input < 0 {
		input = 0
	}
	return Tokens{Input: input, Output: u.CompletionTokens, CacheRead: read, CacheWrite: u.CacheCreationInputTokens}
}

// Choice is one answer of a non-streamed completion.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// ChatResponse is a non-streamed completion, or the accumulation of a stream.
type ChatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Delta is the increment a stream chunk carries.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          string     `json:"content,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ReasoningItems carries encrypted reasoning translated from a
	// Responses-protocol stream.
	ReasoningItems []ReasoningItem `json:"reasoning_items,omitempty"`
}

// StreamChoice is one choice of a stream chunk.
type StreamChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// StreamChunk is one server-sent event of a streamed completion.
type StreamChunk struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []StreamChoice `json:"choices"`
	Usage   *Usage         `json:"usage,omitempty"`
	// Error is set on an in-band error event, such as the gateway's report of
	// a stream that failed after output had started.
	Error *ErrorBody `json:"error,omitempty"`
}

// EmbeddingsRequest asks for vectors of one or more inputs.
type EmbeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

// Embedding is one vector of an embeddings response.
type Embedding struct {
	Index     int       `json:"index"`
	Object    string    `json:"object"`
	Embedding []float32 `json:"embedding"`
}

// EmbeddingsResponse holds vectors in input order.
type EmbeddingsResponse struct {
	Object string      `json:"object"`
	Model  string      `json:"model"`
	Data   []Embedding `json:"data"`
	Usage  *Usage      `json:"usage,omitempty"`
}

// ErrorBody is the OpenAI error object.
type ErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type,omitempty"`
	Code    any    `json:"code,omitempty"`
	Param   any    `json:"param,omitempty"`
}

// ErrorResponse wraps ErrorBody as providers send it.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// APIError is a non-2xx answer, or an in-band stream error.
type APIError struct {
	Status  int // HTTP status; 0 for an in-band stream error
	Message string
	Type    string
	Code    string
}

func (e *APIError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("model stream error: %s", e.Message)
	}
	return fmt.Sprintf("model API error %d: %s", e.Status, e.Message)
}
