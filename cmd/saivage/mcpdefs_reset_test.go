package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// TestResetKeepsDynamicMCPDefinitions: servers registered at runtime
// (.saivage/mcp-servers.json) survive saivage reset byte for byte, reset's
// report lists the file among what it keeps, and after the reset they are
// loaded again as dynamic definitions that are not started.
func TestResetKeepsDynamicMCPDefinitions(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"SAIVAGE_ROOT": dir}
	if code, _, errs := runCLI(t, vars, "init"); code != 0 {
		t.Fatal(errs)
	}
	sd := filepath.Join(dir, ".saivage")
	path := filepath.Join(sd, tools.MCPDefinitionsFile)
	m := tools.NewMCPServers(nil, dir, nil)
	if err := m.EnableDefinitions(path, state.New(state.Options{})); err != nil {
		t.Fatal(err)
	}
	if err := m.Register("docs", tools.MCPDefinition{Transport: "http", URL: "http://127.0.0.1:9/mcp"}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	before, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(before), `"docs"`) {
		t.Fatalf("registered file = %q, %v", before, err)
	}

	code, out, _ := runCLI(t, vars, "reset")
	if code != 1 || !strings.Contains(out, tools.MCPDefinitionsFile) {
		t.Fatalf("reset report = %d %q", code, out)
	}
	if code, out, errs := runCLI(t, vars, "reset", "--yes"); code != 0 || !strings.Contains(out, "fresh project") {
		t.Fatalf("reset = %d %q %q", code, out, errs)
	}
	after, err := os.ReadFile(path)
	if err != nil || string(after) != string(before) {
		t.Fatalf("after reset = %q, %v; before %q", after, err, before)
	}
	m = tools.NewMCPServers(nil, dir, nil)
	defer m.Close()
	if err := m.EnableDefinitions(path, state.New(state.Options{})); err != nil {
		t.Fatal(err)
	}
	s := m.Servers()
	if len(s) != 1 || s[0].Name != "docs" || s[0].Source != "dynamic" || s[0].State != "not_started" || s[0].Autostart {
		t.Fatalf("servers after reset = %+v", s)
	}
}
