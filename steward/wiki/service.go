package wiki

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/search"
	"github.com/agentstack/agentstack/search/vecindex"
)

// ReadPageChars is the size of one page of wiki_read.
const ReadPageChars = 5000

// Extractor turns a source file (PDF, Office, HTML…) into text; in
// Steward it is the documents connector's extractor, so the same limits
// apply.
type Extractor interface {
	ExtractText(ctx context.Context, path string) (string, error)
}

// Options configure a Service.
type Options struct {
	// Dir is the vault.
	Dir string
	// IndexDir holds the index, the ingest queue and the vault lock
	// (default Dir/.steward, hidden from Obsidian).
	IndexDir string
	// Embedder makes page vectors (local-embed); nil means lexical search.
	Embedder vecindex.Embedder
	// Model and ModelName run ingest through the gateway; nil disables
	// ingest (queued tasks wait).
	Model     *llm.Client
	ModelName string
	// Extractor reads non-text sources; nil allows only text sources.
	Extractor Extractor
	// RetryBackoff is the wait before the first automatic retry of a
	// failed ingest, doubled for each later one (default 5 s).
	RetryBackoff time.Duration
	// MaxPageBytes bounds a page file (default DefaultMaxPageBytes).
	MaxPageBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Service is an open vault with its index, graph and ingest queue.
type Service struct {
	opts  Options
	vault *Vault
	idx   *Index
	queue *Queue
	log   *slog.Logger

	mu       sync.Mutex // serialises index syncs
	graphMu  sync.Mutex
	graph    *Graph
	graphGen uint64
}

// Open opens the vault at opts.Dir, its index (brought up to date with the
// files) and its ingest queue.
func Open(ctx context.Context, opts Options) (*Service, error) {
	if opts.IndexDir == "" {
		opts.IndexDir = filepath.Join(opts.Dir, ".steward")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 5 * time.Second
	}
	if err := os.MkdirAll(opts.IndexDir, 0o700); err != nil {
		return nil, fmt.Errorf("create wiki index folder: %w", err)
	}
	v, err := OpenVault(ctx, VaultOptions{Dir: opts.Dir, LockPath: filepath.Join(opts.IndexDir, "vault.lock"), MaxPageBytes: opts.MaxPageBytes})
	if err != nil {
		return nil, err
	}
	idx, err := OpenIndex(ctx, filepath.Join(opts.IndexDir, IndexFileName))
	if err != nil {
		return nil, err
	}
	q, err := OpenQueue(ctx, filepath.Join(opts.IndexDir, QueueFileName))
	if err != nil {
		idx.Close()
		return nil, err
	}
	s := &Service{opts: opts, vault: v, idx: idx, queue: q, log: opts.Log}
	if _, err := s.Sync(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the index and the queue.
func (s *Service) Close() error {
	return errors.Join(s.idx.Close(), s.queue.Close())
}

// Vault returns the vault.
func (s *Service) Vault() *Vault { return s.vault }

// Index returns the index.
func (s *Service) Index() *Index { return s.idx }

// Queue returns the ingest queue.
func (s *Service) Queue() *Queue { return s.queue }

// Sync brings the index up to date with the in-memory vault.
func (s *Service) Sync(ctx context.Context) (SyncStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.sync(ctx, vaultDocs(s.vault), false, nil)
}

// Reindex rescans every file and rebuilds the index from scratch, then
// embeds the pages if an embedder is configured.
func (s *Service) Reindex(ctx context.Context) (SyncStats, error) {
	if err := s.vault.Rescan(ctx); err != nil {
		return SyncStats{}, err
	}
	s.mu.Lock()
	st, err := s.idx.sync(ctx, vaultDocs(s.vault), true, nil)
	s.mu.Unlock()
	if err != nil {
		return st, err
	}
	s.Embed(ctx)
	return st, nil
}

// Rescan re-reads the files and updates the index with what changed.
func (s *Service) Rescan(ctx context.Context) (SyncStats, error) {
	if err := s.vault.Rescan(ctx); err != nil {
		return SyncStats{}, err
	}
	st, err := s.Sync(ctx)
	if err == nil && st.Added+st.Updated > 0 {
		s.Embed(ctx)
	}
	return st, err
}

// Update re-reads the given vault paths (a file saved, created or
// removed) and updates their index rows.
func (s *Service) Update(ctx context.Context, paths ...string) error {
	scope := map[string]bool{}
	for _, p := range paths {
		s.vault.Refresh(p)
		scope[path.Clean(filepath.ToSlash(p))] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.idx.sync(ctx, vaultDocsFor(s.vault, scope), false, scope)
	return err
}

func vaultDocsFor(v *Vault, scope map[string]bool) []indexDoc {
	var out []indexDoc
	for p := range scope {
		if pg := v.Page(p); pg != nil {
			out = append(out, pageDoc(pg))
		} else if v.isSourceFile(p) {
			if d, ok := sourceDoc(v.dir, p); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// Embed embeds pages whose text changed since their vector was made. A
// failure leaves search lexical and is logged, never returned: embeddings
// are an optional layer.
func (s *Service) Embed(ctx context.Context) int {
	if s.opts.Embedder == nil {
		return 0
	}
	n, _ := s.idx.vecs.EmbedPending(embedContext(ctx), s.opts.Embedder, s.log)
	return n
}

// embedContext labels the wiki's embedding calls for the usage ledger.
func embedContext(ctx context.Context) context.Context {
	return llm.WithAttribution(ctx, llm.Attribution{Service: UsageService, Action: UsageActionEmbed})
}

// Graph returns the page graph, rebuilt when the vault changed.
func (s *Service) Graph(ctx context.Context) (*Graph, error) {
	s.graphMu.Lock()
	defer s.graphMu.Unlock()
	if gen := s.vault.Generation(); s.graph == nil || s.graphGen != gen {
		s.graph, s.graphGen = BuildGraph(s.vault), gen
	}
	return s.graph, ctx.Err()
}

// Lint lints the vault.
func (s *Service) Lint(ctx context.Context) LintReport { return Lint(s.vault, s.opts.Now()) }

// SearchRequest is a wiki search.
type SearchRequest struct {
	Query string `json:"query" jsonschema:"what to look for: words, a phrase, a name or a question"`
	Limit int    `json:"limit,omitempty" jsonschema:"maximum results (default 10, max 50)"`
	// IncludeSources also searches the text of raw imported sources.
	IncludeSources bool `json:"includeSources,omitempty" jsonschema:"also search raw imported source files: added documents and the notes promoted from mail threads (raw/sources/mail/)"`
	// NoExpand turns off graph expansion.
	NoExpand bool `json:"noExpand,omitempty" jsonschema:"do not add pages related to the top hits through the graph"`
}

// SearchResult is one hit.
type SearchResult struct {
	Path    string  `json:"path"`
	Title   string  `json:"title"`
	Type    string  `json:"type,omitempty"`
	Kind    string  `json:"kind"` // page or source
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
	// Via names the hit a graph-expanded page is related to.
	Via string `json:"via,omitempty"`
	// Link opens the page in Steward's web app; cite it in answers.
	Link string `json:"link"`
}

// SearchResponse is the result of Search.
type SearchResponse struct {
	Results []SearchResult `json:"results"`
	// Mode is hybrid (text and vectors) or lexical.
	Mode    string `json:"mode"`
	Warning string `json:"warning,omitempty"`
}

// PageLink is the web app's address of a vault page.
func PageLink(p string) string { return "#/wiki/" + url.PathEscape(p) }

// Search runs the hybrid search: FTS5 (BM25, CJK bigrams, folded
// diacritics), trigram substrings and, with an embedder, vectors, fused by
// reciprocal rank; then pages related to the top hits are added through
// the graph.
func (s *Service) Search(ctx context.Context, req SearchRequest) (*SearchResponse, error) {
	q := strings.TrimSpace(req.Query)
	if q == "" {
		return nil, errors.New("search: the query is empty")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 10
	}
	limit = min(limit, 50)
	kind := "page"
	if req.IncludeSources {
		kind = ""
	}
	depth := max(limit*3, 30)
	lex, err := s.idx.lexical(ctx, q, kind, depth)
	if err != nil {
		return nil, err
	}
	tri, err := s.idx.tri.Candidates(ctx, q, true, depth)
	if err != nil {
		return nil, err
	}
	resp := &SearchResponse{Mode: "lexical", Results: []SearchResult{}}
	titles, err := s.titleMatches(ctx, q, append(append([]int64{}, lex...), tri...))
	if err != nil {
		return nil, err
	}
	lists := [][]string{ids(lex), ids(tri), ids(titles)}
	if s.opts.Embedder != nil {
		near, err := s.idx.vecs.SearchText(embedContext(ctx), s.opts.Embedder, q, depth)
		if err != nil {
			resp.Warning = err.Error()
		} else if near != nil {
			resp.Mode = "hybrid"
			v := make([]string, len(near))
			for i, n := range near {
				v[i] = strconv.FormatInt(n.ID, 10)
			}
			lists = append(lists, v)
		}
	}
	fused := search.RRF(search.DefaultRRFK, lists...)
	var order []int64
	for _, f := range fused {
		id, _ := strconv.ParseInt(f.ID, 10, 64)
		order = append(order, id)
	}
	rows, err := s.idx.rows(ctx, order)
	if err != nil {
		return nil, err
	}
	terms := search.Terms(q)
	seen := map[string]bool{}
	for i, id := range order {
		r, ok := rows[id]
		if !ok || (kind != "" && r.kind != kind) {
			continue
		}
		if len(resp.Results) >= limit {
			break
		}
		seen[r.path] = true
		resp.Results = append(resp.Results, SearchResult{Path: r.path, Title: r.title, Type: r.typ, Kind: r.kind,
			Snippet: snippet(r.body, terms), Score: fused[i].Score, Link: PageLink(r.path)})
	}
	if !req.NoExpand && len(resp.Results) > 0 && len(resp.Results) < limit {
		g, err := s.Graph(ctx)
		if err != nil {
			return nil, err
		}
		top := resp.Results[:min(3, len(resp.Results))]
		var extra []SearchResult
		for _, hit := range top {
			for _, n := range g.Neighbors(hit.Path, 5) {
				if seen[n.Path] {
					continue
				}
				seen[n.Path] = true
				pg := s.vault.Page(n.Path)
				if pg == nil {
					continue
				}
				extra = append(extra, SearchResult{Path: n.Path, Title: n.Title, Type: pg.Frontmatter.Type, Kind: "page",
					Snippet: snippet(pg.Body, nil), Score: hit.Score * n.Relevance / (n.Relevance + 10), Via: hit.Path, Link: PageLink(n.Path)})
			}
		}
		sort.SliceStable(extra, func(a, b int) bool { return extra[a].Score > extra[b].Score })
		resp.Results = append(resp.Results, extra[:min(len(extra), limit-len(resp.Results))]...)
	}
	return resp, nil
}

// titleMatches returns the candidates whose title holds every query term,
// shortest title first: a page named for what was asked outranks pages
// that only mention it.
func (s *Service) titleMatches(ctx context.Context, q string, cand []int64) ([]int64, error) {
	terms := search.Terms(q)
	if len(terms) == 0 || len(cand) == 0 {
		return nil, nil
	}
	rows, err := s.idx.rows(ctx, cand)
	if err != nil {
		return nil, err
	}
	var out []int64
	seen := map[int64]bool{}
	for _, id := range cand {
		r, ok := rows[id]
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		title := search.Fold(r.title)
		all := true
		for _, t := range terms {
			all = all && strings.Contains(title, t)
		}
		if all {
			out = append(out, id)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return len(rows[out[a]].title) < len(rows[out[b]].title) })
	return out, nil
}

func ids(list []int64) []string {
	out := make([]string, len(list))
	for i, id := range list {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

// snippet returns about 240 characters of body around the first term found.
func snippet(body string, terms []string) string {
	const width = 240
	folded := search.Fold(body)
	at := -1
	for _, t := range terms {
		if i := strings.Index(folded, t); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	rs := []rune(body)
	start := 0
	if at > 0 && len(folded) == len(body) {
		start = max(0, utf8.RuneCountInString(body[:at])-60)
	}
	end := min(len(rs), start+width)
	out := strings.Join(strings.Fields(string(rs[start:end])), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(rs) {
		out += "…"
	}
	return out
}

// ReadRequest asks for one page of a wiki file.
type ReadRequest struct {
	Path   string `json:"path" jsonschema:"vault-relative path of the page, as returned by wiki_search or wiki_list"`
	Offset int    `json:"offset,omitempty" jsonschema:"character offset to continue from (nextOffset of the previous read)"`
}

// Backlink is a page linking to the one read.
type Backlink struct {
	Path  string `json:"path"`
	Title string `json:"title"`
}

// ReadResult is one 5,000-character page of a wiki file.
type ReadResult struct {
	Path        string         `json:"path"`
	Title       string         `json:"title"`
	Frontmatter Frontmatter    `json:"frontmatter"`
	Warning     string         `json:"warning,omitempty"`
	Text        string         `json:"text"`
	Offset      int            `json:"offset"`
	NextOffset  int            `json:"nextOffset,omitempty"`
	TotalChars  int            `json:"totalChars"`
	Hash        string         `json:"hash"`
	Links       []ResolvedLink `json:"links,omitempty"`
	Backlinks   []Backlink     `json:"backlinks"`
	Link        string         `json:"link"`
}

// Read returns up to ReadPageChars characters of a page from Offset, with
// its resolved links and backlinks. The hash identifies the version read,
// for a later conflict-checked write.
func (s *Service) Read(ctx context.Context, req ReadRequest) (*ReadResult, error) {
	p, err := CleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	b, err := s.vault.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > s.vault.maxBytes {
		return nil, fmt.Errorf("read %s: %d bytes is over the page limit", p, len(b))
	}
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	rs := []rune(text)
	off := min(max(req.Offset, 0), len(rs))
	end := min(len(rs), off+ReadPageChars)
	res := &ReadResult{Path: p, Text: string(rs[off:end]), Offset: off, TotalChars: len(rs), Hash: Hash(b), Link: PageLink(p), Backlinks: []Backlink{}}
	if end < len(rs) {
		res.NextOffset = end
	}
	pg := s.vault.Page(p)
	if pg == nil {
		pg = ParsePage(p, b)
	}
	res.Title, res.Frontmatter, res.Warning = pg.Title, pg.Frontmatter, pg.FrontmatterError
	res.Links = s.vault.Links(pg)
	res.Backlinks = s.backlinks(p)
	return res, ctx.Err()
}

func (s *Service) backlinks(p string) []Backlink {
	out := []Backlink{}
	for _, pg := range s.vault.Pages() {
		if pg.Path == p {
			continue
		}
		for _, l := range pg.Links {
			if s.vault.Resolve(l.Target, pg.Path) == p {
				out = append(out, Backlink{Path: pg.Path, Title: pg.Title})
				break
			}
		}
	}
	return out
}

// ListRequest filters wiki_list.
type ListRequest struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only pages whose path starts with this folder"`
	Type   string `json:"type,omitempty" jsonschema:"only pages of this frontmatter type"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty" jsonschema:"default 100, max 500"`
}

// ListEntry is one page of a listing.
type ListEntry struct {
	Path    string   `json:"path"`
	Title   string   `json:"title"`
	Type    string   `json:"type,omitempty"`
	Updated string   `json:"updated,omitempty"`
	Sources []string `json:"sources,omitempty"`
}

// ListResult is a page of the page list.
type ListResult struct {
	Pages      []ListEntry `json:"pages"`
	Total      int         `json:"total"`
	NextOffset int         `json:"nextOffset,omitempty"`
}

// List lists pages by path.
func (s *Service) List(ctx context.Context, req ListRequest) (*ListResult, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 500)
	var all []ListEntry
	for _, p := range s.vault.Pages() {
		if req.Prefix != "" && !strings.HasPrefix(p.Path, strings.TrimSuffix(req.Prefix, "/")+"/") && p.Path != req.Prefix {
			continue
		}
		if req.Type != "" && p.Frontmatter.Type != req.Type {
			continue
		}
		all = append(all, ListEntry{Path: p.Path, Title: p.Title, Type: p.Frontmatter.Type, Updated: p.Frontmatter.Updated, Sources: p.Frontmatter.Sources})
	}
	off := min(max(req.Offset, 0), len(all))
	end := min(len(all), off+limit)
	res := &ListResult{Pages: all[off:end], Total: len(all)}
	if res.Pages == nil {
		res.Pages = []ListEntry{}
	}
	if end < len(all) {
		res.NextOffset = end
	}
	return res, ctx.Err()
}

// WriteRequest writes a page.
type WriteRequest struct {
	Path    string `json:"path" jsonschema:"vault-relative path, e.g. wiki/Project Atlas.md"`
	Content string `json:"content" jsonschema:"the whole file: YAML frontmatter and Markdown body"`
	// BaseHash is the hash of the version the change was made from ("new"
	// for a page that must not exist yet); empty skips the check.
	BaseHash string `json:"baseHash,omitempty" jsonschema:"hash returned by wiki_read of the version you edited, or new for a new page"`
}

// WriteResult is the written page.
type WriteResult struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
	Link string `json:"link"`
}

// WritePage writes a page atomically with the conflict check, indexes it
// and records the write in log.md.
func (s *Service) WritePage(ctx context.Context, req WriteRequest) (*WriteResult, error) {
	p, err := CleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(path.Ext(p), ".md") {
		return nil, fmt.Errorf("write %s: only Markdown pages (.md) can be written", p)
	}
	pg, err := s.vault.WriteFile(ctx, p, []byte(req.Content), req.BaseHash)
	if err != nil {
		return nil, err
	}
	if err := s.Update(ctx, p); err != nil {
		return nil, err
	}
	if p != LogFile {
		if err := s.appendLog(ctx, "edit", p, nil); err != nil {
			s.log.Warn("wiki log entry not written", "page", p, "err", err)
		}
	}
	s.Embed(ctx)
	return &WriteResult{Path: p, Hash: pg.Hash, Link: PageLink(p)}, nil
}

// appendLog appends an entry to log.md in the parseable form
// "## [RFC3339] OP | SUBJECT" followed by "- key: value" lines.
func (s *Service) appendLog(ctx context.Context, op, subject string, details [][2]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## [%s] %s | %s\n", s.opts.Now().UTC().Format(time.RFC3339), op, subject)
	for _, d := range details {
		fmt.Fprintf(&b, "- %s: %s\n", d[0], strings.ReplaceAll(d[1], "\n", " "))
	}
	unlock, err := s.vault.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	full := filepath.Join(s.vault.Dir(), LogFile)
	old, err := os.ReadFile(full)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(old) == 0 {
		old = []byte(scaffold[LogFile])
	}
	if err := AtomicWrite(full, append(old, b.String()...)); err != nil {
		return fmt.Errorf("append to %s: %w", LogFile, err)
	}
	return s.Update(ctx, LogFile)
}

// Status summarises the wiki.
type Status struct {
	Dir         string      `json:"dir"`
	IndexDir    string      `json:"indexDir"`
	Pages       int         `json:"pages"`
	Sources     int         `json:"sources"`
	Problems    []Problem   `json:"problems"`
	Indexed     int         `json:"indexed"`
	Embedded    int         `json:"embedded"`
	Vectors     bool        `json:"vectors"`
	Queue       QueueCounts `json:"queue"`
	LintIssues  int         `json:"lintIssues"`
	Communities int         `json:"communities"`
}

// Status returns counts of the vault, index and queue.
func (s *Service) Status(ctx context.Context) (*Status, error) {
	st := &Status{Dir: s.vault.Dir(), IndexDir: s.opts.IndexDir, Pages: len(s.vault.Pages()), Sources: len(s.vault.Sources()),
		Problems: s.vault.Problems(), Vectors: s.opts.Embedder != nil}
	if st.Problems == nil {
		st.Problems = []Problem{}
	}
	if err := s.idx.db.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE embedded_hash = content_hash) FROM pages").Scan(&st.Indexed, &st.Embedded); err != nil {
		return nil, fmt.Errorf("wiki status: %w", err)
	}
	c, err := s.queue.Counts(ctx)
	if err != nil {
		return nil, err
	}
	st.Queue = c
	st.LintIssues = len(s.Lint(ctx).Issues)
	if g, err := s.Graph(ctx); err == nil {
		st.Communities = len(g.Communities)
	}
	return st, nil
}
