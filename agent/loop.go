package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// DefaultMaxSteps bounds the model calls of one run.
const DefaultMaxSteps = 24

// Model streams chat completions; *llm.Client is one.
type Model interface {
	ChatStream(ctx context.Context, req *llm.ChatRequest, onChunk func(llm.StreamChunk) error) (*llm.ChatResponse, error)
}

// RunOptions describes one run: a turn of a conversation.
type RunOptions struct {
	Model     Model
	ModelName string // public model name, e.g. tier-5
	// Messages is the conversation so far, ending with the new user message.
	Messages []llm.Message
	Tools    []Tool
	MaxSteps int // default DefaultMaxSteps
	// OnEvent receives every event, in order, from the run's goroutine.
	OnEvent func(Event)
	// Compactor, when set, may shorten the conversation before each model
	// step, and once more when the provider rejects it as too long.
	Compactor Compactor
	// Retry, when set, retries model calls that failed for a reason that
	// may pass (rate limits, overload, transient 5xx, network), provided no
	// output of the failed attempt reached OnEvent.
	Retry *RetryPolicy
}

// RunResult is what a run added to the conversation.
type RunResult struct {
	// Messages are the new assistant and tool messages, in order. Every tool
	// call in them has exactly one result, even after a cancellation.
	Messages []llm.Message
	// Text is the final assistant text.
	Text   string
	Reason StopReason
	Steps  int
	// History, set only when a Compactor shortened the conversation, is
	// the whole conversation as it now stands: the compacted
	// RunOptions.Messages followed by what the run added. A caller that
	// stores the conversation replaces it with History.
	History []llm.Message
	// Compactions are the compactions made during the run, in order.
	Compactions []Compaction
}

// CancelledResult is the tool result recorded for a call that was cancelled
// before it finished or before it started.
const CancelledResult = "Tool call cancelled: the turn was stopped before this call completed."

// Run executes one turn. It returns an error only when the run ended
// because of it (model failure or cancellation); the result is valid and
// paired in every case.
func Run(ctx context.Context, opts RunOptions) (*RunResult, error) {
	emit := opts.OnEvent
	if emit == nil {
		emit = func(Event) {}
	}
	maxSteps := opts.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	tools := map[string]Tool{}
	var specs []llm.Tool
	for _, t := range opts.Tools {
		s := t.Spec()
		tools[s.Name] = t
		params := s.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		specs = append(specs, llm.Tool{Type: "function", Function: llm.FunctionDef{Name: s.Name, Description: s.Description, Parameters: params}})
	}
	res := &RunResult{}
	// Clipped, so that appending copies (once, at the first tool call)
	// instead of writing into the caller's array; an answer without tool
	// calls never copies the history.
	conv := slices.Clip(opts.Messages)
	compacted := false
	// keep appends a message of the run to the result and, once the
	// conversation was compacted (and so is the run's own copy), to it.
	keep := func(m llm.Message) {
		res.Messages = append(res.Messages, m)
		if compacted {
			conv = append(conv, m)
		}
	}
	finish := func(reason StopReason, err error) (*RunResult, error) {
		res.Reason = reason
		if compacted {
			res.History = conv
		}
		if err != nil {
			emit(ErrorEvent{Err: err})
		}
		emit(Done{Reason: reason, Steps: res.Steps})
		return res, err
	}

	for {
		if res.Steps >= maxSteps {
			return finish(StopStepLimit, nil)
		}
		if err := ctx.Err(); err != nil {
			return finish(StopAborted, err)
		}
		res.Steps++
		if opts.Compactor != nil {
			c, err := opts.Compactor.Compact(ctx, CompactStep{Messages: conv, Tools: specs, Model: opts.Model, ModelName: opts.ModelName})
			if ctx.Err() != nil {
				return finish(StopAborted, ctx.Err())
			}
			// A failed summary leaves the conversation as it was: the call
			// may still fit, and a rejection compacts once more below.
			if err == nil {
				conv = apply(c, conv, &compacted, res, emit)
			}
		}
		resp, err := step(ctx, opts, conv, specs, emit)
		if err != nil && opts.Compactor != nil && ctx.Err() == nil && Classify(err) == ErrContextLength {
			c, cerr := opts.Compactor.Compact(ctx, CompactStep{Messages: conv, Tools: specs, Model: opts.Model, ModelName: opts.ModelName, Rejected: true})
			switch {
			case cerr != nil:
				err = fmt.Errorf("%w (and compacting the conversation failed: %v)", err, cerr)
			case c != nil:
				conv = apply(c, conv, &compacted, res, emit)
				resp, err = step(ctx, opts, conv, specs, emit)
			}
		}
		if err != nil {
			// Keep visible partial text; drop half-streamed tool calls, which
			// could never be paired with results.
			if resp != nil && len(resp.Choices) > 0 && resp.Choices[0].Message.Content != "" {
				partial := llm.Message{Role: "assistant", Content: resp.Choices[0].Message.Content}
				keep(partial)
				res.Text = partial.Content
				emit(AssistantMessage{Message: partial})
			}
			if ctx.Err() != nil {
				return finish(StopAborted, ctx.Err())
			}
			return finish(StopError, fmt.Errorf("model call: %w", err))
		}
		msg := resp.Choices[0].Message
		msg.Role = "assistant"
		res.Text = msg.Content
		emit(AssistantMessage{Message: msg, Usage: resp.Usage})
		if len(msg.ToolCalls) == 0 {
			keep(msg)
			return finish(StopAnswered, nil)
		}
		res.Messages = append(res.Messages, msg)
		conv = append(conv, msg)
		for i, call := range msg.ToolCalls {
			if ctx.Err() != nil {
				// Pair every remaining call with an explicit failed result.
				for _, rest := range msg.ToolCalls[i:] {
					m := toolMessage(rest.ID, CancelledResult)
					conv = append(conv, m)
					res.Messages = append(res.Messages, m)
					emit(ToolError{CallID: rest.ID, Name: rest.Function.Name, Err: "cancelled"})
				}
				return finish(StopAborted, ctx.Err())
			}
			content, images := runTool(ctx, tools, call, emit)
			m := toolMessage(call.ID, content)
			m.Images = images
			conv = append(conv, m)
			res.Messages = append(res.Messages, m)
		}
	}
}

