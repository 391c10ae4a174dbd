// Package agent is the turn loop both products share: a conversation, a set
// of tools and a public model name go in; the loop calls the model
// (streaming), runs the tool calls it asks for, appends their results and
// repeats until the model answers without tool calls or a step limit is
// reached, emitting typed events throughout. It knows nothing of HTTP,
// SQLite or policy: policy wraps tools.
package agent

import (
	"context"
	"encoding/json"
	"github.com/agentstack/agentstack/llm"
	"reflect"
)

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema of the arguments object
}

// ToolResult is what a tool call produced.
type ToolResult struct {
	// Content is the text the model sees.
	Content string `json:"content"`
	// IsError marks a failed call; the model still sees Content.
	IsError bool `json:"isError,omitempty"`
	// Blocked marks a call whose action was not performed because policy,
	// the user or a missing approval stopped it (not because it failed);
	// clients show it as blocked. It implies IsError.
	Blocked bool `json:"blocked,omitempty"`
	// Data is an optional structured result for clients (rich cards); the
	// model does not see it.
	Data json.RawMessage `json:"data,omitempty"`
	// EffectiveArgs, when set, are the arguments the call actually ran with,
	// present only when they differ from the model's (an approval whose edits
	// changed them); see SameArgs.
	EffectiveArgs json.RawMessage `json:"effectiveArgs,omitempty"`
	// Images are sent to the model after Content, in the same tool message.
	Images []llm.Image `json:"-"`
}

// Tool is something the model can call. Call's error means the tool could
// not run; the loop turns it into an error result the model sees.
type Tool interface {
	Spec() ToolSpec
	Call(ctx context.Context, args json.RawMessage) (ToolResult, error)
}

// ToolFunc adapts a function to Tool.
type ToolFunc struct {
	ToolSpec
	Fn func(ctx context.Context, args json.RawMessage) (ToolResult, error)
}

// Spec returns the tool's description.
func (f ToolFunc) Spec() ToolSpec { return f.ToolSpec }

// Call runs the function.
func (f ToolFunc) Call(ctx context.Context, args json.RawMessage) (ToolResult, error) {
	return f.Fn(ctx, args)
}

// SameArgs reports whether two JSON argument objects carry the same values,
// ignoring key order and spacing, so that an approval which sent the
// proposal back unchanged is not reported as edited.
func SameArgs(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}
