package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
	"github.com/agentstack/agentstack/steward/connectors/mcptool/mcptooltest"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/wiki"
)

func writeTestVault(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := wiki.InitVault(dir); err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{
		"wiki/Project Atlas.md": "---\ntitle: Project Atlas\ntype: concept\nsources: [raw/sources/minutes.md]\n---\nAtlas moves invoices to Postgres. Owner: [[Anna Rossi]].\n",
		"wiki/Anna Rossi.md":    "---\ntitle: Anna Rossi\ntype: person\nsources: [raw/sources/minutes.md]\n---\nLeads [[Project Atlas]].\n",
	} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		os.WriteFile(full, []byte(body), 0o644)
	}
	return dir
}

// TestMCPWiki runs `steward mcp wiki` as a real process and uses it with
// the official go-sdk MCP client: every tool is listed and called, read
// tools are annotated read-only, and the policy allows exactly those and
// gates the writers.
func TestMCPWiki(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	vault := writeTestVault(t)
	cmd := exec.Command(buildSteward(t), "mcp", "wiki")
	cmd.Env = append(os.Environ(), "STEWARD_HOME="+t.TempDir(), "STEWARD_WIKI_DIR="+vault, "WIKI_EMBED_ENDPOINT=off",
		"GATEWAY_BASE_URL=http://127.0.0.1:9/v1")
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	hints := mcptooltest.ReadOnlyHints(t, cs, "wiki") // what the bridge reads from the listing
	pol, _ := policy.New(policy.Options{Connectors: mcpNames(), Hints: policy.StaticHints(hints)})
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		want := policy.Gate
		if readOnly {
			want = policy.Allow
		}
		if got := pol.Decide(mcpbridge.ToolName("wiki", tool.Name)); got != want {
			t.Errorf("policy for %s (read-only %v) = %s, want %s", tool.Name, readOnly, got, want)
		}
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "wiki_graph wiki_ingest wiki_lint wiki_list wiki_read wiki_rescan wiki_search wiki_status wiki_write_page" {
		t.Fatalf("tools = %v", names)
	}
	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError && out != nil {
			if err := json.Unmarshal([]byte(text), out); err != nil {
				t.Fatalf("%s: %v: %s", name, err, text)
			}
		}
		return res
	}
	var sr wiki.SearchResponse
	call("wiki_search", map[string]any{"query": "postgres invoices"}, &sr)
	if len(sr.Results) < 2 || sr.Results[0].Path != "wiki/Project Atlas.md" || sr.Results[1].Via != "wiki/Project Atlas.md" {
		t.Errorf("wiki_search = %+v", sr.Results)
	}
	var rr wiki.ReadResult
	call("wiki_read", map[string]any{"path": "wiki/Project Atlas.md"}, &rr)
	if rr.Title != "Project Atlas" || len(rr.Backlinks) != 1 || rr.Link != "#/wiki/wiki%2FProject%20Atlas.md" {
		t.Errorf("wiki_read = %+v", rr)
	}
	var gr wiki.GraphResult
	call("wiki_graph", map[string]any{"path": "Anna Rossi"}, &gr)
	if len(gr.Neighbors) != 1 || gr.Neighbors[0].Path != "wiki/Project Atlas.md" || gr.Neighbors[0].SharedSources != 1 {
		t.Errorf("wiki_graph = %+v", gr)
	}
	var lr wiki.ListResult
	call("wiki_list", map[string]any{"prefix": "wiki"}, &lr)
	if lr.Total != 2 {
		t.Errorf("wiki_list = %+v", lr)
	}
	var lint wiki.LintReport
	call("wiki_lint", map[string]any{}, &lint)
	if lint.Pages != 7 {
		t.Errorf("wiki_lint = %+v", lint)
	}
	var st wiki.Status
	call("wiki_status", map[string]any{}, &st)
	if st.Pages != 7 || st.Indexed != 7 || st.Vectors {
		t.Errorf("wiki_status = %+v", st)
	}
	var wr wiki.WriteResult
	call("wiki_write_page", map[string]any{"path": "wiki/Budget.md", "content": "---\ntitle: Budget\ntype: decision\nsources: [raw/sources/minutes.md]\n---\n40k for [[Project Atlas]].\n", "baseHash": "new"}, &wr)
	if b, err := os.ReadFile(filepath.Join(vault, "wiki", "Budget.md")); err != nil || !strings.Contains(string(b), "40k") {
		t.Errorf("wiki_write_page did not write: %v", err)
	}
	if res := call("wiki_write_page", map[string]any{"path": "wiki/Budget.md", "content": "---\ntitle: x\n---\n", "baseHash": "new"}, nil); !res.IsError {
		t.Error("overwrote an existing page with baseHash new")
	}
	os.WriteFile(filepath.Join(vault, "wiki", "Outside.md"), []byte("written by another editor"), 0o644)
	var sync wiki.SyncStats
	call("wiki_rescan", map[string]any{}, &sync)
	if sync.Added != 1 {
		t.Errorf("wiki_rescan = %+v", sync)
	}
	os.WriteFile(filepath.Join(vault, "raw", "sources", "minutes.md"), []byte("minutes"), 0o644)
	var ir wiki.IngestResult
	call("wiki_ingest", map[string]any{"path": "raw/sources/minutes.md"}, &ir)
	if ir.Task == nil || ir.Task.Source != "raw/sources/minutes.md" {
		t.Errorf("wiki_ingest = %+v", ir)
	}
}

