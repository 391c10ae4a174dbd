package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Protocol names a provider's wire protocol.
type Protocol string

// The wire protocols a provider can speak.
const (
	// ProtocolChat is OpenAI chat completions (POST /chat/completions).
	ProtocolChat Protocol = "chat_completions"
	// ProtocolResponses is the public OpenAI Responses API (POST
	// /responses): JSON answers, or SSE when the caller streams.
	ProtocolResponses Protocol = "responses"
	// ProtocolCodex is the Codex backend's Responses dialect: always SSE,
	// no output-token limit, a prompt_cache_key and a session_id header.
	ProtocolCodex Protocol = "codex"
)

// ReasoningItem is an encrypted reasoning item a Responses-protocol model
// produced. It is replayed only to the account that produced it.
type ReasoningItem struct {
	ID               string `json:"id"`
	EncryptedContent string `json:"encrypted_content"`
	// Producer is ProducerID of the provider account that produced it.
	Producer string `json:"producer"`
}

// ProducerID identifies a provider account for reasoning replay: a hash of
// the provider and account names (alias equality is not credential
// equality, so the names, not the base URL, identify it).
func ProducerID(provider, account string) string {
	h := sha256.Sum256([]byte(provider + "\x00" + account))
	return hex.EncodeToString(h[:16])
}

// ResponsesOptions shapes one Responses-protocol request.
type ResponsesOptions struct {
	Protocol Protocol // ProtocolResponses or ProtocolCodex
	// ReasoningEffort is low, medium or high; "" sends no reasoning object.
	ReasoningEffort string
	// Producer is the ProducerID of the account the request goes to:
	// reasoning items of other producers are left out.
	Producer string
	// PromptCacheKey is sent as prompt_cache_key (Codex).
	PromptCacheKey string
	Stream         bool
}

type responsesRequest struct {
	Model             string          `json:"model"`
	Instructions      string          `json:"instructions,omitempty"`
	Input             []any           `json:"input"`
	Tools             []responsesTool `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int             `json:"max_output_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	Reasoning         *struct {
		Effort string `json:"effort"`
	} `json:"reasoning,omitempty"`
	Text           *responsesText `json:"text,omitempty"`
	Store          bool           `json:"store"`
	Stream         bool           `json:"stream,omitempty"`
	Include        []string       `json:"include,omitempty"`
	PromptCacheKey string         `json:"prompt_cache_key,omitempty"`
}

// responsesTool is the flat function layout of the Responses protocol.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type responsesText struct {
	Format any `json:"format"`
}

type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

type responsesMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content []responsesPart `json:"content"`
}

type responsesCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type responsesCallOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

type responsesReasoning struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	EncryptedContent string `json:"encrypted_content"`
	Summary          []any  `json:"summary"`
}

func inputParts(text string, images []Image) []responsesPart {
	parts := []responsesPart{{Type: "input_text", Text: text}}
	for _, img := range images {
		parts = append(parts, responsesPart{Type: "input_image", ImageURL: img.DataURL()})
	}
	return parts
}

