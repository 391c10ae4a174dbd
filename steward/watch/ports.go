package watch

import (
	"context"
	"errors"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/usage"
)

// Deliverer is what the engine needs from the host: resume a chat's agent
// session with a structured event (never shown as a user message) and return
// the notification text it wrote. When Turn.Fallback is set it posts that
// text as-is without a model. It returns ErrChatBusy while the chat has an
// interactive turn, and creates a "Monitor automatici" chat when the original
// one was deleted (Delivered.ChatID then names it).
type Deliverer interface {
	DeliverWatchTurn(ctx context.Context, t Turn) (Delivered, error)
}

// ErrChatBusy defers an event while its chat runs an interactive turn.
var ErrChatBusy = errors.New("the chat has an interactive turn in flight")

// Turn is one background delivery turn.
type Turn struct {
	ChatID  string
	WatchID string
	EventID string
	// Prompt is the structured event message, marked as automatic data.
	Prompt string
	// Tools are exactly the tools this turn may use: read-only tools plus
	// the guarded grants of the matched rules. Everything else is denied.
	Tools []agent.Tool
	// Fallback, when set, is posted as the chat's assistant message instead
	// of running the model.
	Fallback string
}

// Delivered is the outcome of a delivery turn.
type Delivered struct {
	ChatID    string
	MessageID string
	Text      string
}

// Notifier sends Web Push notifications; *push.Service is one.
type Notifier interface {
	Send(ctx context.Context, n push.Notification) push.Report
}

// ToolRecorder receives usage rows for polling and delivery.
type ToolRecorder interface {
	RecordTool(ctx context.Context, c usage.ToolCall)
}

// Lifecycle is an audit-worthy thing that happened to a watch; WatchID is
// the correlation id.
type Lifecycle struct {
	Type    string // watch.created, watch.stopped, watch.expired, watch.completed, watch.poll_failed, watch.event_queued, …
	WatchID string
	ChatID  string
	EventID string
	Summary string
	Payload map[string]any
}