func TestWikiCLI(t *testing.T) {
	vault := writeTestVault(t)
	env, out, errb := testEnv(t, map[string]string{"STEWARD_WIKI_DIR": vault, "WIKI_EMBED_ENDPOINT": "off"})
	ctx := context.Background()
	if code := run(ctx, []string{"wiki", "search", "--json", "atlas"}, env); code != 0 {
		t.Fatalf("search exit %d: %s", code, errb)
	}
	var sr wiki.SearchResponse
	if err := json.Unmarshal(out.Bytes(), &sr); err != nil || len(sr.Results) == 0 || sr.Results[0].Title != "Project Atlas" {
		t.Errorf("search --json: %v %s", err, out)
	}
	out.Reset()
	if code := run(ctx, []string{"wiki", "status", "--json"}, env); code != 0 {
		t.Fatalf("status exit %d: %s", code, errb)
	}
	var st wiki.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Pages != 7 {
		t.Errorf("status --json: %v %s", err, out)
	}
	out.Reset()
	// Lint exits 1 with issues: the scaffold's fixed pages are fine, a
	// broken link is not.
	os.WriteFile(filepath.Join(vault, "wiki", "Broken.md"), []byte("---\ntitle: Broken\n---\n[[Nowhere]]\n"), 0o644)
	if code := run(ctx, []string{"wiki", "lint"}, env); code != 1 || !strings.Contains(out.String(), "wiki/Broken.md:4: broken_link") {
		t.Errorf("lint exit %d: %s", code, out)
	}
	out.Reset()
	if code := run(ctx, []string{"wiki", "reindex", "--json"}, env); code != 0 {
		t.Fatalf("reindex: %s", errb)
	}
	src := filepath.Join(t.TempDir(), "notes.md")
	os.WriteFile(src, []byte("notes"), 0o644)
	out.Reset()
	if code := run(ctx, []string{"wiki", "add", "--json", src}, env); code != 0 {
		t.Fatalf("add: %s", errb)
	}
	var added struct {
		Items []wiki.AddItem
		Tasks []*wiki.Task
	}
	if err := json.Unmarshal(out.Bytes(), &added); err != nil || len(added.Items) != 1 || added.Items[0].Dest != "raw/sources/notes.md" || len(added.Tasks) != 1 {
		t.Errorf("add --json: %v %s", err, out)
	}
	if code := run(ctx, []string{"wiki", "bogus"}, env); code != 2 {
		t.Errorf("unknown subcommand exit %d", code)
	}
}
