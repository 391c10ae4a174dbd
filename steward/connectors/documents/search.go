package documents

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/search"
)

// Search bounds from the spec.
const (
	ChunkChars          = 1800
	ChunkOverlap        = 200
	MaxCandidates       = 50
	MaxSemanticChunks   = 256
	EmbedBatch          = 64
	DefaultResults      = 5
	MaxResults          = 10
	DefaultContextChars = 300
	MaxContextChars     = 800
	maxQueryTerms       = 16
	termCountCap        = 8
)

// Semantic statuses reported in SearchInfo.
const (
	SemanticDisabled    = "disabled"
	SemanticUnavailable = "unavailable"
	SemanticFull        = "full"
	SemanticSampled     = "sampled"
	SemanticPartial     = "partial"
)

// chunk is a searchable window of one page.
type chunk struct {
	page       int // 1-based
	start, end int // byte offsets in the page text
	folded     string
}

// buildChunks splits every page into ~1,800-character chunks overlapping by
// 200, ending at a nearby newline or sentence end when there is one.
func buildChunks(pages []Page) []chunk {
	var out []chunk
	for _, p := range pages {
		text := p.Text
		start := 0
		for start < len(text) {
			end, _ := runePrefix(text[start:], ChunkChars)
			end += start
			if end < len(text) {
				end = chunkBoundary(text, start, end)
			}
			out = append(out, chunk{page: p.Number, start: start, end: end, folded: foldForSearch(text[start:end])})
			if end >= len(text) {
				break
			}
			next := end - ChunkOverlap
			for next > start && next < len(text) && !utf8.RuneStart(text[next]) {
				next--
			}
			if i := strings.IndexAny(text[next:end], " \n"); i >= 0 && i < 60 {
				next += i + 1 // start the overlap on a word
			}
			if next <= start {
				next = end
			}
			start = next
		}
	}
	return out
}

// chunkBoundary moves end back (at most 300 bytes) to just after a newline,
// else a sentence end, else a space.
func chunkBoundary(text string, start, end int) int {
	lo := max(start+ChunkChars/2, end-300)
	if lo >= end {
		return end
	}
	window := text[lo:end]
	if i := strings.LastIndexByte(window, '\n'); i >= 0 {
		return lo + i + 1
	}
	best := -1
	for _, sep := range []string{". ", "! ", "? ", "; "} {
		if i := strings.LastIndex(window, sep); i > best {
			best = i
		}
	}
	if best >= 0 {
		return lo + best + 2
	}
	if i := strings.LastIndexByte(window, ' '); i >= 0 {
		return lo + i + 1
	}
	return end
}

// foldForSearch is the chunk text as folded terms separated by single
// spaces, padded so that " term " matches whole words.
func foldForSearch(s string) string {
	return " " + strings.Join(search.Terms(s), " ") + " "
}

// SearchRequest is document_search's input.
type SearchRequest struct {
	Path         string
	Query        string
	MaxResults   int
	ContextChars int
}

// Match is one excerpt.
type Match struct {
	Page         int     `json:"page"`
	Offset       int     `json:"offset"`
	Cursor       string  `json:"cursor"`
	Excerpt      string  `json:"excerpt"`
	Score        float64 `json:"score"`
	LexicalRank  int     `json:"lexicalRank,omitempty"`
	SemanticRank int     `json:"semanticRank,omitempty"`
}

