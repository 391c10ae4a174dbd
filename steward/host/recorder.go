package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
)

// turnRecorder turns agent events into client frames, transcript entries,
// tool-ledger rows and audit events.
type turnRecorder struct {
	m             *ChatManager
	ctx           context.Context // not cancelled by an abort: records must land
	t             *turn
	j             *journal
	chatID        string
	turnID        string
	cards         map[string]*cardState
	lastMessageID string
	began         bool // an event has been handled
}

type cardState struct {
	entryID string
	card    protocol.ToolCard
}

func (r *turnRecorder) env(t string) protocol.Envelope { return protocol.Env(t, "") }

func (r *turnRecorder) on(ev agent.Event) {
	// The journal may write from the event after the first one on: the
	// first output is on its way to the clients by then.
	if r.began {
		r.j.release()
	}
	r.began = true
	defer r.t.outputStarted()
	m := r.m
	switch e := ev.(type) {
	case agent.AssistantDelta:
		if e.Text != "" {
			m.publish(r.chatID, protocol.AssistantDelta{Envelope: r.env(protocol.TypeAssistantDelta), ChatID: r.chatID, TurnID: r.turnID, Text: e.Text})
		}
	case agent.AssistantMessage:
		if strings.TrimSpace(e.Message.Content) == "" {
			return
		}
		msg := protocol.AssistantMessage{Envelope: r.env(protocol.TypeAssistantMessage), ChatID: r.chatID, TurnID: r.turnID,
			MessageID: chats.NewID("asst"), Text: e.Message.Content}
		m.publish(r.chatID, msg)
		data, _ := json.Marshal(msg)
		r.j.append(&chats.Entry{ID: msg.MessageID, Kind: protocol.EntryAssistant, Data: data})
		r.lastMessageID = msg.MessageID
		m.audit(r.ctx, AuditEvent{Actor: "assistant", Type: "chat.message", Risk: "low", ChatID: r.chatID, Summary: "assistant message",
			Payload: map[string]any{"content": e.Message.Content}})
	case agent.ToolStart:
		cs := &cardState{entryID: chats.NewID("tool"), card: protocol.ToolCard{CallID: e.CallID, Name: e.Name, Args: e.Args, Status: "running"}}
		r.cards[e.CallID] = cs
		data, _ := json.Marshal(cs.card)
		r.j.append(&chats.Entry{ID: cs.entryID, Kind: protocol.EntryTool, Data: data})
		m.publish(r.chatID, protocol.ToolEvent{Envelope: r.env(protocol.TypeToolStart), ChatID: r.chatID, TurnID: r.turnID, ToolCard: cs.card})
	case agent.ToolResultEvent:
		cs := r.card(e.CallID, e.Name)
		c := &cs.card
		c.Content, c.IsError, c.EffectiveArgs = e.Result.Content, e.Result.IsError, e.Result.EffectiveArgs
		c.DurationMS = ms(e.Duration)
		c.Data, c.Kind = richData(e.Result.Data)
		if c.Kind != "" {
			c.Data = r.m.opts.Files.addTokens(r.ctx, c.Name, c.Data)
		}
		switch {
		case e.Result.Blocked:
			c.Status = "blocked"
		case e.Result.IsError:
			c.Status = "error"
		default:
			c.Status = "done"
		}
		r.finish(cs, protocol.TypeToolResult, !e.Result.IsError, "")
	case agent.Compacted:
		f := protocol.Summarised{Envelope: r.env(protocol.TypeSummarised), ChatID: r.chatID, TurnID: r.turnID,
			EntryID: chats.NewID("summary"), Summary: e.Summary, Covered: e.Covered, Remaining: e.Messages}
		data, _ := json.Marshal(f)
		r.j.append(&chats.Entry{ID: f.EntryID, Kind: protocol.EntrySummary, Data: data})
		m.publish(r.chatID, f)
		m.audit(r.ctx, AuditEvent{Actor: "host", Type: "chat.summarised", Risk: "low", ChatID: r.chatID,
			Summary: fmt.Sprintf("%d earlier messages summarised", e.Covered), Payload: map[string]any{"covered": e.Covered, "summary": e.Summary}})
	case agent.ToolError:
		cs := r.card(e.CallID, e.Name)
		cs.card.Status, cs.card.Error, cs.card.IsError, cs.card.DurationMS = "error", e.Err, true, ms(e.Duration)
		r.finish(cs, protocol.TypeToolError, false, e.Err)
	}
}

func (r *turnRecorder) card(callID, name string) *cardState {
	if cs := r.cards[callID]; cs != nil {
		return cs
	}
	// An error before the tool started (cancellation of a later call).
	cs := &cardState{entryID: chats.NewID("tool"), card: protocol.ToolCard{CallID: callID, Name: name}}
	r.cards[callID] = cs
	data, _ := json.Marshal(cs.card)
	r.j.append(&chats.Entry{ID: cs.entryID, Kind: protocol.EntryTool, Data: data})
	return cs
}

func (r *turnRecorder) finish(cs *cardState, frameType string, ok bool, errMsg string) {
	m := r.m
	data, _ := json.Marshal(cs.card)
	r.j.update(cs.entryID, data)
	m.publish(r.chatID, protocol.ToolEvent{Envelope: r.env(frameType), ChatID: r.chatID, TurnID: r.turnID, ToolCard: cs.card})
	if m.opts.Usage != nil {
		m.opts.Usage.RecordTool(r.ctx, usage.ToolCall{Time: time.Now(), Service: "host", Action: "chat", ChatID: r.chatID,
			Tool: cs.card.Name, Duration: time.Duration(cs.card.DurationMS * float64(time.Millisecond)), OK: ok, Error: errMsg})
	}
	risk := "low"
	if m.opts.Policy != nil && m.opts.Policy.Decide(cs.card.Name) != policy.Allow {
		risk = "medium"
	}
	m.audit(r.ctx, AuditEvent{Actor: "host", Type: "tool.result", Risk: risk, ChatID: r.chatID, Tool: cs.card.Name,
		Summary: cs.card.Name + ": " + cs.card.Status, Payload: map[string]any{
			"args": cs.card.Args, "effectiveArgs": cs.card.EffectiveArgs, "content": cs.card.Content, "error": cs.card.Error}})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// dataKind reads the documented top-level "kind" of a rich tool result
// (richData also looks inside an MCP result's structured content).
func dataKind(data json.RawMessage) string {
	var k struct {
		Kind string `json:"kind"`
	}
	if len(data) > 0 && json.Unmarshal(data, &k) == nil {
		return k.Kind
	}
	return ""
}
