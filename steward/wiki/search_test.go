package wiki

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

func paths(rs []SearchResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}

func mustSearch(t *testing.T, s *Service, req SearchRequest) *SearchResponse {
	t.Helper()
	res, err := s.Search(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSearchTextCJKDiacriticsSubstring(t *testing.T) {
	dir := writeVault(t, map[string]string{
		"wiki/Tokyo.md":    "---\ntitle: Tokyo office\ntype: organization\nsources: [raw/sources/a.md]\n---\n東京都の新しいオフィスは来月開きます。\n",
		"wiki/Citta.md":    "---\ntitle: Città di Milano\ntype: entity\nsources: [raw/sources/a.md]\n---\nLa città ospita il progetto Atlas.\n",
		"wiki/Atlas.md":    "---\ntitle: Project Atlas\ntype: concept\nsources: [raw/sources/b.md]\n---\nAtlas is the migration of invoices to Postgres. See [[Citta]].\n",
		"wiki/Budget.md":   "---\ntitle: Budget\ntype: decision\nsources: [raw/sources/b.md]\n---\nApproved 40k for [[Atlas]].\n",
		"wiki/Other.md":    "---\ntitle: Gardening\ntype: concept\nsources: [raw/sources/c.md]\n---\nTomatoes and basil.\n",
		"raw/sources/a.md": "Minutes: the Kyoto team met about invoices.",
	})
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	cases := []struct {
		query, want string
		req         SearchRequest
	}{
		{query: "京都", want: "wiki/Tokyo.md"}, // a word inside a CJK sentence
		{query: "オフィス", want: "wiki/Tokyo.md"},
		{query: "citta", want: "wiki/Citta.md"}, // without the accent
		{query: "CITTÀ", want: "wiki/Citta.md"},
		{query: "postgr", want: "wiki/Atlas.md"}, // a substring of a word
		{query: "igration", want: "wiki/Atlas.md"},
		{query: "project atlas", want: "wiki/Atlas.md"},
	}
	for _, c := range cases {
		res := mustSearch(t, s, SearchRequest{Query: c.query, NoExpand: true})
		if len(res.Results) == 0 || res.Results[0].Path != c.want {
			t.Errorf("search %q = %v, want %s first", c.query, paths(res.Results), c.want)
		}
		if res.Mode != "lexical" {
			t.Errorf("mode = %s without an embedder", res.Mode)
		}
	}
	// Raw sources only when asked.
	if res := mustSearch(t, s, SearchRequest{Query: "kyoto", NoExpand: true}); len(res.Results) != 0 {
		t.Errorf("sources searched without includeSources: %v", paths(res.Results))
	}
	if res := mustSearch(t, s, SearchRequest{Query: "kyoto", IncludeSources: true}); len(res.Results) == 0 || res.Results[0].Kind != "source" {
		t.Errorf("includeSources: %+v", res.Results)
	}
	// Graph expansion adds the budget decision linked to Atlas, marked via.
	res := mustSearch(t, s, SearchRequest{Query: "postgres"})
	var via string
	for _, r := range res.Results {
		if r.Path == "wiki/Budget.md" {
			via = r.Via
		}
	}
	if via != "wiki/Atlas.md" {
		t.Errorf("expanded results %+v: want Budget via Atlas", res.Results)
	}
	if _, err := s.Search(context.Background(), SearchRequest{Query: "  "}); err == nil {
		t.Error("empty query accepted")
	}
	// FTS5 syntax in user text is matched literally, never parsed.
	mustSearch(t, s, SearchRequest{Query: `"unbalanced AND ( NEAR* title:`})
}

func TestSearchVectorsAndLexicalFallback(t *testing.T) {
	prov := llmtest.NewServer(t)
	dir := writeVault(t, map[string]string{
		"wiki/A.md": "---\ntitle: Alpha\n---\nThe quarterly revenue report.\n",
		"wiki/B.md": "---\ntitle: Beta\n---\nHiking trip to the Dolomites.\n",
	})
	emb := &llm.Embedder{Client: llm.NewClient(llm.ClientOptions{BaseURL: prov.URL}), Model: "local-embed"}
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir(), Embedder: emb})
	if n := s.Embed(context.Background()); n != 2 {
		t.Fatalf("embedded %d pages, want 2", n)
	}
	// The scripted provider gives equal texts equal vectors: a query equal
	// to a page's embedded text finds it by meaning alone.
	res := mustSearch(t, s, SearchRequest{Query: "Beta\nHiking trip to the Dolomites.\n", NoExpand: true})
	if res.Mode != "hybrid" || len(res.Results) == 0 || res.Results[0].Path != "wiki/B.md" {
		t.Errorf("hybrid search = %s %v", res.Mode, paths(res.Results))
	}
	// Unchanged pages are not embedded again.
	before := len(prov.Requests())
	if n := s.Embed(context.Background()); n != 0 {
		t.Errorf("re-embedded %d unchanged pages", n)
	}
	for _, r := range prov.Requests()[before:] {
		if strings.Contains(string(r.Raw), "quarterly") {
			t.Errorf("unchanged page text sent again: %s", r.Raw)
		}
	}
	// A rebuild starts the vectors again (row ids are new) and re-embeds.
	if _, err := s.Reindex(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := mustSearch(t, s, SearchRequest{Query: "Beta\nHiking trip to the Dolomites.\n", NoExpand: true}); res.Mode != "hybrid" || res.Results[0].Path != "wiki/B.md" {
		t.Errorf("after a rebuild: %s %v", res.Mode, paths(res.Results))
	}
	prov.Close()
	res = mustSearch(t, s, SearchRequest{Query: "revenue", NoExpand: true})
	if res.Mode != "lexical" || res.Warning == "" || len(res.Results) != 1 || res.Results[0].Path != "wiki/A.md" {
		t.Errorf("with the provider down: %+v", res)
	}
}

func TestGraphRelevanceAndCommunities(t *testing.T) {
	files := map[string]string{}
	// Two cliques of five pages joined by one bridge page.
	for c, name := range []string{"red", "blue"} {
		for i := 0; i < 5; i++ {
			var links []string
			for j := 0; j < 5; j++ {
				if j != i {
					links = append(links, fmt.Sprintf("[[%s%d]]", name, j))
				}
			}
			files[fmt.Sprintf("wiki/%s%d.md", name, i)] = fmt.Sprintf("---\ntitle: %s%d\ntype: concept\nsources: [raw/sources/%d.md]\n---\n%s\n", name, i, c, strings.Join(links, " "))
		}
	}
	files["wiki/bridge.md"] = "---\ntitle: bridge\ntype: entity\nsources: [raw/sources/9.md]\n---\n[[red0]] [[blue0]] [[green]]\n"
	files["wiki/green.md"] = "---\ntitle: green\ntype: entity\nsources: [raw/sources/9.md]\n---\nalone but linked\n"
	files["wiki/lonely.md"] = "---\ntitle: lonely\ntype: person\nsources: [raw/sources/8.md]\n---\nno links\n"
	s := openService(t, Options{Dir: writeVault(t, files), IndexDir: t.TempDir()})
	g, err := s.Graph(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	comm := map[string]int{}
	for _, n := range g.Nodes {
		comm[n.Path] = n.Community
	}
	for i := 1; i < 5; i++ {
		if comm[fmt.Sprintf("wiki/red%d.md", i)] != comm["wiki/red0.md"] || comm[fmt.Sprintf("wiki/blue%d.md", i)] != comm["wiki/blue0.md"] {
			t.Fatalf("cliques split: %v", comm)
		}
	}
	if comm["wiki/red0.md"] == comm["wiki/blue0.md"] {
		t.Errorf("the two cliques share a community: %v", comm)
	}
	if g.Modularity < 0.3 {
		t.Errorf("modularity %.3f", g.Modularity)
	}
	if len(g.Insights.Isolated) != 1 || g.Insights.Isolated[0] != "wiki/lonely.md" {
		t.Errorf("isolated = %v", g.Insights.Isolated)
	}
	if !contains(g.Insights.Bridges, "wiki/bridge.md") {
		t.Errorf("bridges = %v", g.Insights.Bridges)
	}
	// red1–red2: direct link ×3, one shared source ×4, Adamic-Adar over the
	// three common neighbours (each of degree 4, red0 of degree 5) ×1.5,
	// same type ×1.
	r := g.Relevance("wiki/red1.md", "wiki/red2.md")
	wantAA := 2/mathLog(4) + 1/mathLog(5)
	want := 3 + 4 + 1.5*wantAA + 1
	if !r.DirectLink || r.SharedSources != 1 || r.TypeAffinity != 1 || abs(r.Relevance-want) > 0.01 {
		t.Errorf("relevance = %+v, want %.3f", r, want)
	}
	// bridge–green: linked, share a source, no common neighbour, same type.
	if r := g.Relevance("wiki/bridge.md", "wiki/green.md"); abs(r.Relevance-(3+4+1)) > 0.001 || r.AdamicAdar != 0 {
		t.Errorf("bridge–green = %+v", r)
	}
	nb := g.Neighbors("wiki/red1.md", 3)
	if len(nb) != 3 || !strings.HasPrefix(nb[0].Path, "wiki/red") {
		t.Errorf("neighbours = %+v", nb)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestBadInput: broken YAML, a 50 MiB page, binary junk, a link cycle —
// each is reported, search keeps working, and nothing is rewritten.
func TestBadInput(t *testing.T) {
	dir := writeVault(t, map[string]string{
		"wiki/Broken.md": "---\ntitle: [unclosed\ntype: concept\n---\nBody with the word zeppelin.\n",
		"wiki/Cycle1.md": "---\ntitle: Cycle1\n---\n[[Cycle2]] zeppelin\n",
		"wiki/Cycle2.md": "---\ntitle: Cycle2\n---\n[[Cycle1]]\n",
		"wiki/Junk.md":   "\x00\x01\x02binary\xff\xfe",
		"wiki/junk.bin":  string([]byte{0, 1, 2, 3}),
		"wiki/Good.md":   "---\ntitle: Good\nreview_by: 2020-01-01\n---\nzeppelin hangar\n",
	})
	big := filepath.Join(dir, "wiki", "Huge.md")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("zeppelin filler text ", 50) + "\n")
	for written := 0; written < 50<<20; written += len(line) {
		f.Write(line)
	}
	f.Close()
	before := treeHashes(t, dir)
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	if _, err := s.Reindex(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep := s.Lint(context.Background())
	if rep.Count("frontmatter") != 1 || rep.Count("unreadable") != 2 || rep.Count("overdue_review") != 1 {
		t.Errorf("lint = %+v", rep.Issues)
	}
	var huge string
	for _, i := range rep.Issues {
		if i.Path == "wiki/Huge.md" {
			huge = i.Message
		}
	}
	if !strings.Contains(huge, "page limit") {
		t.Errorf("50 MiB page: %q", huge)
	}
	res := mustSearch(t, s, SearchRequest{Query: "zeppelin"})
	got := paths(res.Results)
	if !contains(got, "wiki/Broken.md") || !contains(got, "wiki/Cycle1.md") || !contains(got, "wiki/Good.md") || contains(got, "wiki/Huge.md") {
		t.Errorf("search = %v", got)
	}
	if _, err := s.Graph(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(context.Background())
	if err != nil || len(st.Problems) != 2 {
		t.Errorf("status problems = %+v, %v", st, err)
	}
	// Writing a page with broken YAML is refused.
	if _, err := s.WritePage(context.Background(), WriteRequest{Path: "wiki/New.md", Content: "---\ntitle: [x\n---\n"}); err == nil || !strings.Contains(err.Error(), "YAML") {
		t.Errorf("broken YAML write: %v", err)
	}
	after := treeHashes(t, dir)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s was rewritten", p)
		}
	}
	if len(after) != len(before) {
		t.Errorf("files added: %d → %d", len(before), len(after))
	}
}

// TestReadOnlyVault opens a vault on a read-only filesystem: indexing,
// search and lint work; a write reports the filesystem error.
func TestReadOnlyVault(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := exec.Command("mount", "-t", "tmpfs", "tmpfs", dir).Run(); err != nil {
			t.Skipf("cannot mount a tmpfs as root here: %v", err)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
	}
	os.MkdirAll(filepath.Join(dir, "wiki"), 0o755)
	os.WriteFile(filepath.Join(dir, "wiki", "A.md"), []byte("---\ntitle: A\n---\nread only [[B]]\n"), 0o444)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
			t.Fatalf("remount read-only: %v %s", err, out)
		}
	} else {
		os.Chmod(filepath.Join(dir, "wiki"), 0o555)
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755); os.Chmod(filepath.Join(dir, "wiki"), 0o755) })
	}
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	if res := mustSearch(t, s, SearchRequest{Query: "read only"}); len(res.Results) != 1 {
		t.Errorf("search on a read-only vault: %v", paths(res.Results))
	}
	if s.Lint(context.Background()).Count("broken_link") != 1 {
		t.Error("lint on a read-only vault")
	}
	_, err := s.WritePage(context.Background(), WriteRequest{Path: "wiki/A.md", Content: "---\ntitle: A\n---\nchanged\n"})
	if err == nil || !strings.Contains(err.Error(), "read-only") && !strings.Contains(err.Error(), "permission") {
		t.Errorf("write on a read-only vault: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "wiki", "A.md")); !strings.Contains(string(b), "read only") {
		t.Error("page lost")
	}
}

