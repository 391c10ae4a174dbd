package push

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

const maxRequestBytes = 16 << 10

// Mount registers the /push/* routes through handle — the host's
// authenticated Handle — so every route requires the host token:
//
//	GET  /push/public-key   {"publicKey": "…"} for PushManager.subscribe
//	POST /push/subscribe    a PushSubscription JSON (+ optional "label")
//	POST /push/unsubscribe  {"endpoint": "…"}
//	POST /push/test         optional {"title","body"}; answers the send Report
//	GET  /settings/notification-lang  {"lang": "en", "supported": ["en","it"]}
//	POST /settings/notification-lang  {"lang": "it"}
func (s *Service) Mount(handle func(pattern string, h http.Handler)) {
	handle("GET /settings/notification-lang", http.HandlerFunc(s.handleLanguage))
	handle("POST /settings/notification-lang", http.HandlerFunc(s.handleLanguage))
	handle("GET /push/public-key", http.HandlerFunc(s.handlePublicKey))
	handle("POST /push/subscribe", http.HandlerFunc(s.handleSubscribe))
	handle("POST /push/unsubscribe", http.HandlerFunc(s.handleUnsubscribe))
	handle("POST /push/test", http.HandlerFunc(s.handleTest))
}

// Handler returns the routes on their own mux (unauthenticated: for tests
// and for hosts that wrap it themselves).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Mount(func(p string, h http.Handler) { mux.Handle(p, h) })
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// readJSON decodes a bounded JSON body; an empty body leaves v untouched
// when allowEmpty.
func readJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "the request is over 16 KiB")
		return false
	}
	if allowEmpty && strings.TrimSpace(string(b)) == "" {
		return true
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "send a JSON object")
		return false
	}
	return true
}

func (s *Service) handlePublicKey(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"publicKey": s.PublicKey()})
}

func (s *Service) handleSubscribe(w http.ResponseWriter, r *http.Request) {
	var sub Subscription
	if !readJSON(w, r, &sub, false) {
		return
	}
	if err := s.Subscribe(sub); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"ok": true, "subscriptions": len(s.Subscriptions())})
}

func (s *Service) handleUnsubscribe(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Endpoint string `json:"endpoint"`
	}
	if !readJSON(w, r, &body, false) {
		return
	}
	if strings.TrimSpace(body.Endpoint) == "" {
		writeError(w, http.StatusBadRequest, "endpoint is required")
		return
	}
	removed, err := s.Unsubscribe(body.Endpoint)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "could not save the subscriptions")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"removed": removed})
}

func (s *Service) handleTest(w http.ResponseWriter, r *http.Request) {
	n := Notification{Title: "Steward", Body: "Test notification: push works on this device.", Tag: "steward-test", URL: "/"}
	var body struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	}
	if !readJSON(w, r, &body, true) {
		return
	}
	if strings.TrimSpace(body.Title) != "" {
		n.Title = body.Title
	}
	if strings.TrimSpace(body.Body) != "" {
		n.Body = body.Body
	}
	writeJSON(w, http.StatusOK, s.Send(r.Context(), n))
}
