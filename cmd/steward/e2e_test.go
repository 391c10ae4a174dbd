package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/host"
	"github.com/agentstack/agentstack/steward/protocol"
)

// TestServeTurnUsesRealConnector runs the whole product as `steward serve`
// does — gateway, host, MCP bridge and Steward's own connector processes —
// and drives a turn over the WebSocket in which the model calls the shell
// connector's find_files tool.
func TestServeTurnUsesRealConnector(t *testing.T) {
	up := llmtest.NewServer(t)
	vars := map[string]string{}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	files := t.TempDir()
	os.WriteFile(filepath.Join(files, "invoice-2026-11.pdf"), []byte("%PDF-1.4"), 0o600)
	os.WriteFile(filepath.Join(files, "notes.txt"), []byte("x"), 0o600)
	args, _ := json.Marshal(map[string]any{"root": files, "name": "invoice"})
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "mcp__shell__find_files", Arguments: string(args)}}}},
		llmtest.Reply{Content: "Found your invoice."})

	base, token := runServe(t, env, home)

	// The System page reports the connector once it is ready.
	waitFor(t, func() bool {
		for _, s := range systemServices(base, token) {
			if s.Name == "mcp:shell" && s.State == "ok" {
				return true
			}
		}
		return false
	})

	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	ws, send := dialHost(t, wctx, base, token)
	send(protocol.ChatCreate{Envelope: protocol.Env(protocol.TypeChatCreate, "c"), Title: "files"})
	var chatID string
	var result protocol.ToolEvent
	for {
		_, data, err := ws.Read(wctx)
		if err != nil {
			t.Fatalf("read: %v\nlogs:\n%s", err, logs)
		}
		var f map[string]any
		json.Unmarshal(data, &f)
		switch f["type"] {
		case protocol.TypeChatUpdated:
			chatID = f["chat"].(map[string]any)["id"].(string)
			send(protocol.UserMessage{Envelope: protocol.Env(protocol.TypeUserMessage, ""), ChatID: chatID, Text: "where is my invoice?"})
		case protocol.TypeToolResult, protocol.TypeToolError:
			json.Unmarshal(data, &result)
		case protocol.TypeTurnDone:
			if f["ok"] != true || f["text"] != "Found your invoice." {
				t.Fatalf("turn.done = %v", f)
			}
			if result.Status != "done" || !strings.Contains(result.Content, "invoice-2026-11.pdf") || strings.Contains(result.Content, "notes.txt") {
				t.Fatalf("find_files through the bridge = %+v", result.ToolCard)
			}
			// The model saw the connector's answer.
			msgs := up.Requests()[1].Body["messages"].([]any)
			if last := msgs[len(msgs)-1].(map[string]any)["content"].(string); !strings.Contains(last, "invoice-2026-11.pdf") {
				t.Errorf("model saw %q", last)
			}
			return
		}
	}
}

// systemServices returns the services of the host's System page, or
// nothing when it does not answer.
func systemServices(base, token string) []host.ServiceStatus {
	req, _ := http.NewRequest(http.MethodGet, base+"/system/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st struct{ Services []host.ServiceStatus }
	json.NewDecoder(resp.Body).Decode(&st)
	return st.Services
}

// runServe runs steward serve for env in the background until the test
// ends and returns the host's base URL and auth token once it has one.
func runServe(t *testing.T, env *cliEnv, home string) (base, token string) {
	t.Helper()
	cfg, _ := env.Config()
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hostLn := loopback(t)
	var gwLn net.Listener // none when GATEWAY_BASE_URL names another gateway, as serveListeners does
	if sc.gatewayBaseURL == "" {
		gwLn = loopback(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, env, sc, hostLn, gwLn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	// The host creates the file, then writes the token: wait for the token.
	var tok []byte
	waitFor(t, func() bool {
		tok, _ = os.ReadFile(filepath.Join(home, "auth-token"))
		return len(strings.TrimSpace(string(tok))) >= 16
	})
	return "http://" + hostLn.Addr().String(), strings.TrimSpace(string(tok))
}

// dialHost opens the host's WebSocket with token and returns it with a
// function that sends one JSON frame.
func dialHost(t *testing.T, ctx context.Context, base, token string) (*websocket.Conn, func(any)) {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
		Subprotocols: []string{protocol.Subprotocol, protocol.TokenSubprotocolPrefix + token}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close(websocket.StatusNormalClosure, "") })
	return ws, func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
}