// ResponsesBody maps a chat request to a Responses-protocol body: leading
// system messages become instructions, later ones developer messages; tools
// take the flat layout with auto choice and no parallel calls; max_tokens
// becomes max_output_tokens (the Codex dialect sends no limit).
func ResponsesBody(req *ChatRequest, opts ResponsesOptions) ([]byte, error) {
	out := responsesRequest{Model: req.Model, Input: []any{}, Temperature: req.Temperature, Stream: opts.Stream || opts.Protocol == ProtocolCodex}
	if opts.Protocol != ProtocolCodex {
		out.MaxOutputTokens = req.MaxTokens
	}
	if opts.ReasoningEffort != "" {
		out.Reasoning = &struct {
			Effort string `json:"effort"`
		}{opts.ReasoningEffort}
	}
	if opts.Protocol == ProtocolCodex || opts.ReasoningEffort != "" {
		out.Include = []string{"reasoning.encrypted_content"}
	}
	out.PromptCacheKey = opts.PromptCacheKey
	var instructions []string
	leading := true
	for i, m := range req.Messages {
		if m.Role != "system" {
			leading = false
		}
		switch m.Role {
		case "system":
			if leading {
				instructions = append(instructions, m.Content)
				continue
			}
			out.Input = append(out.Input, responsesMessage{Type: "message", Role: "developer", Content: inputParts(m.Content, m.Images)})
		case "user":
			out.Input = append(out.Input, responsesMessage{Type: "message", Role: "user", Content: inputParts(m.Content, m.Images)})
		case "assistant":
			for _, r := range m.ReasoningItems {
				if r.Producer == "" || r.Producer != opts.Producer {
					continue // another account's encrypted reasoning cannot be read there
				}
				out.Input = append(out.Input, responsesReasoning{Type: "reasoning", ID: r.ID, EncryptedContent: r.EncryptedContent, Summary: []any{}})
			}
			if m.Content != "" {
				out.Input = append(out.Input, responsesMessage{Type: "message", Role: "assistant", Content: []responsesPart{{Type: "output_text", Text: m.Content}}})
			}
			for _, tc := range m.ToolCalls {
				out.Input = append(out.Input, responsesCall{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		case "tool":
			var output any = m.Content
			if len(m.Images) > 0 {
				output = inputParts(m.Content, m.Images)
			}
			out.Input = append(out.Input, responsesCallOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: output})
		default:
			return nil, fmt.Errorf("message %d: role %q has no Responses mapping", i, m.Role)
		}
	}
	out.Instructions = strings.Join(instructions, "\n\n")
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, responsesTool{Type: "function", Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if len(out.Tools) > 0 {
		no := false
		out.ParallelToolCalls = &no
		out.ToolChoice = "auto"
		if tc, err := responsesToolChoice(req.ToolChoice); err != nil {
			return nil, err
		} else if tc != nil {
			out.ToolChoice = tc
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch {
		case rf.Type == "json_schema" && rf.JSONSchema != nil:
			out.Text = &responsesText{Format: map[string]any{"type": "json_schema", "name": rf.JSONSchema.Name, "schema": rf.JSONSchema.Schema, "strict": rf.JSONSchema.Strict}}
		default:
			out.Text = &responsesText{Format: map[string]any{"type": rf.Type}}
		}
	}
	return json.Marshal(out)
}

// responsesToolChoice maps a chat tool_choice: strings pass through, a
// named function takes the flat layout.
func responsesToolChoice(tc any) (any, error) {
	switch v := tc.(type) {
	case nil:
		return nil, nil
	case string:
		return v, nil
	case map[string]any:
		fn, _ := v["function"].(map[string]any)
		name, _ := fn["name"].(string)
		if name == "" {
			return nil, errors.New("tool_choice: a named choice needs function.name")
		}
		return map[string]any{"type": "function", "name": name}, nil
	}
	return nil, fmt.Errorf("tool_choice: unsupported value %T", tc)
}

// responsesObject is the response object of the Responses protocol.
type responsesObject struct {
	ID                string                   `json:"id"`
	CreatedAt         int64                    `json:"created_at"`
	Model             string                   `json:"model"`
	Status            string                   `json:"status"`
	Output            []responsesItem          `json:"output"`
	Usage             *responsesUsage          `json:"usage"`
	Error             *responsesError          `json:"error"`
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
}

type responsesItem struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	CallID           string `json:"call_id"`
	Name             string `json:"name"`
	Arguments        string `json:"arguments"`
	EncryptedContent string `json:"encrypted_content"`
	Content          []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (u *responsesUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if u.InputTokensDetails != nil {
		out.PromptTokensDetails = &struct {
			CachedTokens int `json:"cached_tokens"`
		}{u.InputTokensDetails.CachedTokens}
	}
	return out
}

// finishReason maps a terminal response to a chat finish_reason.
func (o *responsesObject) finishReason(calls bool) string {
	if o.Status == "incomplete" && o.IncompleteDetails != nil {
		switch o.IncompleteDetails.Reason {
		case "max_output_tokens":
			return "length"
		case "content_filter":
			return "content_filter"
		}
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// failure is the error of a failed response, nil otherwise.
func (o *responsesObject) failure() *APIError {
	if o.Status != "failed" && o.Error == nil {
		return nil
	}
	e := &APIError{Message: "response failed", Code: "response_failed"}
	if o.Error != nil {
		e.Message, e.Code, e.Type = cmpString(o.Error.Message, e.Message), cmpString(o.Error.Code, e.Code), o.Error.Type
	}
	return explain(e)
}

func cmpString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ChatResponseFromResponses maps a complete Responses object to a chat
// completion; producer marks its encrypted reasoning items. A failed
// response is an *APIError.
func ChatResponseFromResponses(body []byte, producer string) (*ChatResponse, error) {
	var o responsesObject
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("decode responses answer: %w", err)
	}
	return o.chat(producer)
}

func (o *responsesObject) chat(producer string) (*ChatResponse, error) {
	if e := o.failure(); e != nil {
		return nil, e
	}
	msg := Message{Role: "assistant"}
	var reasoning strings.Builder
	for _, it := range o.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				msg.Content += c.Text + c.Refusal
			}
		case "function_call":
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: it.Name, Arguments: it.Arguments}})
		case "reasoning":
			for _, s := range it.Summary {
				reasoning.WriteString(s.Text)
			}
			if it.EncryptedContent != "" {
				msg.ReasoningItems = append(msg.ReasoningItems, ReasoningItem{ID: it.ID, EncryptedContent: it.EncryptedContent, Producer: producer})
			}
		}
	}
	msg.ReasoningContent = reasoning.String()
	return &ChatResponse{ID: o.ID, Object: "chat.completion", Created: o.CreatedAt, Model: o.Model,
		Choices: []Choice{{Message: msg, FinishReason: o.finishReason(len(msg.ToolCalls) > 0)}}, Usage: o.Usage.usage()}, nil
}

