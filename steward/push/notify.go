package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Kinds of Event: everything that waits for the user.
const (
	KindApproval  = "approval"   // a gated tool call waits for approval
	KindReply     = "reply"      // a chat reply finished while no app showed the chat
	KindFailed    = "failed"     // a chat turn failed while no app showed the chat
	KindQuickSend = "quick-send" // a quick-send finished (OK tells how)
	KindAction    = "action"     // a new Action Center item
)

// Event is something the host (or the Action Center) tells the user about.
// Notify composes its title and body in the notification language.
type Event struct {
	Kind       string
	ChatID     string
	ChatTitle  string
	ApprovalID string
	ActionID   string
	Tool       string
	// Text is the reply, the error or the action's summary.
	Text string
	// OK is a quick-send's outcome.
	OK bool
}

// Languages are the supported notification languages; the first is the default.
var Languages = []string{"en", "it"}

var texts = map[string]map[string]string{
	"en": {
		KindApproval: "Approval needed", "approvalBody": "%s is waiting for your approval in “%s”.",
		KindReply: "Steward replied", KindFailed: "The reply failed",
		KindQuickSend: "Quick send done", "quickSendFailed": "Quick send failed",
		KindAction: "New action", "untitled": "a chat",
	},
	"it": {
		KindApproval: "Approvazione richiesta", "approvalBody": "%s attende la tua approvazione in “%s”.",
		KindReply: "Steward ha risposto", KindFailed: "La risposta non è riuscita",
		KindQuickSend: "Invio rapido completato", "quickSendFailed": "Invio rapido non riuscito",
		KindAction: "Nuova azione", "untitled": "una chat",
	},
}

const langFile = "notification-settings.json"

// retryDelays space the resends of a notification no endpoint accepted.
var retryDelays = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}

// Language returns the notification language (GET /settings/notification-lang).
func (s *Service) Language() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lang == "" {
		return Languages[0]
	}
	return s.lang
}

// SetLanguage stores the notification language in
// STEWARD_HOME/notification-settings.json.
func (s *Service) SetLanguage(lang string) error {
	if _, ok := texts[lang]; !ok {
		return fmt.Errorf("notification language %q is not supported; use one of %v", lang, Languages)
	}
	data, _ := json.Marshal(map[string]string{"lang": lang})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := writeFileAtomic(filepath.Join(s.opts.Home, langFile), data); err != nil {
		return err
	}
	s.lang = lang
	return nil
}

func (s *Service) loadLanguage() error {
	path := filepath.Join(s.opts.Home, langFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var v struct {
		Lang string `json:"lang"`
	}
	if err := json.Unmarshal(b, &v); err != nil || texts[v.Lang] == nil {
		return fmt.Errorf("%s is damaged or names an unsupported language; fix or remove it", path)
	}
	s.lang = v.Lang
	return nil
}

// Compose turns e into a notification in the notification language, with
// the URL that opens its place in the app.
func (s *Service) Compose(e Event) Notification {
	t := texts[s.Language()]
	title := e.ChatTitle
	if title == "" {
		title = t["untitled"]
	}
	q := url.Values{}
	if e.ChatID != "" {
		q.Set("chat", e.ChatID)
	}
	n := Notification{ChatID: e.ChatID, Body: e.Text, Tag: e.Kind + ":" + e.ChatID, Data: map[string]string{"kind": e.Kind}}
	switch e.Kind {
	case KindApproval:
		n.Title, n.Body, n.Tag = t[KindApproval], fmt.Sprintf(t["approvalBody"], e.Tool, title), "approval:"+e.ApprovalID
		q.Set("approval", e.ApprovalID)
		n.Data["approvalId"], n.Data["tool"] = e.ApprovalID, e.Tool
	case KindReply, KindFailed:
		n.Title = t[e.Kind]
		if e.ChatTitle != "" {
			n.Title += " · " + e.ChatTitle
		}
	case KindQuickSend:
		n.Title = t[KindQuickSend]
		if !e.OK {
			n.Title = t["quickSendFailed"]
		}
	case KindAction:
		n.Title, n.Tag = t[KindAction], "action:"+e.ActionID
		q.Set("action", e.ActionID)
		n.Data["actionId"] = e.ActionID
	default:
		n.Title = e.Kind
	}
	n.URL = "/"
	if len(q) > 0 {
		n.URL = "/?" + q.Encode()
	}
	return n
}

// Notify composes e and sends it in the background, resending when every
// endpoint failed (see SendRetry). It returns at once.
func (s *Service) Notify(ctx context.Context, e Event) {
	n := s.Compose(e)
	go s.SendRetry(context.WithoutCancel(ctx), n)
}

// SendRetry sends n and, while no endpoint accepted it (and some exist),
// sends again after 5 s, 30 s and 2 min. It returns the last report.
func (s *Service) SendRetry(ctx context.Context, n Notification) Report {
	rep := s.Send(ctx, n)
	for i := 0; !rep.Complete() && i < len(s.retryDelays); i++ {
		s.log.Warn("every push endpoint failed; retrying", "attempt", i+2, "in", s.retryDelays[i], "errors", rep.Errors)
		select {
		case <-time.After(s.retryDelays[i]):
		case <-ctx.Done():
			return rep
		}
		rep = s.Send(ctx, n)
	}
	if !rep.Complete() {
		s.log.Error("a notification was not delivered to any device", "title", n.Title, "errors", rep.Errors)
	}
	return rep
}

// handleLanguage serves GET and POST /settings/notification-lang.
func (s *Service) handleLanguage(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		var body struct {
			Lang string `json:"lang"`
		}
		if !readJSON(w, r, &body, false) {
			return
		}
		if err := s.SetLanguage(body.Lang); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"lang": s.Language(), "supported": Languages})
}
