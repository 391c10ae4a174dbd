package documents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/agentstack/agentstack/search"
)

// bagEmbedder hashes folded words into a small vector: texts sharing words
// get similar vectors. fail decides per text whether to return no vector.
type bagEmbedder struct {
	mu    sync.Mutex
	calls int
	texts int
	fail  func(text string) bool
	err   error
}

func (b *bagEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	b.mu.Lock()
	b.calls++
	b.texts += len(texts)
	b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if b.fail != nil && b.fail(t) {
			continue
		}
		v := make([]float32, 32)
		for _, w := range search.Terms(t) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%32]++
		}
		out[i] = v
	}
	return out, nil
}

func TestChunking(t *testing.T) {
	text := strings.Repeat("Sentence number one is here. Another line follows\n", 400) // ~20,000 chars
	chunks := buildChunks([]Page{{Number: 1, Text: text}, {Number: 2, Text: "tiny"}})
	if len(chunks) < 11 || chunks[len(chunks)-1].page != 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, c := range chunks[:len(chunks)-1] {
		seg := text[c.start:c.end]
		if n := utf8.RuneCountInString(seg); n > ChunkChars {
			t.Fatalf("chunk %d has %d chars", i, n)
		}
		if c.end < len(text) && !strings.HasSuffix(seg, "\n") {
			t.Fatalf("chunk %d does not end at a newline: %q", i, seg[len(seg)-20:])
		}
		if next := chunks[i+1]; next.page == 1 {
			if next.start >= c.end || c.end-next.start > ChunkOverlap+10 || c.end-next.start < ChunkOverlap-60 {
				t.Fatalf("chunks %d/%d overlap %d bytes", i, i+1, c.end-next.start)
			}
		}
	}
	if last := chunks[len(chunks)-2]; last.end != len(text) {
		t.Fatal("page 1 not fully covered")
	}
}

