package host

import (
	"context"
	"errors"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/watch"
)

// MonitorChatTitle names the chat that receives watch events whose
// originating chat was deleted.
const MonitorChatTitle = "Monitor automatici"

// WatchAttribution labels the model calls of resumed watch turns.
var WatchAttribution = llm.Attribution{Service: "host", Action: "watch-agent-turn"}

type chatIDKey struct{}

// withChatID marks ctx as running inside chatID's turn.
func withChatID(ctx context.Context, chatID string) context.Context {
	return context.WithValue(ctx, chatIDKey{}, chatID)
}

// ChatIDFrom returns the chat whose turn is calling a tool, for host tools
// bound to their chat (create_watch records its originating chat).
func ChatIDFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(chatIDKey{}).(string)
	return id, ok && id != ""
}

var _ watch.Deliverer = (*ChatManager)(nil)

// DeliverWatchTurn resumes a chat's persisted agent session with a watch
// event. The structured prompt goes into the session as a clearly marked
// automatic message and is never shown as a user message; the assistant and
// tool messages are recorded normally. It returns watch.ErrChatBusy while
// the chat has an interactive turn, delivers into the "Monitor automatici"
// chat when the original was deleted, and runs deny-by-default: only
// t.Tools exist, and the user's deny rules still apply to them. With
// t.Fallback it posts that text without a model.
func (m *ChatManager) DeliverWatchTurn(ctx context.Context, t watch.Turn) (watch.Delivered, error) {
	chatID := t.ChatID
	if _, err := m.opts.Store.Get(ctx, chatID); errors.Is(err, chats.ErrNotFound) {
		c, err := m.monitorChat(ctx)
		if err != nil {
			return watch.Delivered{}, err
		}
		chatID = c.ID
	} else if err != nil {
		return watch.Delivered{}, err
	}
	if m.Running(chatID) {
		return watch.Delivered{}, watch.ErrChatBusy
	}
	unlock, err := m.lockChat(ctx, chatID)
	if err != nil {
		return watch.Delivered{}, err
	}
	defer unlock()

	m.audit(ctx, AuditEvent{Actor: "host", Type: "watch.turn", Risk: "low", ChatID: chatID,
		Summary: "watch event delivered into the chat", Payload: map[string]any{"watchId": t.WatchID, "eventId": t.EventID, "fallback": t.Fallback != ""}})
	out := m.runTurnLocked(ctx, chatID, turnSpec{attribution: WatchAttribution, watch: &t, beforeDone: func(out turnOutcome) {
		if out.err != nil {
			return
		}
		if err := m.opts.Store.SetUnread(context.WithoutCancel(ctx), chatID, true); err == nil {
			if c, err := m.opts.Store.Get(context.WithoutCancel(ctx), chatID); err == nil {
				m.broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*c)})
			}
		}
	}})
	return watch.Delivered{ChatID: chatID, MessageID: out.result.MessageID, Text: out.result.Text}, out.err
}

// backgroundPolicy allows exactly the tools of this turn, except those the
// user's own rules deny; nothing else exists in the turn.
func (m *ChatManager) backgroundPolicy(tools []agent.Tool) (*policy.Policy, error) {
	var rules policy.Rules
	seen := map[string]bool{}
	for _, t := range tools {
		name := t.Spec().Name
		if seen[name] {
			continue
		}
		seen[name] = true
		if m.opts.Policy != nil && m.opts.Policy.Decide(name) == policy.Deny {
			rules.Deny = append(rules.Deny, name)
		} else {
			rules.Allow = append(rules.Allow, name)
		}
	}
	return policy.New(policy.Options{User: rules})
}

// noApprover answers every approval of a background turn with "no
// channel": unattended turns never show cards.
type noApprover struct{}

func (noApprover) Approve(context.Context, policy.ApprovalRequest) (policy.ApprovalResponse, error) {
	return policy.ApprovalResponse{Verdict: policy.VerdictNoChannel}, nil
}

// monitorChat returns the "Monitor automatici" chat, creating it once. The
// watch engine delivers one event at a time, so there is a single caller.
func (m *ChatManager) monitorChat(ctx context.Context) (*chats.Chat, error) {
	list, err := m.opts.Store.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		if c.Origin == "watch" && c.Title == MonitorChatTitle {
			return &c, nil
		}
	}
	c, err := m.opts.Store.Create(ctx, MonitorChatTitle, "watch")
	if err != nil {
		return nil, err
	}
	m.broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*c)})
	return c, nil
}
