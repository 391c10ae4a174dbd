package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/protocol"
)

func TestAbortMidStream(t *testing.T) {
	e := newEnv(t, envOptions{})
	hold := make(chan struct{})
	defer close(hold)
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "a long answer that will be cut", Chunks: 5, Hold: hold})
	c := e.dial(token)
	chat := c.createChat("abort")
	c.say(chat, "tell me a story")
	c.next("assistant.delta", nil)
	c.send(map[string]any{"type": "abort", "chatId": chat})
	done := c.next("turn.done", nil)
	if done["ok"] != false || done["aborted"] != true {
		t.Fatalf("turn.done = %v", done)
	}
	// The chat stays usable and its session valid: the next turn works.
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "fine"})
	c.say(chat, "again")
	if d := c.next("turn.done", nil); d["ok"] != true || d["text"] != "fine" {
		t.Fatalf("turn after abort = %v", d)
	}
}

func TestHostRestartKeepsHistory(t *testing.T) {
	home := t.TempDir()
	provider := llmtest.NewServer(t)
	e := newEnv(t, envOptions{home: home, provider: provider})
	provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__search_mail", `{"query":"train"}`)}},
		llmtest.Reply{Content: "Your train is at 17:05."})
	c := e.dial(token)
	chat := c.createChat("before restart")
	c.say(chat, "when is my train?")
	c.next("turn.done", nil)
	e.close()

	e2 := newEnv(t, envOptions{home: home, provider: provider})
	provider.Enqueue("tier-5", llmtest.Reply{Content: "It is on platform 12."})
	c2 := e2.dial(token)
	c2.send(map[string]any{"type": "chat.open", "chatId": chat, "id": "open"})
	tr := c2.next("chat.transcript", nil)
	entries := tr["entries"].([]any)
	kinds := []string{}
	for _, en := range entries {
		kinds = append(kinds, en.(map[string]any)["kind"].(string))
	}
	if strings.Join(kinds, ",") != "user,tool,assistant" {
		t.Errorf("transcript after restart = %v", kinds)
	}
	c2.say(chat, "which platform?")
	if d := c2.next("turn.done", nil); d["ok"] != true {
		t.Fatalf("turn.done = %v", d)
	}
	// The model saw the whole earlier conversation, tool call and result included.
	reqs := provider.Requests()
	msgs := reqs[len(reqs)-1].Body["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,assistant,user" {
		t.Errorf("history sent after restart = %v", roles)
	}
}

func TestBadInputLeavesOtherClientsAlone(t *testing.T) {
	e := newEnv(t, envOptions{})
	good := e.dial(token)
	good.next("hello", nil)
	bad := e.dial(token)
	bad.next("hello", nil)

	tests := []struct {
		frame string
		code  string
	}{
		{`{not json`, protocol.ErrBadFrame},
		{`{"v":1,"type":"launch.missiles"}`, protocol.ErrUnknownType},
		{`{"v":7,"type":"chat.list"}`, protocol.ErrBadVersion},
		{`{"v":1,"type":"user.message","chatId":"chat_missing","text":"hi"}`, protocol.ErrNotFound},
		{`{"v":1,"type":"user.message","chatId":5}`, protocol.ErrBadFrame},
		{`{"v":1,"type":"approval.respond","approvalId":"nope","decision":"approve"}`, protocol.ErrNotFound},
		{`{"v":1,"type":"user.message","chatId":"x","text":"` + strings.Repeat("a", protocol.MaxMessageChars+1) + `"}`, protocol.ErrTooLarge},
	}
	for _, tc := range tests {
		if err := bad.conn.Write(context.Background(), websocket.MessageText, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		f := bad.next("error", nil)
		if f["code"] != tc.code || f["message"] == "" {
			t.Errorf("%.60s: error = %v, want code %s", tc.frame, f, tc.code)
		}
	}
	// An oversized frame closes only that connection, with 1009.
	big := bytes.Repeat([]byte("x"), protocol.MaxFrameBytes+10)
	bad.conn.Write(context.Background(), websocket.MessageText, big)
	for range bad.frames {
	}
	// The other client still works.
	good.send(map[string]any{"type": "chat.list", "id": "still-here"})
	if f := good.next("chats", nil); f["id"] != "still-here" {
		t.Errorf("good client reply = %v", f)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, envOptions{})
	ws := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws"

	// Wrong token in the first frame: an error frame, then the connection closes.
	c := e.dial("wrong-token")
	if f := c.next("error", nil); f["code"] != protocol.ErrUnauthorized {
		t.Errorf("wrong token: %v", f)
	}
	for range c.frames {
	}

	// Token in the Sec-WebSocket-Protocol header.
	conn, resp, err := websocket.Dial(context.Background(), ws, &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + token}})
	if err != nil {
		t.Fatalf("subprotocol auth: %v", err)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != protocol.Subprotocol {
		t.Errorf("selected subprotocol = %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	_, data, err := conn.Read(context.Background())
	if err != nil || !strings.Contains(string(data), `"hello"`) {
		t.Errorf("first frame = %s, %v", data, err)
	}
	conn.Close(websocket.StatusNormalClosure, "")

	// A wrong header token is refused before the upgrade.
	_, resp, err = websocket.Dial(context.Background(), ws, &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + "nope"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong header token: %v", err)
	}
	// Never from the query string.
	_, resp, err = websocket.Dial(context.Background(), ws+"?token="+token, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("query token: %v %v", resp, err)
	}
	// A foreign browser origin is refused.
	_, resp, err = websocket.Dial(context.Background(), ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: %v", err)
	}
	// Data routes need the token; /health does not.
	for path, want := range map[string]int{"/health": 200, "/usage": 401, "/file/x": 401} {
		r, _ := http.Get(e.srv.URL + path)
		if r.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, r.StatusCode, want)
		}
	}
}

