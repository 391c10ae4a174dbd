package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPFrozenCatalogOverHTTP: with the Git workflow on, a config.yaml
// server whose tool list grows after it started cannot widen through the
// /api/mcp routes: refresh and restart answer 409 naming the new tool and
// the workflow, and /api/mcp/tools keeps the bound tools.
func TestMCPFrozenCatalogOverHTTP(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	add := func(name string) {
		server.AddTool(&mcp.Tool{Name: name, Description: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
			})
	}
	add("define")
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(h.Close)
	s := startTemplate(t, "classic-git", gitCheckout(t), nil, func(_, cfg string) string {
		return cfg + "  changing:\n    transport: http\n    url: " + h.URL + "/mcp\n"
	})
	if code, m := s.do("POST", "/api/mcp/servers/changing/start", token, ""); code != 200 {
		t.Fatalf("start = %d %v", code, m)
	}
	tools := func() string {
		var out struct {
			Servers []struct {
				Name  string
				Tools []struct{ Name string }
			}
		}
		s.get("/api/mcp/tools", &out)
		for _, sv := range out.Servers {
			if sv.Name == "changing" {
				return fmt.Sprint(sv.Tools)
			}
		}
		return "absent"
	}
	if got := tools(); got != "[{define}]" {
		t.Fatalf("bound tools = %s", got)
	}
	add("grow")
	for _, action := range []string{"refresh", "restart"} {
		code, m := s.do("POST", "/api/mcp/servers/changing/"+action, token, "")
		if msg := fmt.Sprint(m); code != 409 || !strings.Contains(msg, "new tools grow") || !strings.Contains(msg, "Git workflow is on") {
			t.Errorf("POST %s = %d %v", action, code, m)
		}
		if got := tools(); got != "[{define}]" {
			t.Errorf("tools after %s = %s", action, got)
		}
	}
}
