package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

	turnCtx, cancel := context.WithCancel(llm.WithAttribution(withChatID(ctx, chatID), WatchAttribution))
	defer cancel()
	tr := m.newTurn(ctx, chatID, cancel)
	m.mu.Lock()
	m.turns[chatID] = tr
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.turns, chatID)
		m.mu.Unlock()
	}()
	m.audit(ctx, AuditEvent{Actor: "host", Type: "watch.turn", Risk: "low", ChatID: chatID,
		Summary: "watch event delivered into the chat", Payload: map[string]any{"watchId": t.WatchID, "eventId": t.EventID, "fallback": t.Fallback != ""}})

	out, runErr := m.watchTurn(turnCtx, chatID, tr, t)
	tr.outputStarted()
	if err := tr.journal.close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("the notification could not be saved: %w", err)
	}
	result := protocol.TurnResult{OK: runErr == nil, Text: out.Text, MessageID: out.MessageID}
	if runErr != nil {
		m.cacheSession(chatID, nil)
		result.Error = runErr.Error()
	} else if err := m.opts.Store.SetUnread(context.WithoutCancel(ctx), chatID, true); err == nil {
		if c, err := m.opts.Store.Get(context.WithoutCancel(ctx), chatID); err == nil {
			m.broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*c)})
		}
	}
	m.publish(chatID, protocol.TurnDone{Envelope: protocol.Env(protocol.TypeTurnDone, ""), ChatID: chatID, TurnID: tr.id, TurnResult: result})
	return out, runErr
}

func (m *ChatManager) watchTurn(ctx context.Context, chatID string, tr *turn, t watch.Turn) (watch.Delivered, error) {
	out := watch.Delivered{ChatID: chatID}
	history := m.cachedSession(chatID)
	if history == nil {
		var err error
		if history, err = m.opts.Store.Session(context.WithoutCancel(ctx), chatID); err != nil {
			return out, err
		}
	}
	j := tr.journal
	if t.Fallback != "" {
		msg := protocol.AssistantMessage{Envelope: protocol.Env(protocol.TypeAssistantMessage, ""), ChatID: chatID, TurnID: tr.id,
			MessageID: chats.NewID("asst"), Text: t.Fallback}
		data, _ := json.Marshal(msg)
		j.append(&chats.Entry{ID: msg.MessageID, Kind: "assistant", Data: data})
		asst := llm.Message{Role: "assistant", Content: t.Fallback}
		j.session(asst)
		m.cacheSession(chatID, append(history[:len(history):len(history)], asst))
		m.publish(chatID, msg)
		m.audit(ctx, AuditEvent{Actor: "host", Type: "chat.message", Risk: "low", ChatID: chatID, Summary: "watch fallback notification",
			Payload: map[string]any{"content": t.Fallback}})
		out.MessageID, out.Text = msg.MessageID, t.Fallback
		return out, nil
	}

	// The event is data in an automatic message, not the user speaking: it
	// enters the model session but never the transcript.
	prompt := llm.Message{Role: "user", Content: t.Prompt}
	msgs := make([]llm.Message, 0, len(history)+2)
	if m.opts.SystemPrompt != "" {
		msgs = append(msgs, llm.Message{Role: "system", Content: m.opts.SystemPrompt})
	}
	msgs = append(append(msgs, history...), prompt)
	pol, err := m.backgroundPolicy(t.Tools)
	if err != nil {
		return out, err
	}
	tools := policy.Wrap(t.Tools, policy.WrapOptions{Policy: pol, Approver: noApprover{},
		NewID: func() string { return chats.NewID("appr") }, Observer: &policyObserver{m: m, chatID: chatID}})
	rec := &turnRecorder{m: m, ctx: context.WithoutCancel(ctx), t: tr, j: j, chatID: chatID, turnID: tr.id, cards: map[string]*cardState{}}
	res, runErr := agent.Run(ctx, agent.RunOptions{Model: m.opts.Model, ModelName: m.opts.ModelName, Messages: msgs, Tools: tools,
		MaxSteps: m.opts.MaxSteps, OnEvent: rec.on})
	switch {
	case runErr != nil:
		return out, fmt.Errorf("watch turn: %w", runErr)
	case res.Reason == agent.StopStepLimit:
		return out, fmt.Errorf("watch turn stopped after %d model steps without a notification", res.Steps)
	case strings.TrimSpace(res.Text) == "":
		return out, errors.New("watch turn ended without a notification text")
	}
	// Only a completed turn enters the session, so a failed attempt leaves
	// no dangling automatic prompt behind for the retry.
	j.session(append([]llm.Message{prompt}, res.Messages...)...)
	m.cacheSession(chatID, append(append(history[:len(history):len(history)], prompt), res.Messages...))
	out.MessageID, out.Text = rec.lastMessageID, strings.TrimSpace(res.Text)
	return out, nil
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
