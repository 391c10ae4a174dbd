package main

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/policy"
)

// TestBuiltinPolicyNamesRealTools starts every Steward connector and checks
// that each built-in allow or gate rule for a connector names a tool that
// connector really has: a renamed tool must not silently fall back to the
// default gate (or, worse, a misspelt rule allow nothing while seeming to).
func TestBuiltinPolicyNamesRealTools(t *testing.T) {
	env, _, _ := testEnv(t, map[string]string{})
	ctx := context.Background()
	tools := map[string]bool{}
	for _, name := range mcpNames() {
		server, err := mcpServers[name](ctx, env)
		if err != nil {
			t.Fatalf("connector %s: %v", name, err)
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("list tools of %s: %v", name, err)
		}
		for _, tool := range res.Tools {
			tools[mcpbridge.ToolName(name, tool.Name)] = true
		}
		cs.Close()
		ss.Close()
	}
	for _, list := range [][]string{policy.BuiltinAllow, policy.BuiltinGate} {
		for _, rule := range list {
			server, _, ok := mcpbridge.SplitToolName(rule)
			if !ok || !strings.HasPrefix(rule, mcpbridge.ToolPrefix) {
				continue // host tools
			}
			registered := false
			for _, n := range mcpNames() {
				registered = registered || n == server
			}
			if registered && !tools[rule] {
				t.Errorf("built-in policy rule %q names no tool of connector %q", rule, server)
			}
		}
	}
}
