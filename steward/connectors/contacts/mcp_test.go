package contacts

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPServerTools(t *testing.T) {
	e := fixtureIndex(t, nil)
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	svc := NewService(e.idx, nil)
	ss, err := NewMCPServer(func(context.Context) (*Service, error) { return svc, nil }, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"read_contact", "resolve_recipient", "search_contacts"}) {
		t.Fatalf("tools %v", names)
	}
	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !res.IsError && out != nil {
			if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), out); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	var r Resolution
	call("resolve_recipient", map[string]any{"description": "my accountant"}, &r)
	if len(r.Candidates) == 0 || r.Candidates[0].Name != "Marco Rossi" || r.Candidates[0].Emails[0].Value != "marco@studiorossi.it" {
		t.Errorf("resolve_recipient over MCP: %+v", r)
	}
	var s SearchResult
	call("search_contacts", map[string]any{"query": "verdi"}, &s)
	if len(s.Contacts) != 1 || s.Contacts[0].Sources != 3 {
		t.Errorf("search_contacts over MCP: %+v", s)
	}
	var p Person
	call("read_contact", map[string]any{"uid": s.Contacts[0].UID}, &p)
	if p.Name != "Anna Verdi" || len(p.Sources) != 3 || p.Addresses[0].City != "Milano" {
		t.Errorf("read_contact over MCP: %+v", p)
	}
	if res := call("read_contact", map[string]any{"uid": "nobody"}, nil); !res.IsError ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no contact") {
		t.Errorf("unknown uid: %+v", res.Content)
	}
	if res := call("resolve_recipient", map[string]any{"description": ""}, nil); !res.IsError {
		t.Error("empty description accepted")
	}
}
