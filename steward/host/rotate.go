package host

import (
	"net/http"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/steward/pairing"
)

// StatusTokenRotated is the WebSocket close code sent to every client when
// the host token is rotated: the app must pair again.
const StatusTokenRotated websocket.StatusCode = 4001

// handlePairing serves GET /system/pairing: the address a phone opens, the
// pairing link (token in the fragment) and its QR code as SVG.
func (h *Host) handlePairing(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	base := ""
	if h.opts.PairURL != nil {
		base = h.opts.PairURL()
	}
	if base == "" {
		base = "http://" + r.Host
	}
	link := pairing.Link(base, h.Token())
	svg, err := pairing.SVG(link, 4)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"url": base, "link": link, "qrSvg": svg, "rotatable": h.opts.TokenFile != ""})
}

// handleRotateToken serves POST /system/token: a new random token replaces
// the old one in STEWARD_HOME/auth-token and in memory, and every WebSocket
// client is disconnected, so every other device must pair again. The caller
// gets the new token in the response body.
func (h *Host) handleRotateToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if h.opts.TokenFile == "" {
		writeJSONError(w, http.StatusConflict, "the token comes from STEWARD_AUTH_TOKEN; change that setting and restart to replace it")
		return
	}
	t, err := newHostToken()
	if err == nil {
		h.tokenMu.Lock()
		if err = writeTokenFile(h.opts.TokenFile, t); err == nil {
			h.token = t
		}
		h.tokenMu.Unlock()
	}
	if err != nil {
		h.log.Error("could not rotate the host token; the old one stays valid", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "could not rotate the token: "+err.Error())
		return
	}
	n := h.hub.closeAllWith(StatusTokenRotated, "token rotated; pair again")
	h.log.Info("host token rotated; disconnected every WebSocket client", "clients", n)
	h.audit(r.Context(), AuditEvent{Actor: "user", Type: "auth.rotate", Risk: "high", Summary: "host token rotated",
		Payload: map[string]any{"disconnected": n, "remote": r.RemoteAddr}})
	writeJSON(w, http.StatusOK, map[string]any{"token": t, "disconnected": n})
}
