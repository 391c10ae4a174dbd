package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// Event is something that happened during a run. Tools may emit their own
// event types (approval requests, questions) through Emit.
type Event interface{ AgentEvent() }

// AssistantDelta is a fragment of streamed assistant output.
type AssistantDelta struct {
	Text      string
	Reasoning string
}

// AssistantMessage is a complete assistant message of one model step.
type AssistantMessage struct {
	Message llm.Message
	Usage   *llm.Usage
}

// ToolStart says a tool call is about to run.
type ToolStart struct {
	CallID string
	Name   string
	Args   json.RawMessage
}

// ToolResultEvent reports a finished tool call (IsError on failures the tool reported).
type ToolResultEvent struct {
	CallID   string
	Name     string
	Result   ToolResult
	Duration time.Duration
}

// ToolError reports a tool call that could not run (unknown tool, bad
// arguments, the tool's own error, cancellation).
type ToolError struct {
	CallID   string
	Name     string
	Err      string
	Duration time.Duration
}

// Done ends a run.
type Done struct {
	Reason StopReason
	Steps  int
}

// ErrorEvent reports the error that ended a run.
type ErrorEvent struct{ Err error }

// Compacted reports that the Compactor replaced the older part of the
// conversation with a summary before a model step.
type Compacted struct {
	Summary string
	// Covered is how many messages the summary replaced; Messages how many
	// the conversation has now.
	Covered, Messages int
}

// Retrying reports a failed model call that will be tried again after Delay.
type Retrying struct {
	Class ErrorClass
	Delay time.Duration
	Err   error
}

// AgentEvent marks the types as events.
func (AssistantDelta) AgentEvent()   {}
func (AssistantMessage) AgentEvent() {}
func (ToolStart) AgentEvent()        {}
func (ToolResultEvent) AgentEvent()  {}
func (ToolError) AgentEvent()        {}
func (Done) AgentEvent()             {}
func (ErrorEvent) AgentEvent()       {}
func (Compacted) AgentEvent()        {}
func (Retrying) AgentEvent()         {}

// StopReason says why a run ended.
type StopReason string

// Stop reasons.
const (
	StopAnswered  StopReason = "answered"   // the model answered without tool calls
	StopStepLimit StopReason = "step_limit" // MaxSteps model calls were made
	StopAborted   StopReason = "aborted"    // the context was cancelled
	StopError     StopReason = "error"      // the model call failed
)

type emitterKey struct{}

// Emit sends ev to the run that called the tool holding ctx. Outside a run
// it does nothing.
func Emit(ctx context.Context, ev Event) {
	if f, ok := ctx.Value(emitterKey{}).(func(Event)); ok {
		f(ev)
	}
}

// CallInfo identifies the tool call a tool is running for.
type CallInfo struct {
	CallID string
	Name   string
}

type callKey struct{}

// CallFrom returns the call a tool is running for.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(CallInfo)
	return c, ok
}
