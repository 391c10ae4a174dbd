package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/workflow"
)

func classicGit(t *testing.T) (*config.Config, fs.FS) {
	t.Helper()
	return templateConfig(t, "classic-git")
}

// executable writes a runnable script and returns its path.
func executable(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Declaration: under the Git workflow every writer an agent selects needs
// a canonical provider identity; an MCP server whose program is not named
// exactly is refused at config validation, naming the tool, the server and
// why. The same declarations compile with the workflow off.
func TestGitWriterProvidersAtDeclaration(t *testing.T) {
	dir := t.TempDir()
	prog := executable(t, dir, "mcp-fs")
	link := filepath.Join(dir, "mcp-link")
	if err := os.Symlink(prog, link); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	executor := func(cfg *config.Config) string {
		i := slices.Index(cfg.Agents["executor"].Tools, "mcp_tool_call")
		return fmt.Sprintf("agents.executor.tools[%d]", i)
	}
	for _, tc := range []struct {
		name    string
		server  config.MCPServer
		wantMsg string
	}{
		{"bare program name", config.MCPServer{Command: "npx", Args: []string{"-y", "server-fs"}}, `"npx" is not an absolute path`},
		{"missing program", config.MCPServer{Command: filepath.Join(dir, "absent")}, "cannot be resolved"},
		{"not executable", config.MCPServer{Command: notExec}, "is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, files := classicGit(t)
			cfg.MCPServers = map[string]config.MCPServer{"fs": tc.server}
			_, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v, want a config error", err)
			}
			for _, want := range []string{`tool "mcp_tool_call"`, `MCP server "fs"`, "provider is unknown", tc.wantMsg} {
				if !strings.Contains(ce.Msg, want) {
					t.Errorf("message %q lacks %q", ce.Msg, want)
				}
			}
			if ce.Path != executor(cfg) {
				t.Errorf("path = %s, want %s", ce.Path, executor(cfg))
			}
			off, offFiles := classic(t)
			off.MCPServers = map[string]config.MCPServer{"fs": tc.server}
			if _, err := workflow.Compile(context.Background(), off, workflow.Options{Prompts: offFiles}); err != nil {
				t.Errorf("with the Git workflow off the same declaration (classic) is refused: %v", err)
			}
		})
	}

	t.Run("canonical identities recorded", func(t *testing.T) {
		cfg, files := classicGit(t)
		cfg.MCPServers = map[string]config.MCPServer{
			"fs":     {Command: link, Args: []string{"--root", "."}},
			"remote": {Transport: "http", URL: "HTTPS://user:secret-pw@MCP.Example.COM/v1?key=secret-key"},
			"off":    {Command: "npx", Disabled: true},
		}
		a := cfg.Agents["executor"]
		a.QualityTools = []string{"code_quality_python_ruff"}
		cfg.Agents["executor"] = a
		set, err := workflow.Compile(context.Background(), cfg, workflow.Options{Prompts: files})
		if err != nil {
			t.Fatal(err)
		}
		pol := set.Git()
		got, ok := pol.WriterProviders("executor", "mcp_tool_call")
		want := []string{`mcp:fs=stdio:"` + prog + `" args sha256:`, "mcp:remote=https://mcp.example.com/v1 sha256:"}
		for i := range got {
			if i < len(want) && strings.HasPrefix(got[i], want[i]) {
				want[i] = got[i]
			}
		}
		if !ok || !slices.Equal(got, want) {
			t.Errorf("executor mcp_tool_call providers = %v %v, want %v (symlink resolved, host lower-cased, disabled server left out)", got, ok, want)
		}
		if strings.Contains(strings.Join(got, " "), "secret") || strings.Contains(strings.Join(got, " "), "--root") {
			t.Errorf("identities carry arguments or credentials: %v", got)
		}
		other, _ := workflow.MCPProvider("remote", "", nil, "https://user:other-pw@mcp.example.com/v1?key=secret-key")
		if slices.Contains(got, other) {
			t.Error("a different credential in the URL gives the same identity")
		}
		if got, _ := pol.WriterProviders("executor", "run_command"); !slices.Equal(got, []string{workflow.ProviderProcess}) {
			t.Errorf("run_command providers = %v", got)
		}
		if got, _ := pol.WriterProviders("executor", "code_quality_python_ruff"); !slices.Equal(got, []string{"saivage:quality/python_ruff"}) {
			t.Errorf("quality providers = %v", got)
		}
		for _, agent := range []string{"reviewer", "analyst"} {
			if _, ok := pol.WriterProviders(agent, "run_command"); ok {
				t.Errorf("%s was not declared with run_command, but the policy knows it", agent)
			}
		}
		if _, ok := pol.WriterProviders("executor", "wait_process"); ok {
			t.Error("wait_process is containment, not a writer")
		}
	})
}