// SemanticInfo reports what semantic search could do.
type SemanticInfo struct {
	Status   string `json:"status"`
	Selected int    `json:"selectedChunks"`
	Embedded int    `json:"embeddedChunks"`
	Missing  int    `json:"missingChunks,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// SearchInfo describes the search itself.
type SearchInfo struct {
	Chunks            int          `json:"chunks"`
	LexicalCandidates int          `json:"lexicalCandidates"`
	Semantic          SemanticInfo `json:"semantic"`
}

// SearchResult is document_search's answer.
type SearchResult struct {
	Name     string     `json:"name"`
	Path     string     `json:"path"`
	Query    string     `json:"query"`
	Results  []Match    `json:"results"`
	Search   SearchInfo `json:"search"`
	Warnings []string   `json:"warnings,omitempty"`
}

// Search ranks the document's chunks lexically (all chunks) and semantically
// (up to 256 sampled chunks), fuses the rankings by RRF and returns bounded
// excerpts with cursors.
func (s *Service) Search(ctx context.Context, req SearchRequest) (*SearchResult, error) {
	if strings.TrimSpace(req.Query) == "" {
		return nil, errorf(CodeInvalidArgument, "query is required")
	}
	if req.MaxResults < 0 || req.ContextChars < 0 {
		return nil, errorf(CodeInvalidArgument, "max_results and context_chars must be positive")
	}
	d, err := s.open(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	maxResults := clampDefault(req.MaxResults, DefaultResults, MaxResults)
	contextChars := clampDefault(req.ContextChars, DefaultContextChars, MaxContextChars)

	d.mu.Lock()
	if d.chunks == nil {
		d.chunks = buildChunks(d.ex.Pages)
		d.postings = buildPostings(d.chunks)
		d.mu.Unlock()
		s.cache.evict()
	} else {
		d.mu.Unlock()
	}
	chunks := d.chunks
	lex := lexicalRank(chunks, d.postings, req.Query)
	sem, info := s.semanticRank(ctx, d, req.Query)
	res := &SearchResult{
		Name: filepath.Base(d.key.path), Path: d.key.path, Query: req.Query,
		Search:   SearchInfo{Chunks: len(chunks), LexicalCandidates: len(lex), Semantic: info},
		Warnings: d.ex.Warnings,
	}
	if len(chunks) > MaxSemanticChunks && info.Status != SemanticDisabled {
		res.Warnings = append(res.Warnings, fmt.Sprintf("semantic search sampled %d of %d chunks; lexical search covered all of them", MaxSemanticChunks, len(chunks)))
	}
	res.Results = d.excerpts(chunks, fuse(lex, sem), req.Query, maxResults, contextChars)
	if res.Results == nil {
		res.Results = []Match{}
	}
	return res, nil
}

type ranked struct {
	id    int
	score float64
}

// posting records how often a term occurs in one chunk.
type posting struct{ chunk, count int32 }

// buildPostings indexes the folded words of every chunk, so a query reads
// only the postings of its terms instead of rescanning the text.
func buildPostings(chunks []chunk) map[string][]posting {
	idx := map[string][]posting{}
	counts := map[string]int32{}
	for ci, c := range chunks {
		clear(counts)
		for _, t := range strings.Fields(c.folded) {
			counts[t]++
		}
		for t, n := range counts {
			idx[t] = append(idx[t], posting{chunk: int32(ci), count: n})
		}
	}
	return idx
}

// lexicalRank scores every chunk: for each query term a bounded
// log-scaled count weighted by rarity (a word that only starts with the
// term, "invoices" for "invoice", counts half), doubled when the whole query
// appears as a phrase. It keeps the best MaxCandidates.
func lexicalRank(chunks []chunk, postings map[string][]posting, query string) []ranked {
	var terms []string
	seen := map[string]bool{}
	for _, t := range search.Terms(query) {
		if !seen[t] && len(terms) < maxQueryTerms {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	phrase := ""
	if len(terms) > 1 {
		phrase = " " + strings.Join(search.Terms(query), " ") + " "
	}
	scores := make([]float64, len(chunks))
	total := float64(len(chunks))
	for _, t := range terms {
		exact := map[int32]int32{}
		for _, p := range postings[t] {
			exact[p.chunk] = p.count
		}
		prefix := map[int32]bool{}
		if len(t) >= 4 {
			for w, list := range postings {
				if len(w) > len(t) && strings.HasPrefix(w, t) {
					for _, p := range list {
						if _, ok := exact[p.chunk]; !ok {
							prefix[p.chunk] = true
						}
					}
				}
			}
		}
		df := float64(len(exact) + len(prefix))
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (total-df+0.5)/(df+0.5))
		for ci, n := range exact {
			scores[ci] += idf * (1 + math.Log(float64(min(n, termCountCap))))
		}
		for ci := range prefix {
			scores[ci] += idf * 0.5
		}
	}
	var out []ranked
	for ci, score := range scores {
		if score == 0 {
			continue
		}
		if phrase != "" && strings.Contains(chunks[ci].folded, phrase) {
			score *= 2
		}
		out = append(out, ranked{id: ci, score: score})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].score > out[b].score })
	if len(out) > MaxCandidates {
		out = out[:MaxCandidates]
	}
	return out
}

// fusedItem is one chunk of the fused ranking.
type fusedItem struct {
	id               int
	score            float64
	lexRank, semRank int
}

func fuse(lex, sem []ranked) []fusedItem {
	ids := func(r []ranked) []string {
		out := make([]string, len(r))
		for i, x := range r {
			out[i] = strconv.Itoa(x.id)
		}
		return out
	}
	var out []fusedItem
	for _, f := range search.RRF(search.DefaultRRFK, ids(lex), ids(sem)) {
		id, _ := strconv.Atoi(f.ID)
		out = append(out, fusedItem{id: id, score: f.Score, lexRank: f.Ranks[0], semRank: f.Ranks[1]})
	}
	return out
}

// excerpts turns fused chunks into excerpts of about contextChars
// characters centred on the first query term, skipping excerpts that
// overlap one already chosen.
func (d *document) excerpts(chunks []chunk, fused []fusedItem, query string, maxResults, contextChars int) []Match {
	terms := search.Terms(query)
	var out []Match
	type span struct{ page, start, end int }
	var taken []span
	for _, f := range fused {
		if len(out) >= maxResults {
			break
		}
		c := chunks[f.id]
		text := d.ex.Pages[c.page-1].Text
		center := c.start + locateTerm(text[c.start:c.end], c.folded, terms)
		start, end := window(text, center, contextChars)
		overlap := false
		for _, t := range taken {
			if t.page == c.page && start < t.end && end > t.start {
				overlap = true
				break
			}
		}
		if overlap {
			continue
		}
		taken = append(taken, span{c.page, start, end})
		ex := strings.TrimSpace(text[start:end])
		if start > 0 {
			ex = "…" + ex
		}
		if end < len(text) {
			ex += "…"
		}
		out = append(out, Match{
			Page: c.page, Offset: start, Cursor: d.cursor(c.page, start), Excerpt: ex,
			Score: math.Round(f.score*1e6) / 1e6, LexicalRank: f.lexRank, SemanticRank: f.semRank,
		})
	}
	return out
}

// locateTerm finds the byte offset of the first query term in a chunk's
// original text: exactly when a lowercase search finds it, otherwise by
// mapping its position in the folded text proportionally.
func locateTerm(text, folded string, terms []string) int {
	lower := strings.ToLower(text)
	best := -1
	for _, t := range terms {
		if i := strings.Index(lower, t); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best >= 0 && len(lower) == len(text) {
		return best
	}
	for _, t := range terms {
		if i := strings.Index(folded, " "+t); i >= 0 {
			pos := int(float64(i) / float64(max(1, len(folded))) * float64(len(text)))
			for pos > 0 && pos < len(text) && !utf8.RuneStart(text[pos]) {
				pos--
			}
			return min(pos, len(text))
		}
	}
	return 0
}

// window returns byte bounds of about n characters around center, moved to
// rune and, where close, word boundaries.
func window(text string, center, n int) (int, int) {
	start := center
	for back := n / 3; back > 0 && start > 0; back-- {
		_, w := utf8.DecodeLastRuneInString(text[:start])
		start -= w
	}
	end, _ := runePrefix(text[start:], n)
	end += start
	if start > 0 {
		if i := strings.IndexAny(text[start:min(end, start+40)], " \n"); i >= 0 {
			start += i + 1
		}
	}
	if end < len(text) {
		if i := strings.LastIndexAny(text[max(start, end-40):end], " \n"); i >= 0 {
			end = max(start, end-40) + i
		}
	}
	return start, max(start, end)
}

// semanticRank embeds the query and up to MaxSemanticChunks evenly sampled
// chunks (cached per document and embedder) and ranks them by cosine
// similarity. Failures degrade to an unavailable or partial status.
func (s *Service) semanticRank(ctx context.Context, d *document, query string) ([]ranked, SemanticInfo) {
	if s.opts.Embedder == nil {
		return nil, SemanticInfo{Status: SemanticDisabled, Reason: "no embedding endpoint is configured (DOCUMENT_EMBED_ENDPOINT=off)"}
	}
	ctx = llm.WithAttribution(ctx, llm.Attribution{Service: UsageService, Action: UsageAction})
	selected := sampleChunks(len(d.chunks), MaxSemanticChunks)
	info := SemanticInfo{Selected: len(selected)}
	qv, err := s.opts.Embedder.Embed(ctx, []string{query})
	if err != nil || len(qv) != 1 || len(qv[0]) == 0 {
		info.Status, info.Reason, info.Missing = SemanticUnavailable, embedReason(err), len(selected)
		return nil, info
	}
	q := qv[0]

	d.mu.Lock()
	if d.vecSig != s.opts.EmbedderID || len(d.vecs) != len(d.chunks) {
		d.vecSig, d.vecs = s.opts.EmbedderID, make([][]float32, len(d.chunks))
	}
	var missing []int
	for _, id := range selected {
		if len(d.vecs[id]) != len(q) {
			missing = append(missing, id)
		}
	}
	d.mu.Unlock()

	var embedErr error
	for i := 0; i < len(missing) && embedErr == nil; i += EmbedBatch {
		batch := missing[i:min(i+EmbedBatch, len(missing))]
		texts := make([]string, len(batch))
		for j, id := range batch {
			c := d.chunks[id]
			texts[j] = d.ex.Pages[c.page-1].Text[c.start:c.end]
		}
		vecs, err := s.opts.Embedder.Embed(ctx, texts)
		if err != nil || len(vecs) != len(batch) {
			embedErr = fmt.Errorf("embedding batch failed: %w", err)
			if err == nil {
				embedErr = fmt.Errorf("embedding endpoint returned %d vectors for %d inputs", len(vecs), len(batch))
			}
			break
		}
		d.mu.Lock()
		for j, id := range batch {
			if len(vecs[j]) == len(q) {
				d.vecs[id] = vecs[j]
			}
		}
		d.mu.Unlock()
	}
	s.cache.evict()

	var out []ranked
	d.mu.Lock()
	for _, id := range selected {
		if v := d.vecs[id]; len(v) == len(q) {
			out = append(out, ranked{id: id, score: search.Cosine(q, v)})
		}
	}
	d.mu.Unlock()
	info.Embedded = len(out)
	info.Missing = info.Selected - info.Embedded
	switch {
	case info.Embedded == 0:
		info.Status, info.Reason = SemanticUnavailable, embedReason(embedErr)
	case info.Missing > 0:
		info.Status, info.Reason = SemanticPartial, embedReason(embedErr)
	case len(selected) < len(d.chunks):
		info.Status = SemanticSampled
	default:
		info.Status = SemanticFull
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].score > out[b].score })
	if len(out) > MaxCandidates {
		out = out[:MaxCandidates]
	}
	return out, info
}

func embedReason(err error) string {
	if err == nil {
		return "some vectors were missing or had the wrong dimension"
	}
	return err.Error()
}

// sampleChunks returns at most k chunk indices spread evenly over n.
func sampleChunks(n, k int) []int {
	out := make([]int, 0, min(n, k))
	if n <= k {
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	for i := range k {
		out = append(out, i*n/k)
	}
	return out
}
