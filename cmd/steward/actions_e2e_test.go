package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/actions"
	"github.com/agentstack/agentstack/steward/connectors/mail/outbox/smtptest"
	"github.com/agentstack/agentstack/steward/connectors/mail/threads"
	"github.com/agentstack/agentstack/steward/protocol"
)

// runScan runs `steward actions scan --json` as the scheduler does, with
// the model endpoint given by GATEWAY_BASE_URL.
func runScan(t *testing.T, home, gateway string, extra ...string) (actions.ScanReport, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "actions", "scan", "--json")
	cmd.Env = append(append(childEnv(home), "GATEWAY_BASE_URL="+gateway), extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep actions.ScanReport
	if code == 0 {
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("scan output %q: %v\n%s", out, err, stderr.String())
		}
	}
	return rep, code
}

func TestActionsScanNotConfigured(t *testing.T) {
	vars := map[string]string{}
	testEnv(t, vars)
	os.MkdirAll(vars["STEWARD_HOME"], 0o700)
	if _, code := runScan(t, vars["STEWARD_HOME"], "http://127.0.0.1:1/v1"); code != 3 {
		t.Fatalf("exit %d, want 3 (not configured)", code)
	}
}

// TestServeActionFromMailToApprovedReply runs the whole path: the scan job
// (a child process, scripted model, the real mail connector for its context
// read) turns a question into an item with a prepared reply; in a chat the
// model calls execute_action_step; the reply is a gated mail write whose
// approval card carries the prepared message; approved, it goes through the
// write journal to OpenSMTPD and the item is done.
func TestServeActionFromMailToApprovedReply(t *testing.T) {
	srv := smtptest.StartOpenSMTPD(t)
	home, env := writesHome(t, srv.Port)
	up := llmtest.NewServer(t)
	writeGatewayConfig(t, home, up.URL)

	// First activation seeds the existing mail as seen, without a model call.
	if rep, code := runScan(t, home, up.URL); code != 0 || rep.NewMessages != 0 || len(up.Requests()) != 0 {
		t.Fatalf("first scan %d %+v, %d model calls", code, rep, len(up.Requests()))
	}
	msg := fmt.Sprintf("From: Anna <anna@partner.example>\r\nTo: me@example.com\r\nSubject: Thursday\r\nMessage-ID: <anna1@partner.example>\r\n"+
		"Date: %s\r\n\r\nHi! Can we meet on Thursday at 10?\r\n", time.Now().Add(-time.Hour).Format(time.RFC1123Z))
	os.WriteFile(filepath.Join(home, "Maildir", "new", "2.anna"), []byte(msg), 0o600)
	runSteward(t, home, "mail", "reconcile")
	r, err := threads.Open(context.Background(), filepath.Join(home, "mail", "mail.db"))
	if err != nil {
		t.Fatal(err)
	}
	refs, _ := r.MessagesSince(context.Background(), 0, time.Time{}, 0)
	r.Close()
	annaID := fmt.Sprint(refs[len(refs)-1].ID)

	analysis, _ := json.Marshal(map[string]any{"actionable": true, "kind": "reply-needed", "title": "Answer Anna about Thursday",
		"summary": "Anna asks to meet on Thursday at 10", "priority": "high",
		"reads": []any{map[string]any{"tool": "mcp__mail__search_mail", "args": map[string]any{"query": "Thursday"}}}})
	plan, _ := json.Marshal(map[string]any{"alternatives": []any{map[string]any{"summary": "Accept", "confidence": 0.9, "steps": []any{
		map[string]any{"label": "Reply yes", "type": "tool", "tool": "mcp__mail__reply_email", "args": map[string]any{"messageId": annaID, "body": "Thursday at 10 works."}}}}}})
	up.Enqueue("tier-5", llmtest.Reply{Content: string(analysis)}, llmtest.Reply{Content: string(plan)})
	rep, code := runScan(t, home, up.URL)
	if code != 0 || rep.Created != 1 || rep.Reads != 1 || rep.ModelCalls != 2 {
		t.Fatalf("scan %d %+v", code, rep)
	}
	for _, req := range up.Requests() {
		if req.Header.Get(llm.HeaderUsageService) != "action-center" || req.Header.Get(llm.HeaderUsageAction) != "scan" {
			t.Fatalf("model call attributed %q / %q", req.Header.Get(llm.HeaderUsageService), req.Header.Get(llm.HeaderUsageAction))
		}
	}
	// Planning saw the real mail connector's answer to its search.
	if _, user := actionsMessages(up.Requests()[1]); !strings.Contains(user, "mcp__mail__search_mail") || !strings.Contains(user, "anna@partner.example") {
		t.Fatalf("the plan prompt lacks the context read: %.600s", user)
	}
	// Nothing was sent by the scan.
	if n := len(srv.Messages(t)); n != 0 {
		t.Fatalf("the scan sent %d messages", n)
	}

	execArgs, _ := json.Marshal(map[string]any{"id": 1})
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "x1", Function: llm.FunctionCall{Name: actions.ExecuteToolName, Arguments: string(execArgs)}}}},
		llmtest.Reply{Content: "Replied to Anna."})
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
	var list actions.ListResult
	if code := get("/actions", &list); code != 200 || len(list.Items) != 1 || list.CountsVisible[actions.StatusNew] != 1 {
		t.Fatalf("GET /actions %d %+v", code, list)
	}
	waitConnector(t, get, "mcp:mail")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ws, send := dialHost(t, ctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "action"})
	var chatID string
	cards := 0
