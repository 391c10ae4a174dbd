package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/voice/ringbacktest"
)

// testRingbackArg makes the test binary the scripted Ringback MCP server.
const testRingbackArg = "__test-ringback"

func TestVoiceSettings(t *testing.T) {
	for _, c := range []struct {
		vars            map[string]string
		server          bool
		unavailable, er string
	}{
		{vars: map[string]string{}, unavailable: "STEWARD_VOICE_TRANSPORT=ringback"},
		{vars: map[string]string{"STEWARD_VOICE_TRANSPORT": "sip"}, er: `STEWARD_VOICE_TRANSPORT="sip": the only transport is ringback`},
		{vars: map[string]string{"STEWARD_VOICE_TRANSPORT": "streamcore"}, er: "reserved"},
		{vars: map[string]string{"STEWARD_VOICE_TRANSPORT": "ringback"}, er: "needs STEWARD_RINGBACK_LAUNCHER"},
		{vars: map[string]string{"STEWARD_VOICE_TRANSPORT": "ringback", "STEWARD_RINGBACK_LAUNCHER": "/opt/ringback/launch"}, server: true},
	} {
		env, _, _ := testEnv(t, c.vars)
		cfg, _ := env.Config()
		s, off, err := voiceSettings(cfg)
		if c.er != "" {
			if err == nil || !strings.Contains(err.Error(), c.er) {
				t.Errorf("%v: error %v, want %q", c.vars, err, c.er)
			}
			continue
		}
		if err != nil || (s != nil) != c.server || !strings.Contains(off, c.unavailable) {
			t.Errorf("%v: server %+v, unavailable %q, err %v", c.vars, s, off, err)
		}
		if s != nil && (s.Name != "voice" || s.Command != "/opt/ringback/launch") {
			t.Errorf("voice server %+v", s)
		}
	}
}

// TestServeQuickCall runs steward serve with the voice transport pointing at
// the scripted Ringback server: /quick-call starts a call whose control turn
// dials through the bridge, and /voice/status reports its end.
func TestServeQuickCall(t *testing.T) {
	dir := t.TempDir()
	logPath, scriptPath, launcher := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "script.json"), filepath.Join(dir, "ringback")
	b, _ := json.Marshal(ringbacktest.Script{Log: logPath, Calls: []ringbacktest.Call{{Heard: []string{"thanks"}}}})
	os.WriteFile(scriptPath, b, 0o600)
	self, _ := os.Executable()
	os.WriteFile(launcher, []byte(fmt.Sprintf("#!/bin/sh\nexec %q %s %q\n", self, testRingbackArg, scriptPath)), 0o755)

	up := llmtest.NewServer(t)
	vars := map[string]string{"STEWARD_VOICE_TRANSPORT": "ringback", "STEWARD_RINGBACK_LAUNCHER": launcher}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	up.Enqueue("scripted",
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "mcp__voice__call_start", Arguments: `{"openingLine":"Hi"}`}}}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c2", Function: llm.FunctionCall{Name: "mcp__voice__call_end", Arguments: `{}`}}}},
		llmtest.Reply{Content: "Done."})
	base, token := runServe(t, env, home)

	do := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := do(http.MethodPost, "/quick-call", `{"requestId":"shortcut"}`)
	if code != http.StatusAccepted || out["chatId"] == "" {
		t.Fatalf("quick-call = %d %v\nlogs:\n%s", code, out, logs)
	}
	var st map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, st = do(http.MethodGet, "/voice/status", "")
		if st["active"] == false {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call never ended: %v", st)
		}
	}
	if st["outcome"] != "completed" || st["chatId"] != out["chatId"] {
		t.Fatalf("status %v", st)
	}
	lines, _ := ringbacktest.ReadLog(logPath)
	var tools []string
	for _, l := range lines {
		if l.Tool != "call_status" {
			tools = append(tools, l.Tool)
		}
	}
	if strings.Join(tools, ",") != "call_start,call_end" {
		t.Fatalf("voice server saw %v", tools)
	}
}
