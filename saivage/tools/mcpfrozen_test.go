package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

// changingServer is a real MCP server on loopback whose tool list the test
// changes between listings (the go-sdk server also announces each change
// with tools/list_changed, which the bridge follows by re-listing).
type changingServer struct {
	srv *mcp.Server
	URL string
}

func newChangingServer(t *testing.T) *changingServer {
	t.Helper()
	cs := &changingServer{srv: mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)}
	cs.add("lookup", "term")
	cs.add("count", "text")
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return cs.srv }, nil))
	t.Cleanup(h.Close)
	cs.URL = h.URL
	return cs
}

// add adds (or replaces) a tool taking one string argument, which it
// echoes.
func (cs *changingServer) add(name, arg string) {
	schema := map[string]any{"type": "object", "properties": map[string]any{arg: map[string]any{"type": "string"}}, "required": []string{arg}}
	cs.srv.AddTool(&mcp.Tool{Name: name, Description: name + " a " + arg, InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a map[string]string
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + a[arg]}}}, nil
		})
}

// TestMCPFrozenPinsServerCatalogs: a frozen manager pins each server's
// catalog when it first becomes ready. A refresh (mcp_catalog_refresh)
// that would add a tool or change a schema is refused naming them, and the
// tools and catalog identity stay as bound; a removal narrows; a restart
// cannot widen either. A normal manager exposes every change.
func TestMCPFrozenPinsServerCatalogs(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "normal", true: "frozen"}[frozen], func(t *testing.T) {
			cs := newChangingServer(t)
			f := newFixture(t, tools.Caller{Agent: "executor", Card: "project"})
			m := tools.NewMCPServers(map[string]config.MCPServer{"docs": {Transport: "http", URL: cs.URL + "/mcp"}}, f.env.Root, nil)
			t.Cleanup(m.Close)
			if frozen {
				m.Freeze()
			}
			f.env.MCP = m
			toolNames := func() string {
				specs, err := m.Tools("docs")
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, s := range specs {
					names = append(names, s.Name)
				}
				return strings.Join(names, ",")
			}
			catalog := func() string {
				in, err := m.Info("docs")
				if err != nil {
					t.Fatal(err)
				}
				return in.CatalogUUID
			}
			if out := f.ok("mcp_server_control", map[string]any{"server": "docs", "action": "start"}); !strings.Contains(out, `"tools": 2`) {
				t.Fatalf("start = %s", out)
			}
			if got := toolNames(); got != "count,lookup" {
				t.Fatalf("bound tools = %s", got)
			}

			// A removal narrows, frozen or not.
			cs.srv.RemoveTools("count")
			first := catalog()
			f.ok("mcp_catalog_refresh", map[string]any{"server": "docs"})
			if got := toolNames(); got != "lookup" {
				t.Errorf("after a removal = %s", got)
			}
			narrowed := catalog()
			if narrowed == first {
				t.Error("an accepted refresh kept the catalog UUID")
			}

			// A new tool.
			cs.add("grow", "seed")
			if !frozen {
				f.ok("mcp_catalog_refresh", map[string]any{"server": "docs"})
				if got := toolNames(); got != "grow,lookup" {
					t.Errorf("normal refresh = %s", got)
				}
				if out := f.ok("mcp_tool_call", map[string]any{"server": "docs", "tool": "grow", "arguments": map[string]any{"seed": "x"}}); out != "grow:x" {
					t.Errorf("grow = %q", out)
				}
				return
			}
			f.fails("mcp_catalog_refresh", map[string]any{"server": "docs"}, "new tools grow, refused")
			if got := toolNames(); got != "lookup" {
				t.Errorf("after a refused refresh = %s", got)
			}
			if got := catalog(); got != narrowed {
				t.Errorf("a refused refresh changed the catalog UUID %s -> %s", narrowed, got)
			}
			f.fails("mcp_tool_call", map[string]any{"server": "docs", "tool": "grow", "arguments": map[string]any{"seed": "x"}}, "not in its bound catalog")
			if out := f.ok("mcp_tool_call", map[string]any{"server": "docs", "tool": "lookup", "arguments": map[string]any{"term": "y"}}); out != "lookup:y" {
				t.Errorf("lookup = %q", out)
			}
			if out := f.ok("mcp_servers", map[string]any{}); !strings.Contains(out, `"tools": 1`) {
				t.Errorf("servers = %s", out)
			}

			// A changed schema.
			cs.add("lookup", "word")
			_, err := m.Refresh(context.Background(), "docs")
			if !errors.Is(err, tools.ErrMCPCatalogFrozen) || !strings.Contains(err.Error(), "changed schemas of lookup") || !strings.Contains(err.Error(), "new tools grow") {
				t.Errorf("refresh with a changed schema = %v", err)
			}
			if got := toolNames(); got != "" {
				t.Errorf("a changed schema stayed exposed: %s", got)
			}

			// A restart lists on a new connection; the pin still holds.
			cs.add("lookup", "term")
			_, err = m.Control(context.Background(), "docs", "restart")
			if !errors.Is(err, tools.ErrMCPCatalogFrozen) || !strings.Contains(err.Error(), "restart MCP server \"docs\"") || !strings.Contains(err.Error(), "new tools grow") {
				t.Errorf("restart = %v", err)
			}
			if got := toolNames(); got != "lookup" {
				t.Errorf("after a restart = %s", got)
			}
		})
	}
}
