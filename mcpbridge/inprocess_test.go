package mcpbridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInProcessServer: a server built in the host process is bridged in
// memory: its tools are listed and called like a child's, each call reaches
// the host's own instance (its state is shared, not copied), a reload with
// the same server keeps the connection, and a config that also names a
// command is refused.
func TestInProcessServer(t *testing.T) {
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "local", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "counts its calls"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			n := calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("call %d", n)}}}, nil, nil
		})
	cfg := ServerConfig{Name: "local", Server: srv}
	if got := cfg.Transport(); got != "in-process" {
		t.Errorf("Transport() = %q", got)
	}
	br := startBridge(t, Options{Servers: []ServerConfig{cfg}}, nil)
	waitStatus(t, br, "local", isReady)
	tool := findTool(t, br.Tools(), "mcp__local__count")
	for i := 1; i <= 2; i++ {
		if got := call(t, tool, `{}`).Content; got != fmt.Sprintf("call %d", i) {
			t.Fatalf("call %d answered %q", i, got)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("the host's instance saw %d calls, want 2", calls.Load())
	}
	st := statusOf(t, br, "local")
	if st.Transport != "in-process" || st.Tools != 1 {
		t.Errorf("status %+v", st)
	}
	if err := br.Reconfigure([]ServerConfig{cfg}); err != nil {
		t.Fatal(err)
	}
	if after := statusOf(t, br, "local"); !after.Since.Equal(st.Since) || after.Restarts != 0 {
		t.Errorf("reloading the same in-process server restarted it: %+v → %+v", st, after)
	}
	if err := (ServerConfig{Name: "x", Server: srv, Command: "/bin/true"}).Validate(); err == nil {
		t.Error("an in-process server with a command was accepted")
	}
}
