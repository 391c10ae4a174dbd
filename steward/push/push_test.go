package push

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/push/pushtest"
)

// pushService adapts pushtest.Receiver to this package's types.
type pushService struct {
	*pushtest.Receiver
	srv struct{ URL string }
}

func newPushService(t *testing.T) *pushService {
	r := pushtest.New(t, "mailto:me@example.com")
	p := &pushService{Receiver: r}
	p.srv.URL = r.URL()
	return p
}

func (p *pushService) subscription(t *testing.T, path string) Subscription {
	ep, k, a := p.Subscribe(t, path)
	return Subscription{Endpoint: ep, Keys: Keys{P256dh: k, Auth: a}}
}

func (p *pushService) setStatus(path string, status int) { p.SetStatus(path, status) }

func (p *pushService) received(path string) []Notification {
	var out []Notification
	for _, b := range p.Received(path) {
		var n Notification
		json.Unmarshal(b, &n)
		out = append(out, n)
	}
	return out
}

func openService(t *testing.T, home string, p *pushService) *Service {
	t.Helper()
	s, err := Open(Options{Home: home, Contact: "me@example.com", HTTPClient: p.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendDecryptsAtEndpoint(t *testing.T) {
	p := newPushService(t)
	home := t.TempDir()
	s := openService(t, home, p)
	if err := s.Subscribe(p.subscription(t, "/phone")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("è", 300)
	rep := s.Send(context.Background(), Notification{Title: "Treno", Body: long, Tag: "watch:w1:e1", URL: "/?chat=chat_1", ChatID: "chat_1",
		Data: map[string]string{"watchId": "w1", "eventId": "e1"}})
	if rep.Attempted != 1 || rep.Delivered != 1 || rep.Failed != 0 || !rep.Complete() {
		t.Fatalf("report %+v", rep)
	}
	got := p.received("/phone")
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	n := got[0]
	if n.Title != "Treno" || n.ChatID != "chat_1" || n.URL != "/?chat=chat_1" || n.Data["eventId"] != "e1" {
		t.Errorf("payload %+v", n)
	}
	if r := []rune(n.Body); len(r) != MaxBodyChars || r[len(r)-1] != '…' {
		t.Errorf("body is %d characters, want the %d cap with an ellipsis", len(r), MaxBodyChars)
	}
	if p.VAPIDKey() != s.PublicKey() {
		t.Errorf("VAPID key %q, want %q", p.VAPIDKey(), s.PublicKey())
	}

	// The keys persist: a restart signs with the same key the browser has.
	info, err := os.Stat(filepath.Join(home, "vapid.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("vapid.json: %v %v", info, err)
	}
	again := openService(t, home, p)
	if again.PublicKey() != s.PublicKey() || len(again.Subscriptions()) != 1 {
		t.Errorf("restart: key changed or subscriptions lost")
	}
}

func TestPruningAndAllFailed(t *testing.T) {
	p := newPushService(t)
	home := t.TempDir()
	s := openService(t, home, p)
	for _, path := range []string{"/ok", "/gone", "/missing", "/down"} {
		if err := s.Subscribe(p.subscription(t, path)); err != nil {
			t.Fatal(err)
		}
	}
	p.setStatus("/gone", http.StatusGone)
	p.setStatus("/missing", http.StatusNotFound)
	p.setStatus("/down", http.StatusInternalServerError)
	rep := s.Send(context.Background(), Notification{Title: "t", Body: "b"})
	if rep.Attempted != 4 || rep.Delivered != 1 || rep.Failed != 3 || rep.Pruned != 2 || !rep.Complete() {
		t.Fatalf("report %+v", rep)
	}
	for _, e := range rep.Errors {
		if strings.Contains(e, "/gone") || strings.Contains(e, "/down") {
			t.Errorf("an error reveals an endpoint path: %q", e)
		}
	}
	var left []string
	for _, sub := range openService(t, home, p).Subscriptions() { // from disk
		left = append(left, strings.TrimPrefix(sub.Endpoint, p.srv.URL))
	}
	if strings.Join(left, ",") != "/ok,/down" {
		t.Errorf("subscriptions after pruning: %v", left)
	}

	// Every remaining endpoint fails: the send is not complete, nothing is
	// pruned, and a later retry delivers.
	p.setStatus("/ok", http.StatusServiceUnavailable)
	rep = s.Send(context.Background(), Notification{Title: "t", Body: "retry me"})
	if rep.Complete() || rep.Failed != 2 || rep.Pruned != 0 || len(s.Subscriptions()) != 2 {
		t.Fatalf("all failed: %+v", rep)
	}
	p.setStatus("/ok", 0)
	p.setStatus("/down", 0)
	if rep = s.Send(context.Background(), Notification{Title: "t", Body: "retry me"}); rep.Delivered != 2 {
		t.Fatalf("retry: %+v", rep)
	}

	// No endpoint at all counts as complete: the chat copy is the delivery.
	empty := openService(t, t.TempDir(), p)
	if rep := empty.Send(context.Background(), Notification{Body: "x"}); !rep.Complete() || rep.Attempted != 0 {
		t.Errorf("no endpoints: %+v", rep)
	}
}

func TestSubscribeValidation(t *testing.T) {
	p := newPushService(t)
	s := openService(t, t.TempDir(), p)
	good := p.subscription(t, "/x")
	bad := []Subscription{
		{Endpoint: "http://push.example.com/x", Keys: good.Keys},
		{Endpoint: "file:///etc/passwd", Keys: good.Keys},
		{Endpoint: "https://user:pw@push.example.com/x", Keys: good.Keys},
		{Endpoint: good.Endpoint, Keys: Keys{P256dh: "AAAA", Auth: good.Keys.Auth}},
		{Endpoint: good.Endpoint, Keys: Keys{P256dh: good.Keys.P256dh, Auth: "c2hvcnQ"}},
	}
	for _, sub := range bad {
		if err := s.Subscribe(sub); err == nil {
			t.Errorf("accepted %+v", sub)
		}
	}
	if len(s.Subscriptions()) != 0 {
		t.Fatal("a bad subscription was stored")
	}
	// Re-subscribing the same endpoint replaces it.
	s.Subscribe(good)
	s.Subscribe(good)
	if len(s.Subscriptions()) != 1 {
		t.Errorf("%d subscriptions after subscribing twice", len(s.Subscriptions()))
	}
	for i := range MaxSubscriptions {
		s.Subscribe(p.subscription(t, fmt.Sprintf("/d%d", i)))
	}
	if n := len(s.Subscriptions()); n != MaxSubscriptions {
		t.Errorf("%d subscriptions, cap %d", n, MaxSubscriptions)
	}
}

func TestDamagedFiles(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "vapid.json"), []byte("{not json"), 0o600)
	if _, err := Open(Options{Home: home}); err == nil || !strings.Contains(err.Error(), "vapid.json is damaged") {
		t.Errorf("damaged keys: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "vapid.json")); string(b) != "{not json" {
		t.Error("damaged keys were overwritten")
	}
	home = t.TempDir()
	os.WriteFile(filepath.Join(home, "push-subscriptions.json"), []byte("[{"), 0o600)
	if _, err := Open(Options{Home: home}); err == nil || !strings.Contains(err.Error(), "push-subscriptions.json") {
		t.Errorf("damaged subscriptions: %v", err)
	}
}

func TestRoutes(t *testing.T) {
	p := newPushService(t)
	s := openService(t, t.TempDir(), p)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, out := do("GET", "/push/public-key", ""); code != 200 || out["publicKey"] != s.PublicKey() {
		t.Errorf("public key: %d %v", code, out)
	}
	sub := p.subscription(t, "/route")
	b, _ := json.Marshal(sub)
	if code, out := do("POST", "/push/subscribe", string(b)); code != 201 || out["subscriptions"] != 1.0 {
		t.Errorf("subscribe: %d %v", code, out)
	}
	if code, _ := do("POST", "/push/subscribe", `{"endpoint":"http://x"}`); code != 400 {
		t.Errorf("bad subscribe: %d", code)
	}
	if code, _ := do("POST", "/push/subscribe", strings.Repeat("x", 20<<10)); code != 413 {
		t.Errorf("oversized: %d", code)
	}
	if code, out := do("POST", "/push/test", ""); code != 200 || out["delivered"] != 1.0 {
		t.Errorf("test: %d %v", code, out)
	}
	if got := p.received("/route"); len(got) != 1 || !strings.Contains(got[0].Body, "Test notification") {
		t.Errorf("test push %+v", got)
	}
	if code, out := do("POST", "/push/unsubscribe", fmt.Sprintf(`{"endpoint":%q}`, sub.Endpoint)); code != 200 || out["removed"] != true {
		t.Errorf("unsubscribe: %d %v", code, out)
	}
	if code, out := do("POST", "/push/test", `{"body":"hi"}`); code != 200 || out["attempted"] != 0.0 {
		t.Errorf("test with no devices: %d %v", code, out)
	}
}

// TestSendRetryWhenAllFailed: a notification no endpoint accepted is sent
// again until one does; one that keeps failing gives up after the delays.
func TestSendRetryWhenAllFailed(t *testing.T) {
	p := newPushService(t)
	s, err := Open(Options{Home: t.TempDir(), Contact: "mailto:me@example.com", HTTPClient: p.Client(),
		RetryDelays: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	s.Subscribe(p.subscription(t, "/phone"))
	p.FailNext("/phone", 2)
	if rep := s.SendRetry(context.Background(), Notification{Title: "t", Body: "third time lucky"}); rep.Delivered != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := p.received("/phone"); len(got) != 1 || got[0].Body != "third time lucky" {
		t.Fatalf("received %+v", got)
	}
	p.FailNext("/phone", 10)
	if rep := s.SendRetry(context.Background(), Notification{Title: "t", Body: "never"}); rep.Complete() || rep.Failed != 1 {
		t.Fatalf("report after 4 failures %+v", rep)
	}
	if len(s.Subscriptions()) != 1 {
		t.Error("a failing (not expired) endpoint was pruned")
	}
}

// TestNotificationLanguage: the setting persists, is validated, and its
// routes answer.
func TestNotificationLanguage(t *testing.T) {
	p := newPushService(t)
	home := t.TempDir()
	s := openService(t, home, p)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+"/settings/notification-lang", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	if code, v := post(`{"lang":"fr"}`); code != 400 || !strings.Contains(v["error"].(string), "not supported") {
		t.Errorf("fr: %d %v", code, v)
	}
	if code, v := post(`{"lang":"it"}`); code != 200 || v["lang"] != "it" {
		t.Errorf("it: %d %v", code, v)
	}
	resp, _ := http.Get(srv.URL + "/settings/notification-lang")
	var v struct {
		Lang      string
		Supported []string
	}
	json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.Lang != "it" || len(v.Supported) != 2 {
		t.Errorf("GET = %+v", v)
	}
	again := openService(t, home, p)
	if again.Language() != "it" {
		t.Error("the language was not persisted")
	}
	n := again.Compose(Event{Kind: KindFailed, ChatID: "chat_1", ChatTitle: "Treni", Text: "model offline"})
	if n.Title != "La risposta non è riuscita · Treni" || n.URL != "/?chat=chat_1" || n.Body != "model offline" {
		t.Errorf("composed %+v", n)
	}
	if n := again.Compose(Event{Kind: KindAction, ActionID: "act_1", Text: "Pay the invoice"}); n.URL != "/?action=act_1" || n.Title != "Nuova azione" {
		t.Errorf("action %+v", n)
	}
	os.WriteFile(filepath.Join(home, "notification-settings.json"), []byte(`{"lang":"xx"}`), 0o600)
	if _, err := Open(Options{Home: home}); err == nil || !strings.Contains(err.Error(), "notification-settings.json") {
		t.Errorf("damaged language file: %v", err)
	}
}
