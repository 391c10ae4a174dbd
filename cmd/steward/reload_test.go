package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentstack/agentstack/llm/llmtest"
)

// TestSIGHUPReloadsPolicyAndKeepsTheOldOnError runs serve, changes
// policy.yaml and sends SIGHUP: a broken file keeps the rules in force (the
// System page's tool inventory shows them) and logs why; a valid one
// replaces them without a restart. A broken gateway.yaml keeps the gateway.
func TestSIGHUPReloadsPolicyAndKeepsTheOldOnError(t *testing.T) {
	up := llmtest.NewServer(t)
	up.Enqueue("scripted", llmtest.Reply{Content: "ok"})
	vars := map[string]string{"STEWARD_SCHEDULER": "off"}
	env, _, logs := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	writeGatewayConfig(t, home, up.URL)
	policyPath := filepath.Join(home, "policy.yaml")
	os.WriteFile(policyPath, []byte("deny: [mcp__shell__find_files]\n"), 0o600)
	base, token := runServe(t, env, home)
	decision := func() string {
		var st struct {
			Tools []struct{ Name, Decision string }
		}
		getJSON(t, base+"/system/status", token, &st)
		for _, tool := range st.Tools {
			if tool.Name == "mcp__shell__find_files" {
				return tool.Decision
			}
		}
		return ""
	}
	waitFor(t, func() bool { return decision() == "deny" })
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	os.WriteFile(policyPath, []byte("allow: [mcp__shell__find_files\n"), 0o600) // broken YAML
	os.WriteFile(filepath.Join(home, "gateway.yaml"), []byte("providers: {x: {bogus: 1}}\n"), 0o600)
	hup()
	waitFor(t, func() bool {
		return strings.Count(logs.String(), "SIGHUP: kept the previous configuration") >= 2
	})
	if d := decision(); d != "deny" {
		t.Errorf("after a broken policy.yaml the decision is %q, want the old deny", d)
	}
	if !strings.Contains(logs.String(), "policy.yaml") {
		t.Errorf("the log does not name the file:\n%s", logs)
	}
	// The gateway still answers with the old configuration.
	chatTurn(t, base, token, "still works", false)

	os.WriteFile(policyPath, []byte("allow: [mcp__shell__find_files]\n"), 0o600)
	hup()
	waitFor(t, func() bool { return decision() == "allow" })
	if !strings.Contains(logs.String(), "SIGHUP: reloaded") {
		t.Errorf("no reload log line:\n%s", logs)
	}

	// mcp.json: a new server starts on SIGHUP; a broken file keeps it; a
	// removed one stops. Steward's own connectors keep running throughout.
	tools := func() []string {
		var st struct {
			Tools []struct{ Name string }
		}
		getJSON(t, base+"/system/status", token, &st)
		var names []string
		for _, tool := range st.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	self, _ := os.Executable()
	mcpPath := filepath.Join(home, "mcp.json")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"mine": map[string]any{"command": self, "args": []string{testMCPServerArg, t.TempDir(), "hello"}}}})
	os.WriteFile(mcpPath, cfg, 0o600)
	hup()
	waitFor(t, func() bool { return slices.Contains(tools(), "mcp__mine__hello") })
	os.WriteFile(mcpPath, []byte(`{"mcpServers": {"mine": {"comand": "x"}}}`), 0o600)
	hup()
	waitFor(t, func() bool { return strings.Count(logs.String(), "SIGHUP: kept the previous configuration") >= 3 })
	if !slices.Contains(tools(), "mcp__mine__hello") {
		t.Fatal("a broken mcp.json stopped the running server")
	}
	os.WriteFile(mcpPath, []byte(`{"mcpServers": {}}`), 0o600)
	hup()
	waitFor(t, func() bool { return !slices.Contains(tools(), "mcp__mine__hello") })
	if !slices.Contains(tools(), "mcp__shell__find_files") {
		t.Fatal("Steward's own connector stopped on reload")
	}
}
