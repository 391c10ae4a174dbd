// Package mcptooltest connects tests to a connector's MCP server over the
// SDK's in-memory transports and calls its tools.
package mcptooltest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
)

// Connect serves server over in-memory transports and returns a connected
// client session; both ends close when the test ends.
func Connect(t testing.TB, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	return ConnectClient(t, server, mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil))
}

// ConnectClient is Connect with the caller's client, for a test that
// registers custom methods (such as a connector's prepare method) on it
// before it connects.
func ConnectClient(t testing.TB, server *mcp.Server, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := client.Connect(ctx, ct, nil)
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

// CallText calls the tool name with args and returns the result with its
// text contents joined, whether the tool succeeded or reported an error.
// A protocol error fails the test.
func CallText(t testing.TB, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res, Text(res)
}

// CallStructured calls the tool name with args and decodes a successful
// result's structured content into out, returning ""; for a tool error it
// returns the error's text and leaves out as it was. A protocol error or
// structured content that does not decode into out fails the test.
func CallStructured(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) string {
	t.Helper()
	res, text := CallText(t, cs, name, args)
	if res.IsError {
		return text
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("%s: encode structured content: %v", name, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, data, err)
	}
	return ""
}

// Text joins a tool result's text contents with newlines.
func Text(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// InputSchema returns the input schema of the server's tool name as
// decoded JSON; a tool the server does not list fails the test.
func InputSchema(t testing.TB, cs *mcp.ClientSession, name string) map[string]any {
	t.Helper()
	for _, tool := range tools(t, cs) {
		if tool.Name != name {
			continue
		}
		data, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatalf("%s: encode input schema: %v", name, err)
		}
		var schema map[string]any
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatalf("%s: decode input schema %s: %v", name, data, err)
		}
		return schema
	}
	t.Fatalf("the server lists no tool %q", name)
	return nil
}

// Annotations lists the server's tools, hidden ones included, each with
// its annotations as JSON, for comparing two servers' declarations.
func Annotations(t testing.TB, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tool := range tools(t, cs) {
		data, err := json.Marshal(tool.Annotations)
		if err != nil {
			t.Fatalf("%s: encode annotations: %v", tool.Name, err)
		}
		out[tool.Name] = string(data)
	}
	return out
}

// ReadOnlyHints lists the server's tools as the host's bridge sees them:
// each tool the agent is offered (hidden companions such as preflights are
// left out) with its readOnlyHint annotation, which Steward's policy takes
// as the tool's default. prefix, when set, names the tools as the bridge
// does (mcp__<prefix>__<tool>).
func ReadOnlyHints(t testing.TB, cs *mcp.ClientSession, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, tool := range tools(t, cs) {
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

// tools lists the server's tools; a protocol error fails the test.
func tools(t testing.TB, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	return res.Tools
}