func TestWriteConflict(t *testing.T) {
	dir := writeVault(t, map[string]string{"wiki/P.md": "---\ntitle: P\n---\none\n"})
	s := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	ctx := context.Background()
	r, err := s.Read(ctx, ReadRequest{Path: "wiki/P.md"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "wiki", "P.md"), []byte("---\ntitle: P\n---\nchanged outside\n"), 0o644)
	_, err = s.WritePage(ctx, WriteRequest{Path: "wiki/P.md", Content: "---\ntitle: P\n---\nmine\n", BaseHash: r.Hash})
	if err == nil || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("stale write: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "wiki", "P.md")); !strings.Contains(string(b), "changed outside") {
		t.Error("the outside change was overwritten")
	}
	r, _ = s.Read(ctx, ReadRequest{Path: "wiki/P.md"})
	if _, err := s.WritePage(ctx, WriteRequest{Path: "wiki/P.md", Content: "---\ntitle: P\n---\nmerged\n", BaseHash: r.Hash}); err != nil {
		t.Fatal(err)
	}
	if res := mustSearch(t, s, SearchRequest{Query: "merged"}); len(res.Results) != 1 {
		t.Error("the write was not indexed")
	}
	if _, err := s.WritePage(ctx, WriteRequest{Path: "wiki/P.md", Content: "---\ntitle: P\n---\nx\n", BaseHash: "new"}); err == nil {
		t.Error("baseHash new overwrote an existing page")
	}
	for _, bad := range []string{"../escape.md", "raw/sources/x.md", "wiki/a.txt"} {
		if _, err := s.WritePage(ctx, WriteRequest{Path: bad, Content: "---\ntitle: x\n---\n"}); err == nil {
			t.Errorf("write %s accepted", bad)
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, LogFile))
	if !strings.Contains(string(log), "] edit | wiki/P.md") {
		t.Errorf("log.md = %s", log)
	}
}

func TestReadPaginates(t *testing.T) {
	body := strings.Repeat("ä", 12000)
	s := openService(t, Options{Dir: writeVault(t, map[string]string{"wiki/L.md": body, "wiki/M.md": "[[L]]"}), IndexDir: t.TempDir()})
	r, err := s.Read(context.Background(), ReadRequest{Path: "wiki/L.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len([]rune(r.Text)) != ReadPageChars || r.NextOffset != ReadPageChars || r.TotalChars != 12000 || len(r.Backlinks) != 1 {
		t.Errorf("first page: %d chars, next %d, total %d, backlinks %v", len([]rune(r.Text)), r.NextOffset, r.TotalChars, r.Backlinks)
	}
	r, _ = s.Read(context.Background(), ReadRequest{Path: "wiki/L.md", Offset: 10000})
	if len([]rune(r.Text)) != 2000 || r.NextOffset != 0 {
		t.Errorf("last page: %d chars, next %d", len([]rune(r.Text)), r.NextOffset)
	}
	if _, err := s.Read(context.Background(), ReadRequest{Path: "../../etc/passwd"}); err == nil {
		t.Error("traversal read")
	}
}

func mathLog(x float64) float64 { return math.Log(x) }
