package tools_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
)

// everything returns node and the entry of @modelcontextprotocol/server-
// everything as .ci/run installs it (STEWARD_TEST_MCP_EVERYTHING).
func everything(t *testing.T) (string, string) {
	t.Helper()
	dir := os.Getenv("STEWARD_TEST_MCP_EVERYTHING")
	if dir == "" {
		t.Skip("STEWARD_TEST_MCP_EVERYTHING is not set (.ci/run installs server-everything)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatal(err)
	}
	return node, entry
}

func info(t *testing.T, out string) tools.MCPServerInfo {
	t.Helper()
	var in tools.MCPServerInfo
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return in
}

func TestMCPDynamicServersAgainstServerEverything(t *testing.T) {
	node, entry := everything(t)
	f := newFixture(t, analyst())
	defsPath := filepath.Join(f.env.StateDir, tools.MCPDefinitionsFile)
	f.env.MCP = tools.NewMCPServers(map[string]config.MCPServer{"docs": {Transport: "http", URL: "http://127.0.0.1:1/mcp"}}, f.env.Root, nil)
	defer f.env.MCP.Close()
	if err := f.env.MCP.EnableDefinitions(defsPath, state.New(state.Options{})); err != nil {
		t.Fatal(err)
	}

	// Register: published to mcp-servers.json, not started.
	reg := map[string]any{"name": "everything", "transport": "stdio", "command": node, "args": []string{entry, "stdio"}}
	if in := info(t, f.ok("mcp_server_register", reg)); in.Source != "dynamic" || in.State != "not_started" || in.Autostart {
		t.Errorf("registered = %+v", in)
	}
	data, err := os.ReadFile(defsPath)
	if err != nil || !strings.Contains(string(data), `"format_version": 1`) || !strings.Contains(string(data), entry) {
		t.Fatalf("definitions file = %s, %v", data, err)
	}
	f.fails("mcp_server_register", reg, "already registered")
	f.fails("mcp_server_register", map[string]any{"name": "docs", "command": node}, "cannot shadow")
	f.fails("mcp_server_register", map[string]any{"name": "Bad Name", "command": node}, "must use a-z")
	f.fails("mcp_server_unregister", map[string]any{"name": "docs"}, "declared in config.yaml")

	// Start and call; arguments are validated against the whole schema at
	// dispatch, so a wrong type never reaches the server.
	if out := f.ok("mcp_server_control", map[string]any{"server": "everything", "action": "start"}); !strings.Contains(out, `"state": "ready"`) {
		t.Fatalf("start = %s", out)
	}
	first := info(t, f.ok("mcp_catalog_refresh", map[string]any{"server": "everything"}))
	if first.CatalogUUID == "" || len(first.Fingerprint) != 64 || first.Tools < 4 {
		t.Fatalf("catalog = %+v", first)
	}
	if out := f.ok("mcp_tool_call", map[string]any{"server": "everything", "tool": "get-sum", "arguments": map[string]any{"a": 2, "b": 3.5}}); out != "The sum of 2 and 3.5 is 5.5." {
		t.Errorf("get-sum = %q", out)
	}
	f.fails("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": 42}}, "do not match the tool's input schema")
	f.fails("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{}}, "do not match the tool's input schema")

	// Refresh on the same connection: a fresh catalog UUID, same schemas.
	second := info(t, f.ok("mcp_catalog_refresh", map[string]any{"server": "everything"}))
	if second.CatalogUUID == first.CatalogUUID || second.Fingerprint != first.Fingerprint || second.Tools != first.Tools {
		t.Errorf("refresh: %+v then %+v", first, second)
	}

	// Replace: the running connection is retired; the new definition starts
	// on demand.
	reg["args"] = []string{entry, "stdio"}
	reg["env"] = map[string]string{"EVERYTHING_MARK": "v2"}
	if in := info(t, f.ok("mcp_server_replace", reg)); in.State != "not_started" || in.CatalogUUID != "" {
		t.Errorf("replaced = %+v", in)
	}
	if data, _ := os.ReadFile(defsPath); !strings.Contains(string(data), "EVERYTHING_MARK") {
		t.Errorf("replacement not published: %s", data)
	}
	f.ok("mcp_server_control", map[string]any{"server": "everything", "action": "start"})
	if out := f.ok("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": "again"}}); out != "Echo: again" {
		t.Errorf("echo after replace = %q", out)
	}
	if out := f.ok("mcp_servers", map[string]any{}); !strings.Contains(out, `"source": "config"`) || !strings.Contains(out, `"source": "dynamic"`) {
		t.Errorf("servers = %s", out)
	}

	// A restart (a new server object over the same file) sees the
	// definition and does not start it.
	again := tools.NewMCPServers(nil, f.env.Root, nil)
	if err := again.EnableDefinitions(defsPath, state.New(state.Options{})); err != nil {
		t.Fatal(err)
	}
	if s := again.Servers(); len(s) != 1 || s[0].Name != "everything" || s[0].State != "not_started" {
		t.Errorf("reloaded = %+v", s)
	}
	again.Close()

	// Unregister: removed from the file and stopped.
	f.ok("mcp_server_unregister", map[string]any{"name": "everything"})
	if data, _ := os.ReadFile(defsPath); strings.Contains(string(data), "everything") {
		t.Errorf("still defined: %s", data)
	}
	f.fails("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": "x"}}, "no enabled MCP server")
}