func toolMessage(id, content string) llm.Message {
	return llm.Message{Role: "tool", ToolCallID: id, Content: content}
}

// runTool runs one call and returns the content and images the model sees.
func runTool(ctx context.Context, tools map[string]Tool, call llm.ToolCall, emit func(Event)) (string, []llm.Image) {
	name := call.Function.Name
	args := json.RawMessage(call.Function.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	emit(ToolStart{CallID: call.ID, Name: name, Args: args})
	start := time.Now()
	fail := func(msg string) (string, []llm.Image) {
		emit(ToolError{CallID: call.ID, Name: name, Err: msg, Duration: time.Since(start)})
		return "Error: " + msg, nil
	}
	tool, ok := tools[name]
	if !ok {
		return fail(fmt.Sprintf("unknown tool %q", name))
	}
	if !json.Valid(args) {
		return fail("the arguments are not valid JSON; send a JSON object matching the tool's schema")
	}
	tctx := context.WithValue(context.WithValue(ctx, emitterKey{}, emit), callKey{}, CallInfo{CallID: call.ID, Name: name})
	result, err := safeCall(tctx, tool, args)
	if err != nil {
		if ctx.Err() != nil {
			emit(ToolError{CallID: call.ID, Name: name, Err: "cancelled", Duration: time.Since(start)})
			return CancelledResult, nil
		}
		return fail(err.Error())
	}
	emit(ToolResultEvent{CallID: call.ID, Name: name, Result: result, Duration: time.Since(start)})
	if result.IsError && result.Content == "" {
		return "Error: the tool failed without a message", nil
	}
	return result.Content, result.Images
}

func safeCall(ctx context.Context, t Tool, args json.RawMessage) (r ToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool crashed: %v", p)
		}
	}()
	return t.Call(ctx, args)
}

// apply installs a compaction (nil: none) and reports it.
func apply(c *Compaction, conv []llm.Message, compacted *bool, res *RunResult, emit func(Event)) []llm.Message {
	if c == nil {
		return conv
	}
	*compacted = true
	res.Compactions = append(res.Compactions, *c)
	emit(Compacted{Summary: c.Summary, Covered: c.Covered, Messages: len(c.Messages)})
	return c.Messages
}

// step makes one model call, retried under opts.Retry while no output of
// the failed attempt has been emitted.
func step(ctx context.Context, opts RunOptions, conv []llm.Message, specs []llm.Tool, emit func(Event)) (*llm.ChatResponse, error) {
	var retries *Retries
	if opts.Retry != nil {
		retries = opts.Retry.Start()
	}
	for {
		streamed := false
		req := &llm.ChatRequest{Model: opts.ModelName, Messages: conv, Tools: specs}
		resp, err := opts.Model.ChatStream(ctx, req, func(c llm.StreamChunk) error {
			for _, ch := range c.Choices {
				if ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" {
					streamed = true
					emit(AssistantDelta{Text: ch.Delta.Content, Reasoning: ch.Delta.ReasoningContent})
				}
			}
			return nil
		})
		if err == nil || retries == nil || streamed || ctx.Err() != nil {
			return resp, err
		}
		class := Classify(err)
		d, ok := retries.Next(class)
		if !ok {
			return resp, err
		}
		emit(Retrying{Class: class, Delay: d, Err: err})
		if werr := retries.Wait(ctx, d); werr != nil {
			return resp, err
		}
	}
}

// CheckPairing reports the first break of the rule every conversation sent
// to a model must keep: each tool result follows the assistant message that
// called it, and each call has its result before the next other message.
func CheckPairing(msgs []llm.Message) error {
	open := map[string]bool{}
	for i, m := range msgs {
		switch {
		case m.Role == "tool":
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d: result %s without its call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case len(open) > 0:
			return fmt.Errorf("message %d: calls %v without results", i, slices.Sorted(maps.Keys(open)))
		}
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("the conversation ends with calls %v without results", slices.Sorted(maps.Keys(open)))
	}
	return nil
}
