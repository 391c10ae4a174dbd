package shell

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
)

func makeTree(t *testing.T, home string) {
	t.Helper()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	files := map[string]int{
		"Documents/report.pdf": 5000, "Documents/Report-2024.PDF": 100, "Documents/notes.md": 10,
		"Documents/deep/a/b/c/old.pdf": 1, ".ssh/id_ed25519.pdf": 10, "proj/.env.pdf": 10, ".hidden/h.pdf": 10,
		"steward/chats.pdf": 10, "Music/song.mp3": 20000,
	}
	for rel, size := range files {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, make([]byte, size), 0o600)
	}
	os.Chtimes(filepath.Join(home, "Documents/deep/a/b/c/old.pdf"), old, old)
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "Documents", "keys"))
}

func names(res *FindResult) []string {
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Name)
	}
	slices.Sort(out)
	return out
}

func TestFindFiles(t *testing.T) {
	r, home := testRunner(t, nil)
	makeTree(t, home)
	ctx := context.Background()
	cases := []struct {
		name string
		req  FindRequest
		want string
	}{
		{"by extension, case-insensitive", FindRequest{Extensions: []string{"pdf"}}, "Report-2024.PDF,old.pdf,report.pdf"},
		{"hidden on request, protected never", FindRequest{Extensions: []string{".pdf"}, IncludeHidden: true}, "Report-2024.PDF,h.pdf,old.pdf,report.pdf"},
		{"name substring", FindRequest{Name: "REPORT"}, "Report-2024.PDF,report.pdf"},
		{"glob", FindRequest{Glob: "*.md"}, "notes.md"},
		{"size range", FindRequest{MinSize: 50, MaxSize: 10000}, "Report-2024.PDF,report.pdf"},
		{"modified before", FindRequest{ModifiedBefore: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)}, "old.pdf"},
		{"modified after", FindRequest{ModifiedAfter: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), Extensions: []string{"pdf"}}, "Report-2024.PDF,report.pdf"},
		{"depth", FindRequest{Extensions: []string{"pdf"}, MaxDepth: 2}, "Report-2024.PDF,report.pdf"},
		{"directories", FindRequest{Type: "dir", Root: filepath.Join(home, "Documents")}, "a,b,c,deep"},
		{"symlink listed, not followed", FindRequest{Name: "keys", Type: "any"}, "keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.FindFiles(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(res), ","); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	res, err := r.FindFiles(ctx, FindRequest{IncludeHidden: true, Type: "any"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped < 3 {
		t.Fatalf("protected entries not skipped: %d", res.Skipped)
	}
	for _, f := range res.Files {
		if strings.Contains(f.Path, ".ssh") || strings.Contains(f.Path, ".env") || strings.Contains(f.Path, "/steward") {
			t.Fatalf("protected path listed: %s", f.Path)
		}
	}
	res, err = r.FindFiles(ctx, FindRequest{MaxResults: 2, Type: "any"})
	if err != nil || len(res.Files) != 2 || !res.Truncated {
		t.Fatalf("bounded results: %+v %v", res, err)
	}
	for _, bad := range []FindRequest{
		{Root: "relative"}, {Root: filepath.Join(home, ".ssh")}, {Root: filepath.Join(home, "nope")}, {Glob: "[", Root: home}, {Type: "socket"},
	} {
		if _, err := r.FindFiles(ctx, bad); err == nil {
			t.Errorf("FindFiles(%+v) accepted", bad)
		}
	}
}

func TestShellMCPServer(t *testing.T) {
	r, home := testRunner(t, nil)
	makeTree(t, home)
	ctx := context.Background()
	cs := mcptooltest.Connect(t, NewServer(r, "test"))
	ro := mcptooltest.ReadOnlyHints(t, cs, "")
	if len(ro) != 3 || !ro["find_files"] || !ro["run_readonly"] || ro["run_write"] {
		t.Fatalf("tools and read-only hints: %v", ro)
	}
	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if out != nil && !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, out)
		}
		return res
	}
	var found FindResult
	call("find_files", map[string]any{"extensions": []string{"pdf"}, "modified_after": "2021-01-01"}, &found)
	if strings.Join(names(&found), ",") != "Report-2024.PDF,report.pdf" || found.Kind != "search_results" || found.Files[0].Kind != "file" {
		t.Fatalf("find_files: %+v", found)
	}
	var ran Result
	call("run_readonly", map[string]any{"command": "ls Documents | sort"}, &ran)
	if !strings.Contains(ran.Stdout, "notes.md") {
		t.Fatalf("run_readonly: %+v", ran)
	}
	res := call("run_readonly", map[string]any{"command": "cat Documents/notes.md > /tmp/x"}, nil)
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "redirection") {
		t.Fatalf("redirection not refused: %+v", res)
	}
	res = call("find_files", map[string]any{"modified_after": "yesterday"}, nil)
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not a date") {
		t.Fatalf("bad date: %+v", res)
	}
	call("run_write", map[string]any{"command": "mkdir made"}, &ran)
	if _, err := os.Stat(filepath.Join(home, "made")); err != nil || ran.ExitCode != 0 {
		t.Fatalf("run_write: %+v %v", ran, err)
	}
}
