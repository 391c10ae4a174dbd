package host

import (
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/usage"
)

// QuickSendResult is the answer of POST /quick-send.
type QuickSendResult struct {
	ChatID string `json:"chatId"`
	protocol.TurnResult
}

// handleQuickSend runs text through a fresh headless chat. A gated tool it
// reaches waits for an approval from any connected app until the approval
// timeout, then is denied: nothing sensitive runs unattended.
func (h *Host) handleQuickSend(w http.ResponseWriter, r *http.Request) {
	in, ok := h.readQuickSend(w, r)
	if !ok {
		return
	}
	h.idempotent(w, r, in.requestID, func(w http.ResponseWriter) { h.quickSend(w, r, in) })
}

// quickSend runs one quick send: its recording transcribed, then the turn.
func (h *Host) quickSend(w http.ResponseWriter, r *http.Request, in quickSendInput) {
	if !h.transcribe(w, r, &in) {
		return
	}
	text := in.text
	if text == "" {
		writeJSONError(w, http.StatusBadRequest, "text is empty")
		return
	}
	if utf8.RuneCountInString(text) > protocol.MaxMessageChars {
		writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("text is over %d characters", protocol.MaxMessageChars))
		return
	}
	title := text
	if r := []rune(title); len(r) > 60 {
		title = string(r[:60]) + "…"
	}
	chat, err := h.manager.opts.Store.Create(r.Context(), title, "quick-send")
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "the host could not create a chat")
		return
	}
	h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*chat)})
	h.turns.Add(1)
	defer h.turns.Done()
	res := h.manager.RunTurn(h.ctx, chat.ID, text, TurnOptions{Headless: true, chatChecked: true,
		Attribution: llm.Attribution{Service: "host", Action: "quick-send"}})
	h.manager.opts.Store.SetUnread(h.ctx, chat.ID, true)
	if c, err := h.manager.opts.Store.Get(h.ctx, chat.ID); err == nil {
		h.hub.Broadcast(protocol.ChatUpdated{Envelope: protocol.Env(protocol.TypeChatUpdated, ""), Chat: toProtocolChat(*c)})
	}
	text = res.Text
	if !res.OK {
		text = res.Error
	}
	h.manager.notify(h.ctx, push.Event{Kind: push.KindQuickSend, ChatID: chat.ID, ChatTitle: chat.Title, Text: text, OK: res.OK}, true)
	h.audit(r.Context(), AuditEvent{Actor: "host", Type: "quick-send", Risk: "low", ChatID: chat.ID,
		Summary: fmt.Sprintf("quick send finished ok=%v", res.OK), Payload: map[string]any{"error": res.Error}})
	writeJSON(w, http.StatusOK, QuickSendResult{ChatID: chat.ID, TurnResult: res})
}

// handleUsage serves the Usage page's report: GET /usage?period=7d|30d|all.
func (h *Host) handleUsage(w http.ResponseWriter, r *http.Request) {
	period := r.URL.Query().Get("period")
	if period == "" {
		period = "7d"
	}
	if period != "7d" && period != "30d" && period != "all" && period != "24h" {
		writeJSONError(w, http.StatusBadRequest, "period must be 24h, 7d, 30d or all")
		return
	}
	since, _ := usage.ParsePeriod(period, time.Now())
	var rates map[string]gateway.Rate
	if h.opts.Rates != nil {
		rates = h.opts.Rates()
	}
	rep, err := h.opts.Usage.Report(r.Context(), usage.ReportOptions{Since: since, Rates: rates, Recent: 50})
	if err != nil {
		h.log.Error("usage report failed", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the usage report failed; see the host log")
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
