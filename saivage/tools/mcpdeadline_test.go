package tools_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

// blockingServer is an MCP server (streamable HTTP on loopback) with a tool
// "block" that answers only when its request is cancelled (reported on
// the returned channel) and a tool "echo".
func blockingServer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	cancelled, release := make(chan struct{}, 1), make(chan struct{})
	mcp.AddTool(server, &mcp.Tool{Name: "block", Description: "never answers"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
				return nil, nil, ctx.Err()
			case <-release:
				return nil, nil, errors.New("released")
			}
		})
	type echoArgs struct {
		Message string `json:"message"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echo"},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + a.Message}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: no handler outlives the test
	return srv.URL + "/mcp", cancelled
}

// TestMCPInvokeDeadlineOverHTTP: a call past the (settable) invoke deadline
// ends with an error naming the deadline; the abort is request-local, so
// the server sees the cancellation and the same connection keeps serving.
func TestMCPInvokeDeadlineOverHTTP(t *testing.T) {
	if tools.MCPInvokeDeadline != 900*time.Second {
		t.Fatalf("default invoke deadline = %s", tools.MCPInvokeDeadline)
	}
	f := newFixture(t, analyst())
	u, cancelled := blockingServer(t)
	m := tools.NewMCPServers(map[string]config.MCPServer{"slow": {Transport: "http", URL: u}}, f.env.Root, nil)
	m.InvokeDeadline = time.Second
	defer m.Close()
	f.env.MCP = m
	f.ok("mcp_server_control", map[string]any{"server": "slow", "action": "start"})
	before := info(t, f.ok("mcp_catalog_refresh", map[string]any{"server": "slow"}))
	f.fails("mcp_tool_call", map[string]any{"server": "slow", "tool": "block"},
		`MCP server "slow" tool "block" did not answer within the 1s invoke deadline; the call was abandoned (the connection stays open)`)
	m.InvokeDeadline = 0 // later calls get the default, whatever the load
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the server never saw the call cancelled")
	}
	if out := f.ok("mcp_tool_call", map[string]any{"server": "slow", "tool": "echo", "arguments": map[string]any{"message": "still here"}}); out != "Echo: still here" {
		t.Errorf("echo after the deadline = %q", out)
	}
	// The same connection: its catalog was not reissued by a restart.
	after, err := m.Info("slow")
	if err != nil || after.State != "ready" || after.CatalogUUID != before.CatalogUUID {
		t.Errorf("after the deadline: %+v, %v (before %+v)", after, err, before)
	}
}

// TestMCPInvokeDeadlineFencesStdio: over stdio an abandoned call fences the
// connection: the server process is stopped and joined before the error
// returns, nothing more is admitted, status says why, and only an explicit
// restart brings a fresh process back.
func TestMCPInvokeDeadlineFencesStdio(t *testing.T) {
	node, entry := everything(t)
	f := newFixture(t, analyst())
	marker := "SAIVAGE_DEADLINE_TEST=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	name, val, _ := strings.Cut(marker, "=")
	m := tools.NewMCPServers(map[string]config.MCPServer{"everything": {Command: node, Args: []string{entry, "stdio"}, Env: map[string]string{name: val}}}, f.env.Root, nil)
	m.InvokeDeadline = 2 * time.Second
	defer m.Close()
	f.env.MCP = m
	f.ok("mcp_server_control", map[string]any{"server": "everything", "action": "start"})
	pid := processWithEnv(t, marker)
	f.fails("mcp_tool_call", map[string]any{"server": "everything", "tool": "trigger-long-running-operation", "arguments": map[string]any{"duration": 600, "steps": 1}},
		`did not answer within the 2s invoke deadline; the call was abandoned; an abandoned stdio call fences its connection, so the server was stopped: restart it with mcp_server_control`)
	m.InvokeDeadline = 0
	// Contained and joined: the process is gone (reaped) already.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server process %d after the deadline: kill -0 = %v", pid, err)
	}
	st, err := m.Control(context.Background(), "everything", "status")
	if err != nil || st.State != "stopped" || !strings.Contains(st.LastError, "invoke deadline; the call was abandoned; the server was stopped") {
		t.Errorf("status = %+v, %v", st, err)
	}
	f.fails("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": "x"}}, "is not started")
	// No automatic restart: still stopped; an explicit restart starts fresh.
	if st := m.Status(); st[0].State != "stopped" {
		t.Errorf("status before restart = %+v", st)
	}
	f.ok("mcp_server_control", map[string]any{"server": "everything", "action": "restart"})
	if out := f.ok("mcp_tool_call", map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": "again"}}); out != "Echo: again" {
		t.Errorf("echo after restart = %q", out)
	}
	if fresh := processWithEnv(t, marker); fresh == pid {
		t.Errorf("restart kept pid %d", pid)
	}
	if st := m.Status(); st[0].State != "ready" || st[0].LastError != "" {
		t.Errorf("status after restart = %+v", st)
	}
}

// processWithEnv returns the pid of the one live process whose environment
// holds entry.
func processWithEnv(t *testing.T, entry string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []int
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !strings.Contains("\x00"+string(env), "\x00"+entry+"\x00") {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join(d, "stat")); strings.Contains(string(st), ") Z ") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		found = append(found, pid)
	}
	if len(found) != 1 {
		t.Fatalf("processes with %s: %v", entry, found)
	}
	return found[0]
}