// responsesEvent is one event of a Responses stream; which fields are set
// depends on Type.
type responsesEvent struct {
	Type        string           `json:"type"`
	Response    *responsesObject `json:"response"`
	Item        *responsesItem   `json:"item"`
	ItemID      string           `json:"item_id"`
	OutputIndex int              `json:"output_index"`
	Delta       string           `json:"delta"`
	Code        string           `json:"code"`
	Message     string           `json:"message"`
}

// ResponsesStream translates a Responses-protocol event stream into chat
// stream chunks. It ends at the first terminal event (response.completed,
// response.incomplete, response.failed or error) without waiting for the
// body to close.
type ResponsesStream struct {
	// Producer marks the encrypted reasoning items of this stream.
	Producer string

	id, model string
	created   int64
	calls     map[int]int    // output index → tool-call index
	streamed  map[int]string // output index → text or arguments sent so far
	sawCall   bool
}

// Run reads events from body and calls emit with each chat chunk. It
// returns nil after response.completed or response.incomplete, an
// *APIError after response.failed or an error event, and an error when
// the stream ends without a terminal event.
func (s *ResponsesStream) Run(body io.Reader, emit func(StreamChunk) error) error {
	s.calls, s.streamed = map[int]int{}, map[int]string{}
	sr := NewSSEReader(body)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("responses stream ended before a terminal event")
		}
		if err != nil {
			return err
		}
		var e responsesEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("decode responses event %q: %w", ev.Event, err)
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		done, err := s.handle(&e, emit)
		if err != nil || done {
			return err
		}
	}
}

func (s *ResponsesStream) chunk(d Delta, finish string, usage *Usage) StreamChunk {
	c := StreamChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []StreamChoice{{Delta: d}}, Usage: usage}
	if finish != "" {
		c.Choices[0].FinishReason = &finish
	}
	return c
}

// more returns what complete adds to what was already streamed at index i,
// or an error when the complete value contradicts the streamed prefix.
func (s *ResponsesStream) more(i int, complete string) (string, error) {
	sent := s.streamed[i]
	rest, ok := strings.CutPrefix(complete, sent)
	if !ok {
		return "", fmt.Errorf("responses stream: output %d completed as something other than its deltas", i)
	}
	s.streamed[i] = complete
	return rest, nil
}

