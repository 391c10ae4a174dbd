package contacts

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

func TestMCPServerTools(t *testing.T) {
	e := fixtureIndex(t, nil)
	ctx := context.Background()
	svc := NewService(e.idx, nil)
	cs := mcptooltest.Connect(t, NewMCPServer(func(context.Context) (*Service, error) { return svc, nil }, "test"))
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
	r, _ := mcptooltest.Call[Resolution](t, cs, "resolve_recipient", map[string]any{"description": "my accountant"})
	if len(r.Candidates) == 0 || r.Candidates[0].Name != "Marco Rossi" || r.Candidates[0].Emails[0].Value != "marco@studiorossi.it" {
		t.Errorf("resolve_recipient over MCP: %+v", r)
	}
	s, _ := mcptooltest.Call[SearchResult](t, cs, "search_contacts", map[string]any{"query": "verdi"})
	if s.Kind != "search_results" || len(s.Contacts) != 1 || s.Contacts[0].Kind != "contact" || s.Contacts[0].Sources != 3 {
		t.Errorf("search_contacts over MCP: %+v", s)
	}
	p, _ := mcptooltest.Call[Person](t, cs, "read_contact", map[string]any{"uid": s.Contacts[0].UID})
	if p.Name != "Anna Verdi" || len(p.Sources) != 3 || p.Addresses[0].City != "Milano" {
		t.Errorf("read_contact over MCP: %+v", p)
	}
	if _, res := mcptooltest.Call[any](t, cs, "read_contact", map[string]any{"uid": "nobody"}); !res.IsError ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no contact") {
		t.Errorf("unknown uid: %+v", res.Content)
	}
	if _, res := mcptooltest.Call[any](t, cs, "resolve_recipient", map[string]any{"description": ""}); !res.IsError {
		t.Error("empty description accepted")
	}
}
