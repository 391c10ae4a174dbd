package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/templates"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Binding: under the Git workflow a writer binds only for an agent
// declared with it, and only while every provider it would reach is the
// one the compiled source policy recorded at declaration. A program
// swapped behind the declared path, or an MCP server the declaration did
// not have, refuses the binding, naming the tool and the provider.
func TestGitWriterProvidersAtBinding(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	script := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	declared, other := script("mcp-declared"), script("mcp-other")
	link := filepath.Join(dir, "mcp-fs")
	if err := os.Symlink(declared, link); err != nil {
		t.Fatal(err)
	}
	tpl, err := templates.Lookup("classic-git")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tpl.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg.MCPServers = map[string]config.MCPServer{"fs": {Command: link}}
	set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: tpl.Files()})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(agent string, servers map[string]config.MCPServer, names ...string) error {
		env := &tools.Env{Root: dir, StateDir: filepath.Join(dir, ".saivage"), Workflows: set, Config: cfg,
			Caller: tools.Caller{Agent: agent, Card: "project", Node: "execute"}, MCP: tools.NewMCPServers(servers, dir, nil)}
		_, err := tools.Build(names, env)
		return err
	}
	refused := func(err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("binding was admitted, want a refusal")
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q does not say %q", err, w)
			}
		}
	}

	if err := bind("executor", cfg.MCPServers, "run_command", "wait_process", "mcp_tool_call", "mcp_server_control", "read"); err != nil {
		t.Fatalf("the declared surface does not bind: %v", err)
	}
	refused(bind("reviewer", cfg.MCPServers, "read", "run_command"), "bind run_command for agent reviewer", "does not declare this writer")
	refused(bind("executor", map[string]config.MCPServer{"fs": {Command: link}, "extra": {Command: other}}, "mcp_tool_call"),
		"bind mcp_tool_call for agent executor", `mcp:extra=stdio:"`+other+`"`, "not one the Git workflow's source policy declared")
	refused(bind("executor", map[string]config.MCPServer{"fs": {Command: "npx"}}, "mcp_server_control"),
		"bind mcp_server_control", `MCP server "fs" has no canonical provider identity`)
	// The program behind the declared path changes after declaration.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	refused(bind("executor", cfg.MCPServers, "mcp_tool_call"), `mcp:fs=stdio:"`+other+`"`, `declared (mcp:fs=stdio:"`+declared+`")`)
	if err := bind("executor", cfg.MCPServers, "run_command", "read"); err != nil {
		t.Errorf("writers that reach no MCP server still bind: %v", err)
	}
	// With the workflow off nothing is checked.
	off, err := templates.Lookup("classic")
	if err != nil {
		t.Fatal(err)
	}
	offCfg, _ := off.Config()
	offSet, err := workflow.Compile(context.Background(), offCfg, workflow.Options{Prompts: off.Files()})
	if err != nil {
		t.Fatal(err)
	}
	env := &tools.Env{Root: dir, Workflows: offSet, Config: offCfg, Caller: tools.Caller{Agent: "reviewer", Card: "project"},
		MCP: tools.NewMCPServers(map[string]config.MCPServer{"x": {Command: "npx"}}, dir, nil)}
	if _, err := tools.Build([]string{"run_command", "mcp_tool_call"}, env); err != nil {
		t.Errorf("OFF binding refused: %v", err)
	}
}