func TestQuickSendGatedToolTimesOutToDeny(t *testing.T) {
	e := newEnv(t, envOptions{approvalTimeout: 200 * time.Millisecond})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", `{"to":"a@b.c","body":"x"}`)}},
		llmtest.Reply{Content: "I could not send it without approval."})
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/quick-send", strings.NewReader(`{"text":"email a@b.c"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		ChatID string `json:"chatId"`
		protocol.TurnResult
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if !out.OK || out.Text != "I could not send it without approval." || out.MessageID == "" || out.ChatID == "" {
		t.Errorf("quick send = %+v", out)
	}
	if got := e.tools.got("mcp__mail__send_email"); len(got) != 0 {
		t.Fatalf("a gated tool ran unattended: %v", got)
	}
	msgs := e.provider.Requests()[1].Body["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any)["content"]; !strings.Contains(last.(string), "timed out") {
		t.Errorf("model saw %v", last)
	}
	if h := e.provider.Requests()[0].Header.Get("X-Usage-Action"); h != "quick-send" {
		t.Errorf("quick send attribution = %q", h)
	}
}

func TestPendingApprovalSurvivesReconnect(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", `{"to":"a@b.c","body":"x"}`)}},
		llmtest.Reply{Content: "Sent."})
	c := e.dial(token)
	chat := c.createChat("reload")
	c.say(chat, "send it")
	req := c.next("approval.request", nil)
	// While the turn waits, the agent session already holds the question:
	// a host that died now would resume with it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sess, err := e.store.Session(context.Background(), chat)
		if err == nil && len(sess) > 0 && strings.Contains(sess[len(sess)-1].Content, "send it") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session during the approval wait: %+v, %v", sess, err)
		}
	}
	c.conn.Close(websocket.StatusNormalClosure, "page reload")

	c2 := e.dial(token)
	c2.send(map[string]any{"type": "chat.open", "chatId": chat})
	tr := c2.next("chat.transcript", nil)
	pending := tr["pendingApprovals"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["approvalId"] != req["approvalId"] || tr["running"] != true {
		t.Fatalf("transcript after reload = %v", tr)
	}
	c2.send(map[string]any{"type": "approval.respond", "approvalId": req["approvalId"], "decision": "approve"})
	if d := c2.next("turn.done", nil); d["ok"] != true || d["text"] != "Sent." {
		t.Errorf("turn.done = %v", d)
	}
	if len(e.tools.got("mcp__mail__send_email")) != 1 {
		t.Error("approved tool did not run")
	}
}

