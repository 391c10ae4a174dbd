package voice

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPTransport reaches the voice server through a live MCP session (the
// bridge's, so the coordinator and the agent share one server process and
// its one SIP session).
type MCPTransport struct {
	Session func(ctx context.Context) (*mcp.ClientSession, error)
}

// Tools implements Transport.
func (t MCPTransport) Tools(ctx context.Context) ([]string, error) {
	s, err := t.Session(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the voice server's tools: %w", err)
		}
		names = append(names, tool.Name)
	}
	return names, nil
}

// Call implements Transport. Empty successful content is a successful empty
// answer (a silent reply), not a missing result.
func (t MCPTransport) Call(ctx context.Context, tool string, args map[string]any) (string, bool, error) {
	s, err := t.Session(ctx)
	if err != nil {
		return "", false, err
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, fmt.Errorf("call %s on the voice server: %w", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}