func TestMCPDefinitionsFileIsStrict(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, tools.MCPDefinitionsFile)
	for _, tc := range []struct{ doc, want string }{
		{`{"format_version":2,"servers":{}}`, "format_version must be 1"},
		{`{"format_version":1,"servers":{"x":{"command":"c","autostart":true}}}`, `unknown field "autostart"`},
		{`{"format_version":1,"servers":{"x":{"transport":"http","command":"c"}}}`, "http takes url and headers"},
		{`{"format_version":1,"servers":{"docs":{"command":"c"}}}`, "shadows the config.yaml server"},
		{`{"format_version":1,"servers":{}} {}`, "trailing data"},
	} {
		if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		m := tools.NewMCPServers(map[string]config.MCPServer{"docs": {Command: "true", Disabled: true}}, dir, nil)
		err := m.EnableDefinitions(path, state.New(state.Options{}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// FuzzParseMCPDefinitions: any input is either refused or parses to
// definitions that round-trip through the file format unchanged.
func FuzzParseMCPDefinitions(f *testing.F) {
	f.Add([]byte(`{"format_version":1,"servers":{"a":{"command":"node","args":["x"],"env":{"K":"v"}}}}`))
	f.Add([]byte(`{"format_version":1,"servers":{"web":{"transport":"http","url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer t"}}}}`))
	f.Add([]byte(`{"format_version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defs, err := tools.ParseMCPDefinitions(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(map[string]any{"format_version": 1, "servers": defs})
		if err != nil {
			t.Fatal(err)
		}
		again, err := tools.ParseMCPDefinitions(b)
		if err != nil || len(again) != len(defs) {
			t.Fatalf("round trip of %s: %v", b, err)
		}
	})
}

// TestMCPFrozenRefusesServerSetChanges: a frozen manager (Git workflow on)
// refuses register, replace and unregister, through the tools as well, and
// leaves the server list and mcp-servers.json unchanged; the same calls
// succeed on a normal manager.
func TestMCPFrozenRefusesServerSetChanges(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "normal", true: "frozen"}[frozen], func(t *testing.T) {
			f := newFixture(t, analyst())
			defsPath := filepath.Join(f.env.StateDir, tools.MCPDefinitionsFile)
			m := tools.NewMCPServers(map[string]config.MCPServer{"docs": {Transport: "http", URL: "http://127.0.0.1:1/mcp"}}, f.env.Root, nil)
			t.Cleanup(m.Close)
			if frozen {
				m.Freeze()
			}
			if err := m.EnableDefinitions(defsPath, state.New(state.Options{})); err != nil {
				t.Fatal(err)
			}
			f.env.MCP = m
			def := tools.MCPDefinition{Transport: "http", URL: "http://127.0.0.1:2/mcp"}
			names := func() string {
				var out []string
				for _, s := range m.Servers() {
					out = append(out, s.Name+"/"+s.Source)
				}
				return strings.Join(out, ",")
			}
			if !frozen {
				if err := m.Register("dyn", def); err != nil {
					t.Fatal(err)
				}
				if err := m.Replace("dyn", def); err != nil {
					t.Fatal(err)
				}
				if got := names(); got != "docs/config,dyn/dynamic" {
					t.Errorf("servers = %s", got)
				}
				if err := m.Unregister("dyn"); err != nil {
					t.Fatal(err)
				}
				if got := names(); got != "docs/config" {
					t.Errorf("servers after unregister = %s", got)
				}
				return
			}
			for _, err := range []error{m.Register("dyn", def), m.Replace("docs", def), m.Unregister("docs")} {
				if !errors.Is(err, tools.ErrMCPFrozen) || !strings.Contains(err.Error(), "git_workflow.enabled") {
					t.Errorf("frozen change = %v", err)
				}
			}
			f.fails("mcp_server_register", map[string]any{"name": "dyn", "transport": "http", "url": "http://127.0.0.1:2/mcp"}, "Git workflow is on")
			f.fails("mcp_server_unregister", map[string]any{"name": "docs"}, "Git workflow is on")
			if got := names(); got != "docs/config" {
				t.Errorf("servers = %s", got)
			}
			if _, err := os.Stat(defsPath); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("mcp-servers.json was written: %v", err)
			}
			if out := f.ok("mcp_servers", map[string]any{}); !strings.Contains(out, `"docs"`) {
				t.Errorf("mcp_servers = %s", out)
			}
		})
	}
}

// TestMCPFrozenRefusesPersistedDefinitions: a frozen manager refuses to load
// persisted dynamic definitions (naming the file and the Git workflow) and
// accepts an empty file.
func TestMCPFrozenRefusesPersistedDefinitions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, tools.MCPDefinitionsFile)
	frozen := func() *tools.MCPServers {
		m := tools.NewMCPServers(nil, dir, nil)
		t.Cleanup(m.Close)
		m.Freeze()
		return m
	}
	if err := os.WriteFile(path, []byte(`{"format_version":1,"servers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := frozen().EnableDefinitions(path, state.New(state.Options{})); err != nil {
		t.Errorf("empty definitions = %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"format_version":1,"servers":{"dyn":{"transport":"http","url":"http://127.0.0.1:2/mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := frozen()
	err := m.EnableDefinitions(path, state.New(state.Options{}))
	if !errors.Is(err, tools.ErrMCPFrozen) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "(dyn)") {
		t.Errorf("persisted definitions = %v", err)
	}
	if got := m.Servers(); len(got) != 0 {
		t.Errorf("servers = %+v", got)
	}
	normal := tools.NewMCPServers(nil, dir, nil)
	t.Cleanup(normal.Close)
	if err := normal.EnableDefinitions(path, state.New(state.Options{})); err != nil || len(normal.Servers()) != 1 {
		t.Errorf("normal load = %v, %+v", err, normal.Servers())
	}
}
