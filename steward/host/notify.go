package host

import (
	"context"

	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/push"
)

// Notifier tells the user about what waits for them when no app shows it
// (Web Push); *push.Service is one. Notify must not block.
type Notifier interface {
	Notify(ctx context.Context, e push.Event)
}

// focusTracker is what the hub knows about which chat each client shows.
type focusTracker interface {
	Focused(chatID string) bool
}

// notify hands e to the notifier unless some app is showing its chat
// (always, when always is set: a quick-send result).
func (m *ChatManager) notify(ctx context.Context, e push.Event, always bool) {
	if m.opts.Notifier == nil {
		return
	}
	if f, ok := m.opts.Clients.(focusTracker); ok && !always && f.Focused(e.ChatID) {
		return
	}
	if e.ChatTitle == "" && m.opts.Store != nil {
		if c, err := m.opts.Store.Get(ctx, e.ChatID); err == nil {
			e.ChatTitle = c.Title
		}
	}
	m.opts.Notifier.Notify(ctx, e)
}

// notifyTurn tells about a finished or failed turn; an aborted one was the
// user's own doing.
func (m *ChatManager) notifyTurn(ctx context.Context, chatID string, r protocol.TurnResult) {
	switch {
	case r.Aborted:
	case r.OK:
		m.notify(ctx, push.Event{Kind: push.KindReply, ChatID: chatID, Text: r.Text}, false)
	default:
		m.notify(ctx, push.Event{Kind: push.KindFailed, ChatID: chatID, Text: r.Error}, false)
	}
}
