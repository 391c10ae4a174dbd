// Package mcptooltest connects tests to a connector's MCP server over the
// SDK's in-memory transports and calls its tools.
package mcptooltest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
)

// Connect serves server over in-memory transports and returns a connected
// client session; both ends close when the test ends.
func Connect(t testing.TB, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Call calls the tool name with args and decodes a successful result's text
// into T; a tool error result leaves T zero for the caller to inspect the
// result. A protocol error fails the test.
func Call[T any](t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (T, *mcp.CallToolResult) {
	t.Helper()
	var out T
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		text := res.Content[0].(*mcp.TextContent).Text
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, text, err)
		}
	}
	return out, res
}

// ReadOnlyHints lists the server's tools as the host's bridge sees them:
// each tool the agent is offered (hidden companions such as preflights are
// left out) with its readOnlyHint annotation, which Steward's policy takes
// as the tool's default. prefix, when set, names the tools as the bridge
// does (mcp__<prefix>__<tool>).
func ReadOnlyHints(t testing.TB, cs *mcp.ClientSession, prefix string) map[string]bool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	out := map[string]bool{}
	for _, tool := range res.Tools {
		if hidden, _ := tool.Meta[mcpbridge.MetaHidden].(bool); hidden {
			continue
		}
		name := tool.Name
		if prefix != "" {
			name = mcpbridge.ToolName(prefix, tool.Name)
		}
		out[name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
	}
	return out
}
