package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/protocol"
)

// TestServeSendEmailApprovedWithEdits runs one chat turn through the whole
// product (`steward serve`: gateway, host, MCP bridge, the real mail
// connector process, OpenSMTPD): the model proposes send_email, the
// approval card carries the preflighted message, the user approves with an
// edited subject, the server receives the edited subject, the tool card
// shows the journal state and links to the journal route, and a
// confirmation pass later confirms it.
func TestServeSendEmailApprovedWithEdits(t *testing.T) {
	srv := smtptest.StartOpenSMTPD(t)
	home, env := writesHome(t, srv.Port)
	up := llmtest.NewServer(t)
	writeGatewayConfig(t, home, up.URL)
	args, _ := json.Marshal(map[string]any{"to": []string{"Bob <bob@example.org>"}, "subject": "Draft subject", "body": "Hello Bob,\nsee you at 10."})
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "m1", Function: llm.FunctionCall{Name: "mcp__mail__send_email", Arguments: string(args)}}}},
		llmtest.Reply{Content: "Sent to Bob."})

	base, token := runServe(t, env, home)
	get := func(path string, v any) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(v)
		return resp.StatusCode
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Services []struct{ Name, State string }
		}
		get("/system/status", &st)
		ready := false
		for _, s := range st.Services {
			ready = ready || s.Name == "mcp:mail" && s.State == "ok"
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mail connector did not start: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer wcancel()
	ws, _, err := websocket.Dial(wctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + token}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close(websocket.StatusNormalClosure, "")
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(wctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "mail"})
	var result protocol.ToolEvent
	var chatID string
	var structured struct {
		Kind, OperationID, State, MessageID string
	}
loop:
	for {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			if chatID == "" {
				chatID = f["chat"].(map[string]any)["id"].(string)
				send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: "tell Bob I'll be there at 10"})
			}
		case protocol.TypeApprovalRequest:
			var req protocol.ApprovalRequest
			json.Unmarshal(data, &req)
			var proposal map[string]any
			json.Unmarshal(req.Args, &proposal)
			preview, _ := proposal["preview"].(map[string]any)
			if preview == nil || preview["from"] != "me@example.com" || preview["account"] != "personal" ||
				preview["subject"] != "Draft subject" || !strings.Contains(preview["via"].(string), "smtp 127.0.0.1") {
				t.Fatalf("the approval card lacks the preflighted message: %s", req.Args)
			}
			if to, _ := proposal["to"].([]any); len(to) != 1 || to[0] != "bob@example.org" {
				t.Fatalf("recipients not normalised in the card: %s", req.Args)
			}
			proposal["subject"] = "Edited subject"
			edited, _ := json.Marshal(proposal)
			send(protocol.ApprovalRespond{Envelope: protocol.Env(protocol.TypeApprovalRespond, ""), ApprovalID: req.ApprovalID,
				Decision: protocol.DecisionApprove, Args: edited})
		case protocol.TypeToolResult, protocol.TypeToolError:
			json.Unmarshal(data, &result)
		case protocol.TypeTurnDone:
			if f["ok"] != true {
				t.Fatalf("turn.done = %v", f)
			}
			break loop
		}
	}
	if result.Status != "done" || result.Kind != "write_operation" {
		t.Fatalf("tool card %+v", result.ToolCard)
	}
	// The host hands the client the connector's structured content.
	if err := json.Unmarshal(result.Data, &structured); err != nil {
		t.Fatalf("tool card data %s: %v", result.Data, err)
	}
	if structured.State != "script_returned" || !strings.HasPrefix(structured.OperationID, "wop_") {
		t.Fatalf("the chat does not show the journal state: %s", result.Data)
	}
	if !strings.Contains(string(result.EffectiveArgs), "Edited subject") {
		t.Fatalf("effective args %s", result.EffectiveArgs)
	}
	got := srv.WaitMessages(t, 1)
	if got[0].Subject != "Edited subject" || got[0].MessageID != structured.MessageID {
		t.Fatalf("the server received %q (%s), want the edited subject", got[0].Subject, got[0].MessageID)
	}

	// The journal route the card links to, then a confirmation pass.
	var op struct {
		State   string
		Meaning string
		Origin  string
		Input   struct{ Subject string }
	}
	if code := get("/writeops/"+structured.OperationID, &op); code != 200 || op.State != "script_returned" || op.Input.Subject != "Edited subject" ||
		op.Origin != "chat:"+chatID {
		t.Fatalf("GET /writeops/%s = %d %+v", structured.OperationID, code, op)
	}
	runSteward(t, home, "mail", "reconcile")
	runSteward(t, home, "writeops", "confirm-mail")
	if get("/writeops/"+structured.OperationID, &op); op.State != "confirmed" || op.Meaning != "observed in the mirror or index" {
		t.Fatalf("after confirmation %+v", op)
	}
}