loop:
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			if chatID == "" {
				chatID = f["chat"].(map[string]any)["id"].(string)
				send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: "do the Thursday action"})
			}
		case protocol.TypeApprovalRequest:
			cards++
			var req protocol.ApprovalRequest
			json.Unmarshal(data, &req)
			if req.Tool != "mcp__mail__reply_email" || !strings.Contains(string(req.Args), "Thursday at 10 works.") ||
				!strings.Contains(string(req.Args), "anna@partner.example") {
				t.Fatalf("approval card %s %s", req.Tool, req.Args)
			}
			send(protocol.ApprovalRespond{Envelope: protocol.Env(protocol.TypeApprovalRespond, ""), ApprovalID: req.ApprovalID, Decision: protocol.DecisionApprove})
		case protocol.TypeTurnDone:
			if f["ok"] != true {
				t.Fatalf("turn.done %v", f)
			}
			break loop
		}
	}
	if cards != 1 {
		var item actions.Item
		get("/actions/1", &item)
		msgs, _ := up.Requests()[len(up.Requests())-1].Body["messages"].([]any)
		t.Fatalf("%d approval cards, want exactly the reply's; item diagnostics %q; the tool result the model saw: %.2000v", cards, item.Diagnostics, msgs[len(msgs)-1])
	}
	got := srv.WaitMessages(t, 1)
	if !strings.Contains(got[0].Subject, "Thursday") {
		t.Fatalf("sent %+v", got[0])
	}
	var item actions.Item
	if get("/actions/1", &item); item.Status != actions.StatusDone || len(item.Diagnostics) != 1 || !strings.Contains(item.Diagnostics[0], "(ran)") {
		t.Fatalf("item after execution %+v", item)
	}
	var ops struct {
		Operations []struct{ Kind, State string }
	}
	if get("/writeops", &ops); len(ops.Operations) != 1 {
		t.Fatalf("write journal %+v", ops)
	}
}

func actionsMessages(req llmtest.Request) (system, user string) {
	msgs, _ := req.Body["messages"].([]any)
	for _, m := range msgs {
		mm := m.(map[string]any)
		switch mm["role"] {
		case "system":
			system, _ = mm["content"].(string)
		case "user":
			user, _ = mm["content"].(string)
		}
	}
	return
}

// waitConnector waits until the System page reports the connector ok.
func waitConnector(t *testing.T, get func(string, any) int, name string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var st struct {
			Services []struct{ Name, State string }
		}
		get("/system/status", &st)
		for _, s := range st.Services {
			if s.Name == name && s.State == "ok" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %+v", name, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
