package mcpbridge

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseConfigValid(t *testing.T) {
	data := `{"mcpServers": {
		"files":  {"command": "npx", "args": ["-y", "@scope/server", "/data"], "env": {"API_KEY": "k", "DEBUG": "1"}, "cwd": "/srv"},
		"off":    {"command": "x", "disabled": true},
		"remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}},
		"local":  {"url": "http://127.0.0.1:8931/mcp"},
		"typed":  {"type": "stdio", "command": "/usr/local/bin/srv", "disabled": false}
	}}`
	got, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerConfig{
		{Name: "files", Command: "npx", Args: []string{"-y", "@scope/server", "/data"}, Env: map[string]string{"API_KEY": "k", "DEBUG": "1"}, Dir: "/srv"},
		{Name: "remote", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer abc"}},
		{Name: "local", URL: "http://127.0.0.1:8931/mcp"},
		{Name: "typed", Command: "/usr/local/bin/srv"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if got[0].Transport() != "stdio" || got[1].Transport() != "http" {
		t.Errorf("transports: %s %s", got[0].Transport(), got[1].Transport())
	}
	empty, err := ParseConfig([]byte(`{"mcpServers": {}}`))
	if err != nil || len(empty) != 0 {
		t.Errorf("empty servers: %v, %v", empty, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	one := func(settings string) string { return `{"mcpServers": {"srv": ` + settings + `}}` }
	cases := []struct {
		name, data, server, field, msg string
	}{
		{"empty file", "  \n", "", "", "file is empty"},
		{"not an object", `[]`, "", "", "not a JSON object"},
		{"invalid JSON", `{"mcpServers": {`, "", "", "invalid JSON"},
		{"trailing data", `{"mcpServers": {}} {}`, "", "", "unexpected data after the object"},
		{"unknown top-level", `{"mcpServers": {}, "servers": {}}`, "", "", `unknown top-level field "servers"`},
		{"missing mcpServers", `{}`, "", "", `missing "mcpServers"`},
		{"mcpServers not object", `{"mcpServers": []}`, "", "mcpServers", "must be an object"},
		{"duplicate server", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, "", "mcpServers", `key "a" appears twice`},
		{"settings not object", one(`"npx"`), "srv", "", "settings must be an object"},
		{"unknown field", one(`{"command": "x", "autoApprove": ["t"]}`), "srv", "autoApprove", "unknown field"},
		{"command not string", one(`{"command": ["npx"]}`), "srv", "command", "must be a string"},
		{"command null", one(`{"command": null}`), "srv", "command", "must be a string"},
		{"command spaces", one(`{"command": " npx"}`), "srv", "command", "leading or trailing spaces"},
		{"args not array", one(`{"command": "x", "args": "-y"}`), "srv", "args", "must be an array of strings"},
		{"args with number", one(`{"command": "x", "args": ["a", 1]}`), "srv", "args", "must be an array of strings"},
		{"args with NUL", one(`{"command": "x", "args": ["a\u0000b"]}`), "srv", "args", "NUL"},
		{"env not object", one(`{"command": "x", "env": ["A=1"]}`), "srv", "env", "must be an object of string values"},
		{"env number value", one(`{"command": "x", "env": {"PORT": 8080}}`), "srv", "env", "must be an object of string values"},
		{"env bad name", one(`{"command": "x", "env": {"1PORT": "1"}}`), "srv", "env", "not a valid variable name"},
		{"env name with =", one(`{"command": "x", "env": {"A=B": "1"}}`), "srv", "env", "not a valid variable name"},
		{"relative cwd", one(`{"command": "x", "cwd": "work"}`), "srv", "cwd", "absolute path"},
		{"neither transport", one(`{"args": []}`), "srv", "", `needs either "command"`},
		{"both transports", one(`{"command": "x", "url": "https://h/mcp"}`), "srv", "", `has both "command" and "url"`},
		{"headers on command", one(`{"command": "x", "headers": {"A": "b"}}`), "srv", "headers", `only applies to "url" servers`},
		{"args on url", one(`{"url": "https://h/mcp", "args": ["a"]}`), "srv", "args", `only applies to "command" servers`},
		{"env on url", one(`{"url": "https://h/mcp", "env": {"A": "b"}}`), "srv", "env", `only applies to "command" servers`},
		{"url scheme", one(`{"url": "ftp://h/mcp"}`), "srv", "url", "must start with https://"},
		{"url no host", one(`{"url": "https:///mcp"}`), "srv", "url", "has no host"},
		{"url plain http remote", one(`{"url": "http://example.com/mcp"}`), "srv", "url", "only for loopback"},
		{"url credentials", one(`{"url": "https://user:pw@h/mcp"}`), "srv", "url", "must not contain credentials"},
		{"header reserved", one(`{"url": "https://h/mcp", "headers": {"Content-Type": "x"}}`), "srv", "headers", "set by the MCP transport"},
		{"header bad name", one(`{"url": "https://h/mcp", "headers": {"Bad Name": "x"}}`), "srv", "headers", "not a valid HTTP header name"},
		{"header newline", one(`{"url": "https://h/mcp", "headers": {"X-Key": "a\r\nInjected: 1"}}`), "srv", "headers", "line break"},
		{"headers not strings", one(`{"url": "https://h/mcp", "headers": {"X-Key": true}}`), "srv", "headers", "must be an object of string values"},
		{"type sse", one(`{"type": "sse", "url": "https://h/sse"}`), "srv", "type", "SSE transport is not supported"},
		{"type unknown", one(`{"type": "websocket", "url": "https://h"}`), "srv", "type", `unknown transport "websocket"`},
		{"type stdio without command", one(`{"type": "stdio", "url": "https://h/mcp"}`), "srv", "command", "is required"},
		{"type http without url", one(`{"type": "http", "command": "x"}`), "srv", "url", "is required"},
		{"disabled not bool", one(`{"command": "x", "disabled": "yes"}`), "srv", "disabled", "true or false"},
		{"name with __", `{"mcpServers": {"my__srv": {"command": "x"}}}`, "my__srv", "", `must not contain "__"`},
		{"name edge underscore", `{"mcpServers": {"srv_": {"command": "x"}}}`, "srv_", "", `must not contain "__" or start or end`},
		{"name with space", `{"mcpServers": {"my srv": {"command": "x"}}}`, "my srv", "", "letters, digits"},
		{"name with dot", `{"mcpServers": {"my.srv": {"command": "x"}}}`, "my.srv", "", "letters, digits"},
		{"name too long", `{"mcpServers": {"` + strings.Repeat("n", 33) + `": {"command": "x"}}}`, strings.Repeat("n", 33), "", "longer than 32"},
		{"name empty", `{"mcpServers": {"": {"command": "x"}}}`, "", "", "empty name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			servers, err := ParseConfig([]byte(c.data))
			if err == nil {
				t.Fatalf("no error; servers = %+v", servers)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.Server != c.server || ce.Field != c.field || !strings.Contains(ce.Msg, c.msg) {
				t.Errorf("got server=%q field=%q msg=%q, want server=%q field=%q msg containing %q",
					ce.Server, ce.Field, ce.Msg, c.server, c.field, c.msg)
			}
		})
	}
}

func TestConfigErrorLine(t *testing.T) {
	data := "{\n  \"mcpServers\": {\n    \"command\": {\"command\": \"x\"},\n    \"files\": {\n      \"args\": [\"command\"],\n      \"comand\": \"npx\"\n    }\n  }\n}\n"
	_, err := ParseConfig([]byte(data))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Server != "files" || ce.Field != "comand" || ce.Line != 6 {
		t.Fatalf("err = %v (%+v), want the misspelt field on line 6", err, ce)
	}
	if !strings.HasPrefix(err.Error(), `line 6: server "files": field "comand": unknown field (allowed: `) {
		t.Errorf("message = %q", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()

	servers, err := LoadConfig(filepath.Join(dir, "absent.json"))
	if err != nil || servers != nil {
		t.Errorf("missing file: %v, %v; want no servers and no error", servers, err)
	}

	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"mcpServers": {}}`+strings.Repeat(" ", MaxConfigSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: err = %v", err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"command": 1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(bad)
	if err == nil || err.Error() != "MCP config "+bad+`: line 1: server "x": field "command": must be a string` {
		t.Errorf("bad file: err = %v", err)
	}

	servers, err = LoadConfig(filepath.Join("testdata", "mcp.json"))
	if err != nil || len(servers) != 3 {
		t.Errorf("testdata/mcp.json: %d servers, %v", len(servers), err)
	}
}

func TestServerConfigJSONHidesSecrets(t *testing.T) {
	// Env and headers carry credentials; a host that logs a config as JSON
	// must not print them.
	cfg := ServerConfig{Name: "s", Command: "x", Env: map[string]string{"TOKEN": "env-secret"}}
	remote := ServerConfig{Name: "r", URL: "https://h/mcp", Headers: map[string]string{"Authorization": "header-secret"}}
	for _, c := range []ServerConfig{cfg, remote} {
		b, err := json.Marshal(c)
		if err != nil || strings.Contains(string(b), "secret") {
			t.Errorf("%s: %s (%v)", c.Name, b, err)
		}
	}
}

// FuzzParseConfig checks that no input panics the parser and that whatever
// it accepts is a valid, uniquely named set of servers. Seeds live in
// testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, err := ParseConfig(data)
		if err != nil {
			if servers != nil {
				t.Errorf("servers %v returned with error %v", servers, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range servers {
			if err := s.Validate(); err != nil {
				t.Errorf("accepted invalid server: %v", err)
			}
			if seen[s.Name] {
				t.Errorf("duplicate server %q accepted", s.Name)
			}
			seen[s.Name] = true
			if n := ToolName(s.Name, "a-tool"); len(n) > MaxToolNameLen {
				t.Errorf("tool name %q too long", n)
			}
		}
	})
}