// TestClosedBrowserOnPendingApprovalSavesEverything: the user closes the
// page while a card waits; the approval resolves as no_channel after the
// grace period, the model tries again with nobody connected (no card can be
// shown) and gives up. Every part of the chat is saved: nothing logs "could
// not save part of a chat".
func TestClosedBrowserOnPendingApprovalSavesEverything(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, envOptions{disconnectGrace: 200 * time.Millisecond,
		logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const args = `{"to":"a@b.c","body":"x"}`
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", args)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c2", "mcp__mail__send_email", args)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c3", "mcp__mail__send_email", args)}},
		llmtest.Reply{Content: "Nobody is there to approve."})
	c := e.dial(token)
	chat := c.createChat("closed")
	c.say(chat, "send it")
	c.next("approval.request", nil)
	c.conn.Close(websocket.StatusGoingAway, "tab closed")

	var approvals []map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tr, err := e.store.Transcript(context.Background(), chat)
		if err != nil {
			t.Fatal(err)
		}
		approvals = approvals[:0]
		final := false
		for _, en := range tr {
			var d map[string]any
			json.Unmarshal(en.Data, &d)
			switch en.Kind {
			case "approval":
				approvals = append(approvals, d)
			case "assistant":
				final = final || d["text"] == "Nobody is there to approve."
			}
		}
		if final && !e.host.Manager().Running(chat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not finish: %d entries", len(tr))
		}
	}
	if strings.Contains(logs.String(), "could not save") {
		t.Errorf("host logged failed writes:\n%s", logs.String())
	}
	if len(approvals) != 3 {
		t.Fatalf("transcript has %d approval cards, want 3 (one per call): %v", len(approvals), approvals)
	}
	for _, a := range approvals {
		if a["status"] != "no_channel" {
			t.Errorf("approval card = %v, want status no_channel", a)
		}
	}
	if got := e.tools.got("mcp__mail__send_email"); len(got) != 0 {
		t.Errorf("the tool ran without approval: %v", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the host's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUploadAndFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "../../etc/passwd.txt")
	fw.Write([]byte("hello file"))
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/upload", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var f protocol.File
	json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if resp.StatusCode != 201 || f.Token == "" || f.Name != "passwd.txt" || f.Size != 10 {
		t.Fatalf("upload = %d %+v", resp.StatusCode, f)
	}
	get := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return r, string(b)
	}
	if r, b := get("/file/" + f.Token); r.StatusCode != 200 || b != "hello file" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("file = %d %q", r.StatusCode, b)
	}
	for _, p := range []string{"/file/..%2Fchats.db", "/file/unknown", "/file/" + strings.Repeat("a", 32)} {
		if r, _ := get(p); r.StatusCode != 404 {
			t.Errorf("GET %s = %d, want 404", p, r.StatusCode)
		}
	}
	// The file travels with a message as a chip.
	e.provider.Enqueue("tier-5", llmtest.Reply{Content: "Got the file."})
	c := e.dial(token)
	chat := c.createChat("file")
	c.send(map[string]any{"type": "user.message", "chatId": chat, "text": "read this", "files": []string{f.Token}})
	saved := c.next("user.message.saved", nil)
	if files := saved["files"].([]any); len(files) != 1 || files[0].(map[string]any)["token"] != f.Token {
		t.Errorf("saved = %v", saved)
	}
	c.next("turn.done", nil)
	if r, _ := get("/usage?period=bogus"); r.StatusCode != 400 {
		t.Errorf("bad period = %d", r.StatusCode)
	}
	if r, b := get("/usage?period=7d"); r.StatusCode != 200 || !strings.Contains(b, `"total"`) {
		t.Errorf("usage = %d %s", r.StatusCode, b)
	}
}

func TestAskUserQuestion(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "ask_user", `{"question":"Which train?","options":["17:05","18:05"]}`)}},
		llmtest.Reply{Content: "Watching the 18:05."})
	c := e.dial(token)
	chat := c.createChat("q")
	c.say(chat, "watch my train")
	q := c.next("question", nil)
	if q["text"] != "Which train?" || len(q["options"].([]any)) != 2 {
		t.Fatalf("question = %v", q)
	}
	c.send(map[string]any{"type": "question.answer", "questionId": q["questionId"], "answer": "18:05"})
	if d := c.next("turn.done", nil); d["ok"] != true {
		t.Fatalf("turn.done = %v", d)
	}
	msgs := e.provider.Requests()[1].Body["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any)["content"]; last != "The user answered: 18:05" {
		t.Errorf("model saw %v", last)
	}
	c.send(map[string]any{"type": "question.answer", "questionId": q["questionId"], "answer": "again"})
	if f := c.next("error", nil); f["code"] != protocol.ErrNotFound {
		t.Errorf("second answer = %v", f)
	}
}

func TestTurnIsAuditedAndRedacted(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.provider.Enqueue("tier-5",
		llmtest.Reply{ToolCalls: []llm.ToolCall{call("c1", "mcp__mail__send_email", `{"to":"a@b.c","body":"x"}`)}},
		llmtest.Reply{Content: "Sent."})
	c := e.dial(token)
	chat := c.createChat("audit")
	c.say(chat, "send it, my password=hunter2-secret and key sk-live0123456789abcdef")
	req := c.next("approval.request", nil)
	c.send(map[string]any{"type": "approval.respond", "approvalId": req["approvalId"], "decision": "approve"})
	c.next("turn.done", nil)
	e.audit.Flush(context.Background())

	r, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/audit?chat="+chat+"&limit=100", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /audit = %d %s", resp.StatusCode, body)
	}
	for _, typ := range []string{"chat.message", "tool.decision", "approval.request", "approval.response", "tool.result"} {
		if !strings.Contains(string(body), `"type":"`+typ+`"`) {
			t.Errorf("audit lacks %s", typ)
		}
	}
	if strings.Contains(string(body), "hunter2-secret") || strings.Contains(string(body), "sk-live0123456789abcdef") {
		t.Errorf("audit stored a secret: %s", body)
	}
	// Without the token the audit is closed.
	if resp, _ := http.Get(e.srv.URL + "/audit"); resp.StatusCode != 401 {
		t.Errorf("GET /audit without token = %d", resp.StatusCode)
	}
}
