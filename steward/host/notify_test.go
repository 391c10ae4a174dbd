package host_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/push/pushtest"
)

// TestPushForEverythingThatWaits drives a real host with a real push
// service that sends to a local RFC 8030/8291 receiver: a finished reply no
// app shows, a pending approval and a quick-send result each deliver one
// notification whose link opens the right place; a reply the user is
// looking at sends none; an expired subscription is pruned while the other
// still delivers; the language setting changes the texts.
func TestPushForEverythingThatWaits(t *testing.T) {
	rcv := pushtest.New(t, "mailto:me@example.com")
	svc, err := push.Open(push.Options{Home: t.TempDir(), Contact: "mailto:me@example.com", HTTPClient: rcv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/phone", "/expired"} {
		ep, k, a := rcv.Subscribe(t, path)
		if err := svc.Subscribe(push.Subscription{Endpoint: ep, Keys: push.Keys{P256dh: k, Auth: a}}); err != nil {
			t.Fatal(err)
		}
	}
	rcv.SetStatus("/expired", http.StatusGone)
	e := newEnv(t, envOptions{notifier: svc})
	received := func(n int) []push.Notification {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(rcv.Received("/phone")) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the phone received %d notifications, want %d", len(rcv.Received("/phone")), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var out []push.Notification
		for _, b := range rcv.Received("/phone") {
			var p push.Notification
			json.Unmarshal(b, &p)
			out = append(out, p)
		}
		return out
	}

	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "Looked at while it finished."}, llmtest.Reply{Content: "Your train leaves at 17:05."})
	c := e.dial(token)
	chat := c.createChat("trip")
	// The user is looking at the chat: no push for its reply.
	c.send(map[string]any{"type": "client.focus", "chatId": chat, "visible": true})
	c.say(chat, "first")
	c.next("turn.done", nil)
	// The page goes to the background: the next reply is pushed.
	c.send(map[string]any{"type": "client.focus", "chatId": chat, "visible": false})
	c.say(chat, "when is my train?")
	c.next("turn.done", nil)
	got := received(1)
	if n := got[0]; n.Title != "Steward replied · trip" || n.Body != "Your train leaves at 17:05." || n.URL != "/?chat="+chat || n.ChatID != chat || n.Data["kind"] != push.KindReply {
		t.Errorf("reply notification = %+v", n)
	}
	// Send posts to both endpoints at once and prunes after both answered:
	// the phone can have its copy before the 410 is acted on.
	for deadline := time.Now().Add(30 * time.Second); len(svc.Subscriptions()) != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if subs := svc.Subscriptions(); len(subs) != 1 || !strings.HasSuffix(subs[0].Endpoint, "/phone") {
		t.Errorf("after a 410 the subscriptions are %v, want only /phone", subs)
	}

	// A pending approval, in Italian.
	if err := svc.SetLanguage("it"); err != nil {
		t.Fatal(err)
	}
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", `{"to":"a@b.c","body":"x"}`)}},
		llmtest.Reply{Content: "Sent."})
	c.say(chat, "send it")
	req := c.next("approval.request", nil)
	got = received(2)
	approvalID := req["approvalId"].(string)
	if n := got[1]; n.Title != "Approvazione richiesta" || !strings.Contains(n.Body, "mcp__mail__send_email") ||
		n.URL != "/?approval="+approvalID+"&chat="+chat || n.Data["approvalId"] != approvalID {
		t.Errorf("approval notification = %+v", n)
	}
	// The link resolves to the chat with its approval still pending.
	var res struct {
		Kind, ChatID, Title string
		Approval            struct {
			ID      string
			Pending bool
		}
	}
	getJSONAuth(t, e.srv.URL+"/resolve"+strings.TrimPrefix(got[1].URL, "/"), &res)
	if res.Kind != "chat" || res.ChatID != chat || res.Title != "trip" || !res.Approval.Pending || res.Approval.ID != approvalID {
		t.Errorf("/resolve = %+v", res)
	}
	c.send(map[string]any{"type": "approval.respond", "approvalId": approvalID, "decision": "approve"})
	c.next("turn.done", nil)
	got = received(3) // the reply after the approval
	getJSONAuth(t, e.srv.URL+"/resolve?chat="+chat+"&approval="+approvalID, &res)
	if res.Approval.Pending {
		t.Error("/resolve reports an answered approval as pending")
	}

	// A quick-send result, even with an app focused elsewhere.
	svc.SetLanguage("en")
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "Added milk to the list."})
	hreq, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/quick-send", strings.NewReader(`{"text":"add milk"}`))
	hreq.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	var qs struct {
		ChatID string `json:"chatId"`
	}
	json.NewDecoder(resp.Body).Decode(&qs)
	resp.Body.Close()
	got = received(4)
	if n := got[3]; n.Title != "Quick send done" || n.Body != "Added milk to the list." || n.URL != "/?chat="+qs.ChatID || n.Data["kind"] != push.KindQuickSend {
		t.Errorf("quick-send notification = %+v", n)
	}
	time.Sleep(200 * time.Millisecond) // nothing else is on its way
	if n := len(rcv.Received("/phone")); n != 4 {
		t.Errorf("the phone received %d notifications, want 4 (none for the reply the user watched)", n)
	}
	var bad map[string]string
	getJSONStatus(t, e.srv.URL+"/resolve?chat=chat_gone", http.StatusNotFound, &bad)
}

func getJSONAuth(t *testing.T, url string, v any) {
	t.Helper()
	getJSONStatus(t, url, http.StatusOK, v)
}

func getJSONStatus(t *testing.T, url string, status int, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, status)
	}
	json.NewDecoder(resp.Body).Decode(v)
}
