package tools_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

func TestMCPServerTools(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	type lookupArgs struct {
		Term string `json:"term"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "lookup", Description: "look a term up"},
		func(ctx context.Context, req *mcp.CallToolRequest, a lookupArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "definition of " + a.Term + " (token mcp-header-secret)"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer mcp-header-secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()

	f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
	f.env.MCP = tools.NewMCPServers(map[string]config.MCPServer{
		"docs": {Transport: "http", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer mcp-header-secret"}},
		"off":  {Command: "true", Disabled: true},
	}, f.env.Root, nil)
	f.env.Redact = tools.NewRedactor([]string{"mcp-header-secret"})
	defer f.env.MCP.Close()

	if out := f.ok("mcp_tools", map[string]any{}); !strings.Contains(out, `"name": "docs"`) || !strings.Contains(out, "not_started") || strings.Contains(out, `"off"`) {
		t.Errorf("servers = %s", out)
	}
	f.fails("mcp_tool_call", map[string]any{"server": "docs", "tool": "lookup", "arguments": map[string]any{"term": "x"}}, "not started")
	if out := f.ok("mcp_server_control", map[string]any{"server": "docs", "action": "start"}); !strings.Contains(out, `"state": "ready"`) || !strings.Contains(out, `"tools": 1`) {
		t.Fatalf("start = %s", out)
	}
	if out := f.ok("mcp_tools", map[string]any{"server": "docs"}); !strings.Contains(out, `"name": "lookup"`) {
		t.Errorf("tools = %s", out)
	}
	out := f.ok("mcp_tool_call", map[string]any{"server": "docs", "tool": "lookup", "arguments": map[string]any{"term": "saivage"}})
	if out != "definition of saivage (token [redacted])" {
		t.Errorf("call = %q", out)
	}
	f.fails("mcp_tool_call", map[string]any{"server": "docs", "tool": "nope"}, "no ready tool")
	f.fails("mcp_server_control", map[string]any{"server": "off", "action": "start"}, "no enabled MCP server")
	if out := f.ok("mcp_server_control", map[string]any{"server": "docs", "action": "stop"}); !strings.Contains(out, "not_started") {
		t.Errorf("stop = %s", out)
	}
}
