package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/documents"
	"github.com/agentstack/agentstack/steward/wiki"
)

// TestServeWikiAndExtractorShareOneEmbedder: the wiki serve opens and its
// document extractor embed through one client (the wiki's endpoint, never
// DOCUMENT_EMBED_ENDPOINT), and each caller's requests carry its own usage
// label.
func TestServeWikiAndExtractorShareOneEmbedder(t *testing.T) {
	shared, other := llmtest.NewServer(t), llmtest.NewServer(t)
	home := filepath.Join(t.TempDir(), "home")
	env, _, _ := testEnv(t, map[string]string{"STEWARD_HOME": home,
		"WIKI_EMBED_ENDPOINT": shared.URL, "DOCUMENT_EMBED_ENDPOINT": other.URL})
	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := readWikiSettings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := wiki.InitVault(ws.dir); err != nil {
		t.Fatal(err)
	}
	opts, err := wikiOptions(env, cfg, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc, err := wiki.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Search(ctx, wiki.SearchRequest{Query: "invoices"}); err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(note, []byte("Atlas moves invoices to Postgres.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := opts.Extractor.(*documents.Service).Search(ctx, documents.SearchRequest{Path: note, Query: "invoices"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Search.Semantic.Status != documents.SemanticFull {
		t.Errorf("extractor semantic search = %+v, want it through the shared embedder", res.Search.Semantic)
	}

	labels := map[string]int{}
	for _, r := range shared.Requests() {
		if r.Path != "/v1/embeddings" || r.Model != "local-embed" {
			t.Errorf("shared embedder got %s model %q", r.Path, r.Model)
		}
		labels[r.Header.Get(llm.HeaderUsageService)+"/"+r.Header.Get(llm.HeaderUsageAction)]++
	}
	if labels["wiki/embed"] == 0 || labels["documents-mcp/search-embed"] == 0 || len(labels) != 2 {
		t.Errorf("usage labels on the shared endpoint = %v, want wiki/embed and documents-mcp/search-embed only", labels)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("DOCUMENT_EMBED_ENDPOINT got %d requests inside serve, want 0 (one embedder)", n)
	}
}
