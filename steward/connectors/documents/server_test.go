package documents

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

func connect(t *testing.T, svc *Service) *mcp.ClientSession {
	t.Helper()
	return mcptooltest.Connect(t, NewServer(svc, "test"))
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func TestMCPTools(t *testing.T) {
	svc, home := newTestService(t, nil)
	cs := connect(t, svc)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("%s is not marked read-only", tl.Name)
		}
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "document_info,document_read,document_search" {
		t.Fatalf("tools %v", names)
	}

	p := filepath.Join(home, "page.html")
	os.WriteFile(p, []byte("<h1>Budget</h1><p>The budget for 2027 is 40k.</p><script>steal()</script>"), 0o600)
	var info InfoResult
	call(t, cs, "document_info", map[string]any{"path": p}, &info)
	if info.Kind != "file" || info.Format != FormatHTML || len(info.Headings) != 1 {
		t.Fatalf("info %+v", info)
	}
	var read ReadResult
	call(t, cs, "document_read", map[string]any{"path": p, "max_chars": 20}, &read)
	if read.Stats.Characters > 20 || !read.Navigation.HasMore || read.Navigation.NextCursor == "" {
		t.Fatalf("read %+v", read)
	}
	call(t, cs, "document_read", map[string]any{"path": p, "cursor": read.Navigation.NextCursor}, &read)
	if strings.Contains(read.Segments[0].Text, "steal") || !strings.Contains(read.Segments[0].Text, "40k") {
		t.Fatalf("continued read %q", read.Segments[0].Text)
	}
	var found SearchResult
	call(t, cs, "document_search", map[string]any{"path": p, "query": "budget 2027"}, &found)
	if len(found.Results) != 1 || !strings.Contains(found.Results[0].Excerpt, "2027") {
		t.Fatalf("search %+v", found)
	}

	res := call(t, cs, "document_read", map[string]any{"path": p, "page": 1, "cursor": read.Navigation.NextCursor}, nil)
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "mutually exclusive") {
		t.Fatalf("page+cursor not refused: %+v", res)
	}
	res = call(t, cs, "document_info", map[string]any{"path": filepath.Join(home, ".ssh", "id_rsa")}, nil)
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, CodeBlocked) {
		t.Fatalf("blocked path not refused: %+v", res)
	}
}