func (s *ResponsesStream) handle(e *responsesEvent, emit func(StreamChunk) error) (bool, error) {
	switch e.Type {
	case "response.created", "response.in_progress":
		if r := e.Response; r != nil {
			s.id, s.model, s.created = r.ID, r.Model, r.CreatedAt
		}
	case "response.output_item.added":
		if e.Item != nil && e.Item.Type == "function_call" {
			idx := len(s.calls)
			s.calls[e.OutputIndex] = idx
			s.sawCall = true
			s.streamed[e.OutputIndex] = e.Item.Arguments
			return false, emit(s.chunk(Delta{ToolCalls: []ToolCall{{Index: &idx, ID: e.Item.CallID, Type: "function",
				Function: FunctionCall{Name: e.Item.Name, Arguments: e.Item.Arguments}}}}, "", nil))
		}
	case "response.output_text.delta", "response.refusal.delta":
		s.streamed[e.OutputIndex] += e.Delta
		return false, emit(s.chunk(Delta{Content: e.Delta}, "", nil))
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return false, emit(s.chunk(Delta{ReasoningContent: e.Delta}, "", nil))
	case "response.function_call_arguments.delta":
		idx, ok := s.calls[e.OutputIndex]
		if !ok {
			return false, fmt.Errorf("responses stream: arguments for unknown output %d", e.OutputIndex)
		}
		s.streamed[e.OutputIndex] += e.Delta
		return false, emit(s.chunk(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: e.Delta}}}}, "", nil))
	case "response.output_item.done":
		return false, s.itemDone(e.OutputIndex, e.Item, emit)
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response == nil {
			return true, fmt.Errorf("responses stream: %s without a response", e.Type)
		}
		if f := e.Response.failure(); f != nil {
			return true, f
		}
		// The terminal response holds the latest complete output: anything
		// its items add to what was streamed is sent before finishing.
		for i := range e.Response.Output {
			if err := s.itemDone(i, &e.Response.Output[i], emit); err != nil {
				return true, err
			}
		}
		return true, emit(s.chunk(Delta{}, e.Response.finishReason(s.sawCall), e.Response.Usage.usage()))
	case "error":
		return true, explain(&APIError{Message: cmpString(e.Message, "provider stream error"), Code: e.Code})
	}
	return false, nil
}

// itemDone completes one output item: text or arguments the deltas did not
// carry, a function call that had no added event, and encrypted reasoning.
func (s *ResponsesStream) itemDone(i int, it *responsesItem, emit func(StreamChunk) error) error {
	if it == nil {
		return nil
	}
	switch it.Type {
	case "message":
		var text strings.Builder
		for _, c := range it.Content {
			text.WriteString(c.Text + c.Refusal)
		}
		rest, err := s.more(i, text.String())
		if err != nil || rest == "" {
			return err
		}
		return emit(s.chunk(Delta{Content: rest}, "", nil))
	case "function_call":
		idx, ok := s.calls[i]
		if !ok {
			idx = len(s.calls)
			s.calls[i] = idx
			s.sawCall = true
			s.streamed[i] = it.Arguments
			return emit(s.chunk(Delta{ToolCalls: []ToolCall{{Index: &idx, ID: it.CallID, Type: "function",
				Function: FunctionCall{Name: it.Name, Arguments: it.Arguments}}}}, "", nil))
		}
		rest, err := s.more(i, it.Arguments)
		if err != nil || rest == "" {
			return err
		}
		return emit(s.chunk(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: rest}}}}, "", nil))
	case "reasoning":
		if it.EncryptedContent == "" || s.streamed[i] == it.EncryptedContent {
			return nil
		}
		s.streamed[i] = it.EncryptedContent
		return emit(s.chunk(Delta{ReasoningItems: []ReasoningItem{{ID: it.ID, EncryptedContent: it.EncryptedContent, Producer: s.Producer}}}, "", nil))
	}
	return nil
}