func TestLexicalSearch(t *testing.T) {
	svc, home := newTestService(t, nil)
	pages := pagesText(6, 4000)
	pages[3] += " The quarterly invoice for Città di Milano is overdue. "
	pages[1] += " invoice overdue milano quarterly città scattered words here. "
	p := filepath.Join(home, "doc.pdf")
	os.WriteFile(p, generatePDF(pages, pdfOptions{Compress: true}), 0o600)
	ctx := context.Background()
	res, err := svc.Search(ctx, SearchRequest{Path: p, Query: "Quarterly invoice for CITTA di Milano"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Page != 4 {
		t.Fatalf("phrase match not first: %s", mustJSON(t, res.Results))
	}
	if res.Search.Semantic.Status != SemanticDisabled {
		t.Fatalf("semantic status %q", res.Search.Semantic.Status)
	}
	top := res.Results[0]
	if !strings.Contains(top.Excerpt, "Città di Milano") || utf8.RuneCountInString(top.Excerpt) > DefaultContextChars+2 {
		t.Fatalf("excerpt %q", top.Excerpt)
	}
	if !strings.HasPrefix(top.Excerpt, "…") {
		t.Fatalf("missing ellipsis marker: %q", top.Excerpt)
	}
	r, err := svc.Read(ctx, ReadRequest{Path: p, Cursor: top.Cursor, MaxChars: 400})
	if err != nil || r.Segments[0].Page != 4 || r.Segments[0].Offset != top.Offset {
		t.Fatalf("match cursor read: %+v %v", r, err)
	}
	// Caps.
	res, err = svc.Search(ctx, SearchRequest{Path: p, Query: "sentence topic words", MaxResults: 50, ContextChars: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != MaxResults {
		t.Fatalf("%d results, want the cap %d", len(res.Results), MaxResults)
	}
	for _, m := range res.Results {
		if utf8.RuneCountInString(m.Excerpt) > MaxContextChars+2 {
			t.Fatalf("excerpt of %d chars", utf8.RuneCountInString(m.Excerpt))
		}
	}
	res, err = svc.Search(ctx, SearchRequest{Path: p, Query: "zzzabsent"})
	if err != nil || len(res.Results) != 0 || res.Results == nil {
		t.Fatalf("absent query: %+v %v", res, err)
	}
	if _, err := svc.Search(ctx, SearchRequest{Path: p, Query: "  "}); ErrorCode(err) != CodeInvalidArgument {
		t.Fatalf("empty query: %v", err)
	}
}

func TestLexicalCandidatesBounded(t *testing.T) {
	var pages []Page
	for i := range 200 {
		pages = append(pages, Page{Number: i + 1, Text: fmt.Sprintf("common word %d", i)})
	}
	chunks := buildChunks(pages)
	got := lexicalRank(chunks, buildPostings(chunks), "common")
	if len(got) != MaxCandidates {
		t.Fatalf("%d candidates, want %d", len(got), MaxCandidates)
	}
	// Term counts are bounded: 1,000 repetitions do not beat a chunk
	// matching both terms.
	chunks = buildChunks([]Page{{Number: 1, Text: strings.Repeat("alpha ", 1000)}, {Number: 2, Text: "alpha beta"}, {Number: 3, Text: "gamma"}})
	got = lexicalRank(chunks, buildPostings(chunks), "alpha beta")
	if chunks[got[0].id].page != 2 {
		t.Fatalf("spam chunk ranked first: %+v", got)
	}
	// A word starting with the term counts, at half weight.
	chunks = buildChunks([]Page{{Number: 1, Text: "several invoices"}, {Number: 2, Text: "one invoice"}, {Number: 3, Text: "nothing"}})
	got = lexicalRank(chunks, buildPostings(chunks), "invoice")
	if len(got) != 2 || chunks[got[0].id].page != 2 || chunks[got[1].id].page != 1 {
		t.Fatalf("prefix ranking: %+v", got)
	}
}

func TestSemanticStatuses(t *testing.T) {
	ctx := context.Background()
	small := strings.Join(pagesText(1, 6000), "")
	large := strings.Repeat("filler sentence about nothing in particular. ", 12_000) // > 256 chunks
	cases := []struct {
		name     string
		text     string
		emb      *bagEmbedder
		status   string
		selected int
		embedded int
	}{
		{"full", small, &bagEmbedder{}, SemanticFull, 4, 4},
		{"sampled", large, &bagEmbedder{}, SemanticSampled, MaxSemanticChunks, MaxSemanticChunks},
		{"partial", small, &bagEmbedder{fail: func(s string) bool { return strings.Contains(s, "sentence 0 ") }}, SemanticPartial, 4, 3},
		{"unavailable", small, &bagEmbedder{err: errors.New("connection refused")}, SemanticUnavailable, 4, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, home := newTestService(t, func(o *Options) { o.Embedder, o.EmbedderID = tc.emb, "test|1" })
			p := filepath.Join(home, "d.txt")
			os.WriteFile(p, []byte(tc.text), 0o600)
			res, err := svc.Search(ctx, SearchRequest{Path: p, Query: "topic1 words"})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Search.Semantic
			if s.Status != tc.status || s.Selected != tc.selected || s.Embedded != tc.embedded || s.Missing != tc.selected-tc.embedded {
				t.Fatalf("semantic %+v (chunks %d)", s, res.Search.Chunks)
			}
			if tc.status == SemanticSampled {
				if tc.emb.texts != MaxSemanticChunks+1 || tc.emb.calls != 1+MaxSemanticChunks/EmbedBatch {
					t.Fatalf("embedded %d texts in %d calls", tc.emb.texts, tc.emb.calls)
				}
				if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[len(res.Warnings)-1], "sampled") {
					t.Fatalf("no sampling warning: %v", res.Warnings)
				}
			}
			if tc.status == SemanticUnavailable && len(res.Results) == 0 {
				t.Fatal("embedding failure must still give lexical results")
			}
		})
	}
}

func TestSemanticRetryAndInvalidation(t *testing.T) {
	ctx := context.Background()
	failing := true
	emb := &bagEmbedder{fail: func(s string) bool { return failing && len(s) > 20 }}
	svc, home := newTestService(t, func(o *Options) { o.Embedder, o.EmbedderID = emb, "a" })
	p := filepath.Join(home, "d.txt")
	os.WriteFile(p, []byte(strings.Join(pagesText(1, 4000), "")), 0o600)
	res, _ := svc.Search(ctx, SearchRequest{Path: p, Query: "topic1"})
	if res.Search.Semantic.Status != SemanticUnavailable {
		t.Fatalf("first search: %+v", res.Search.Semantic)
	}
	failing = false
	res, _ = svc.Search(ctx, SearchRequest{Path: p, Query: "topic1"})
	if res.Search.Semantic.Status != SemanticFull {
		t.Fatalf("failed vectors not retried: %+v", res.Search.Semantic)
	}
	before := emb.texts
	svc.Search(ctx, SearchRequest{Path: p, Query: "topic1"})
	if emb.texts != before+1 { // only the query
		t.Fatalf("cached vectors re-embedded: %d texts", emb.texts-before)
	}
	svc.opts.EmbedderID = "b" // another model: vectors are invalid
	svc.Search(ctx, SearchRequest{Path: p, Query: "topic1"})
	if emb.texts != before+1+1+res.Search.Semantic.Selected {
		t.Fatalf("embedder change did not invalidate vectors: %d", emb.texts-before)
	}
}

func TestSemanticFindsWithoutLexicalMatch(t *testing.T) {
	emb := &bagEmbedder{}
	svc, home := newTestService(t, func(o *Options) { o.Embedder, o.EmbedderID = emb, "x" })
	p := filepath.Join(home, "d.pptx")
	os.WriteFile(p, generatePPTX([]string{"Alpha\nred green blue", "Beta\nyellow orange purple"}), 0o600)
	// "purple orange" hashes like slide 2; the query word "yellowish" matches nothing lexically.
	res, err := svc.Search(context.Background(), SearchRequest{Path: p, Query: "purple orange yellowish"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Page != 2 || res.Results[0].SemanticRank != 1 {
		t.Fatalf("results %s", mustJSON(t, res.Results))
	}
}

func TestGatewayEmbedder(t *testing.T) {
	var got struct {
		headers http.Header
		body    map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		got.headers = r.Header.Clone()
		json.NewDecoder(r.Body).Decode(&got.body)
		w.Write([]byte(`{"data":[{"index":1,"embedding":[0,1]},{"index":0,"embedding":[1,0]},{"index":2,"embedding":[1]}]}`))
	}))
	t.Cleanup(srv.Close)
	e, _, err := embedderFromConfig(loadConfig(t, map[string]string{"DOCUMENT_EMBED_ENDPOINT": srv.URL + "/v1", "DOCUMENT_EMBED_API_KEY": "k-123", "DOCUMENT_EMBED_DIM": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(context.Background(), []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if vecs[0][0] != 1 || vecs[1][1] != 1 || vecs[2] != nil {
		t.Fatalf("vectors %v (index order or dimension check wrong)", vecs)
	}
	if got.headers.Get("x-usage-service") != UsageService || got.headers.Get("x-usage-action") != UsageAction ||
		got.headers.Get("Authorization") != "Bearer k-123" || got.body["model"] != "local-embed" {
		t.Fatalf("request headers %v body %v", got.headers, got.body)
	}
	bad, _, err := embedderFromConfig(loadConfig(t, map[string]string{"DOCUMENT_EMBED_ENDPOINT": srv.URL + "/nope", "DOCUMENT_EMBED_MODEL": "m", "DOCUMENT_EMBED_API_KEY": "k-123"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Embed(context.Background(), []string{"a"}); err == nil || strings.Contains(err.Error(), "k-123") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %v", err)
	}
}

// TestConcurrentSearches exercises the shared cache and lazily built
// chunks/vectors from several callers at once (CI runs it under -race): each
// caller looks for a word found in one section only and must get that
// section's chunk first.
func TestConcurrentSearches(t *testing.T) {
	emb := &bagEmbedder{}
	svc, home := newTestService(t, func(o *Options) { o.Embedder, o.EmbedderID = emb, "x" })
	words := []string{"albatross", "bergamot", "cormorant", "dulcimer", "eucalyptus", "flamingo", "gondolier", "harpsichord"}
	var doc strings.Builder
	sections := make([][2]int, len(words)) // byte range of each word's section
	for i, w := range words {
		sections[i][0] = doc.Len()
		for j := 0; doc.Len()-sections[i][0] < 2500; j++ {
			if j == 20 {
				fmt.Fprintf(&doc, "The %s appears here only. ", w)
			}
			fmt.Fprintf(&doc, "Plain filler line %d of section %d says nothing. ", j, i)
		}
		sections[i][1] = doc.Len()
	}
	p := filepath.Join(home, "d.txt")
	os.WriteFile(p, []byte(doc.String()), 0o600)
	var wg sync.WaitGroup
	errs := make(chan error, len(words))
	for i, w := range words {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Search(context.Background(), SearchRequest{Path: p, Query: w})
			switch {
			case err != nil:
			case len(res.Results) == 0:
				err = fmt.Errorf("%s: no results", w)
			case !strings.Contains(res.Results[0].Excerpt, w) || res.Results[0].Offset < sections[i][0] || res.Results[0].Offset >= sections[i][1]:
				err = fmt.Errorf("%s: top hit at offset %d (section %v): %q", w, res.Results[0].Offset, sections[i], res.Results[0].Excerpt)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
