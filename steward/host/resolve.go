package host

import (
	"context"
	"net/http"

	"github.com/agentstack/agentstack/steward/protocol"
)

// pendingApprovalChat returns the chat of a pending approval.
func (m *ChatManager) pendingApprovalChat(id string) (string, bool) {
	return m.pending.chatOf(id, protocol.EntryApproval)
}

// handleResolve serves GET /resolve?chat=ID[&approval=ID] or ?action=ID:
// what a notification's link points at, so the app can open it or say why
// it is gone (a deleted chat, an approval already answered or expired).
func (h *Host) handleResolve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	chatID, approvalID, actionID := q.Get("chat"), q.Get("approval"), q.Get("action")
	out := map[string]any{}
	switch {
	case actionID != "":
		if h.opts.ResolveAction == nil {
			writeJSONError(w, http.StatusNotFound, "the Action Center is not available on this host")
			return
		}
		a, ok := h.opts.ResolveAction(r.Context(), actionID)
		if !ok {
			writeJSONError(w, http.StatusNotFound, "this action no longer exists")
			return
		}
		out["kind"], out["action"] = "action", a
	case chatID != "" || approvalID != "":
		if h.manager == nil {
			writeJSONError(w, http.StatusNotFound, "this host has no chats")
			return
		}
		if approvalID != "" {
			owner, pending := h.manager.pendingApprovalChat(approvalID)
			if pending && chatID == "" {
				chatID = owner
			}
			if pending && owner != chatID {
				pending = false // never reveal another chat's approval
			}
			out["approval"] = map[string]any{"id": approvalID, "pending": pending}
		}
		c, err := h.manager.opts.Store.Get(r.Context(), chatID)
		if err != nil {
			writeJSONError(w, http.StatusNotFound, "this chat no longer exists")
			return
		}
		out["kind"], out["chatId"], out["title"] = "chat", c.ID, c.Title
	default:
		writeJSONError(w, http.StatusBadRequest, "name what to resolve: ?chat=ID, ?chat=ID&approval=ID or ?action=ID")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ActionResolver finds an Action Center item for /resolve.
type ActionResolver func(ctx context.Context, id string) (any, bool)
