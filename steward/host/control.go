package host

import (
	"context"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/protocol"
)

// NewChat creates a chat for a host-started conversation (a voice call) and
// tells the connected apps.
func (h *Host) NewChat(ctx context.Context, title string) (string, error) {
	chat, err := h.manager.opts.Store.Create(ctx, title, "voice")
	if err != nil {
		return "", err
	}
	h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*chat)})
	return chat.ID, nil
}

// RunControlTurn runs text as a headless host control turn in chatID,
// attributed host / voice-call: its gated tools wait for an approval from
// any channel (the voice coordinator answers by voice).
func (h *Host) RunControlTurn(ctx context.Context, chatID, text string) protocol.TurnResult {
	h.turns.Add(1)
	defer h.turns.Done()
	res := h.manager.RunTurn(ctx, chatID, text, TurnOptions{Headless: true, Control: true,
		Attribution: llm.Attribution{Service: "host", Action: "voice-call"}})
	if c, err := h.manager.opts.Store.Get(context.WithoutCancel(ctx), chatID); err == nil {
		h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*c)})
	}
	return res
}

// PendingApprovals returns the approvals waiting in chatID.
func (h *Host) PendingApprovals(chatID string) []protocol.ApprovalRequest {
	return h.manager.PendingApprovals(chatID)
}

// Respond answers a pending approval as an app would.
func (h *Host) Respond(r protocol.ApprovalRespond) error { return h.manager.Respond(r) }
