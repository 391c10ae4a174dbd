package wiki

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// UsageService and the actions attribute the wiki's model and embedding
// calls in the usage ledger; each call carries its label, so the embedder
// may be shared with other users (steward serve shares one).
const (
	UsageService        = "wiki"
	UsageActionAnalyze  = "ingest-analyze"
	UsageActionGenerate = "ingest-generate"
	UsageActionEmbed    = "embed"
)

// maxSourceChars bounds the source text sent to the model.
const maxSourceChars = 60000

// Analysis is step 1's structured reading of a source.
type Analysis struct {
	Summary        string          `json:"summary"`
	Entities       []AnalysisItem  `json:"entities"`
	Concepts       []AnalysisItem  `json:"concepts"`
	Decisions      []AnalysisItem  `json:"decisions"`
	Contradictions []Contradiction `json:"contradictions"`
	Structure      []ProposedPage  `json:"structure"`
}

// AnalysisItem is an entity, concept or decision found in a source.
type AnalysisItem struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

// Contradiction is a claim of the source that disagrees with a page.
type Contradiction struct {
	Page  string `json:"page"`
	Claim string `json:"claim"`
}

// ProposedPage is a page step 1 proposes to write or update.
type ProposedPage struct {
	Title  string `json:"title"`
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
}

// Generated is step 2's output: the pages to write.
type Generated struct {
	Pages    []GeneratedPage `json:"pages"`
	Overview string          `json:"overview,omitempty"`
}

// GeneratedPage is one page step 2 writes.
type GeneratedPage struct {
	Title    string   `json:"title"`
	Type     string   `json:"type"`
	Tags     []string `json:"tags,omitempty"`
	ReviewBy string   `json:"review_by,omitempty"`
	Body     string   `json:"body"`
}

// ErrNoModel reports an ingest without a configured model.
var ErrNoModel = errors.New("no model is configured for wiki ingest")

// Ingest queues an ingest of a source already under raw/sources.
func (s *Service) Ingest(ctx context.Context, source, folderContext string) (*Task, error) {
	p, err := CleanPath(source)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(p, SourcesDir+"/") {
		return nil, fmt.Errorf("ingest %s: sources live under %s/ (add files with `steward wiki add`)", p, SourcesDir)
	}
	full, err := s.vault.inside(p)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(full); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ingest %s: no such source file", p)
	}
	return s.queue.Enqueue(ctx, p, folderContext)
}

// Add copies inputs into raw/sources (see AddSources), rescans, and queues
// an ingest of every new or changed snapshot.
func (s *Service) Add(ctx context.Context, opts AddOptions) ([]AddItem, []*Task, error) {
	items, err := AddSources(s.vault.Dir(), opts)
	var tasks []*Task
	for _, it := range items {
		if !it.Changed() {
			continue
		}
		if uerr := s.Update(ctx, it.Dest); uerr != nil {
			return items, tasks, uerr
		}
		t, qerr := s.queue.Enqueue(ctx, it.Dest, it.Context)
		if qerr != nil {
			return items, tasks, qerr
		}
		tasks = append(tasks, t)
	}
	return items, tasks, err
}

// RunIngest processes the queue, one task at a time, until ctx ends.
func (s *Service) RunIngest(ctx context.Context) {
	for {
		did, err := s.IngestNext(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("wiki ingest queue", "err", err)
		}
		if did {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.queue.Changes():
		case <-time.After(2 * time.Second):
		}
	}
}

// IngestNext runs the next due task, if any, and reports whether it ran
// one. A task's own failure is recorded on the task, not returned.
func (s *Service) IngestNext(ctx context.Context) (bool, error) {
	t, err := s.queue.claim(ctx)
	if err != nil || t == nil {
		return false, err
	}
	pages, runErr := s.ingest(ctx, t)
	if ctx.Err() != nil {
		return true, ctx.Err() // left running; requeued at the next start
	}
	if errors.Is(runErr, errCancelled) {
		return true, nil
	}
	if runErr != nil {
		s.log.Warn("wiki ingest failed", "source", t.Source, "attempt", t.Attempts+1, "err", runErr)
	}
	backoff := s.opts.RetryBackoff << min(t.Attempts, 6)
	return true, s.queue.finish(ctx, t, pages, runErr, backoff)
}

var errCancelled = errors.New("cancelled")

func (s *Service) cancelled(ctx context.Context, t *Task) bool {
	return s.queue.status(ctx, t.ID) == TaskCancelled
}

func (s *Service) ingest(ctx context.Context, t *Task) ([]string, error) {
	full, err := s.vault.inside(t.Source)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("read source %s: %w", t.Source, err)
	}
	sha := Hash(data)
	prevSHA, prevPages, err := s.queue.ingested(ctx, t.Source)
	if err != nil {
		return nil, err
	}
	if prevSHA == sha {
		s.queue.progress(ctx, t.ID, "unchanged since the last ingest; skipped")
		return prevPages, nil
	}
	s.queue.progress(ctx, t.ID, "reading the source")
	text, err := s.sourceText(ctx, full, data)
	if err != nil {
		return nil, err
	}
	if s.opts.Model == nil {
		return nil, ErrNoModel
	}
	related := s.relatedPages(ctx, t.Source, text, prevPages)
	s.queue.progress(ctx, t.ID, "step 1 of 2: analysing")
	var an Analysis
	if err := s.ask(ctx, UsageActionAnalyze, analyzePrompt(s.fixedText(), t, text, related), &an); err != nil {
		return nil, err
	}
	if strings.TrimSpace(an.Summary) == "" {
		return nil, errors.New("model analysis has no summary; deferred")
	}
	if s.cancelled(ctx, t) {
		return nil, errCancelled
	}
	s.queue.progress(ctx, t.ID, "step 2 of 2: writing pages")
	var gen Generated
	if err := s.ask(ctx, UsageActionGenerate, generatePrompt(s.fixedText(), t, &an, related), &gen); err != nil {
		return nil, err
	}
	pages, err := validateGenerated(&gen, &an, t.Source)
	if err != nil {
		return nil, err
	}
	if s.cancelled(ctx, t) {
		return nil, errCancelled
	}
	written, err := s.writeGenerated(ctx, t, pages, gen.Overview, sha)
	if err != nil {
		return nil, err
	}
	if err := s.queue.recordIngested(ctx, t.Source, sha, written); err != nil {
		return nil, err
	}
	s.Embed(ctx)
	return written, nil
}

// sourceText returns the text of a source: text files directly, other
// formats through the document extractor.
func (s *Service) sourceText(ctx context.Context, full string, data []byte) (string, error) {
	switch strings.ToLower(filepath.Ext(full)) {
	case ".md", ".markdown", ".txt", ".csv", ".json":
		return strings.ToValidUTF8(string(data), "\uFFFD"), nil
	}
	if s.opts.Extractor == nil {
		return "", fmt.Errorf("no document extractor to read %s", filepath.Base(full))
	}
	return s.opts.Extractor.ExtractText(ctx, full)
}

func (s *Service) fixedText() string {
	var b strings.Builder
	for _, f := range []string{PurposeFile, SchemaFile} {
		if raw, err := s.vault.ReadFile(f); err == nil {
			fmt.Fprintf(&b, "=== %s ===\n%s\n", f, truncateRunes(string(raw), 4000))
		}
	}
	return b.String()
}

type relatedPage struct{ path, text string }

// relatedPages returns the pages an ingest should see: those written from
// the same source before, then the best search hits for its start.
func (s *Service) relatedPages(ctx context.Context, source, text string, prev []string) []relatedPage {
	seen := map[string]bool{}
	var out []relatedPage
	addPage := func(p string) {
		if seen[p] || len(out) >= 8 {
			return
		}
		seen[p] = true
		if raw, err := s.vault.ReadFile(p); err == nil {
			out = append(out, relatedPage{p, truncateRunes(string(raw), 3000)})
		}
	}
	for _, p := range prev {
		addPage(p)
	}
	q := path.Base(source) + " " + truncateRunes(text, 300)
	if res, err := s.Search(ctx, SearchRequest{Query: q, Limit: 5, NoExpand: true}); err == nil {
		for _, r := range res.Results {
			if !fixedPage(r.Path) {
				addPage(r.Path)
			}
		}
	}
	return out
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "\n[…truncated]"
}

func analyzePrompt(fixed string, t *Task, text string, related []relatedPage) []llm.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Source: %s\n", t.Source)
	if t.Context != "" {
		fmt.Fprintf(&b, "Imported from the folder: %s (use it as classification context)\n", t.Context)
	}
	fmt.Fprintf(&b, "\n=== SOURCE TEXT ===\n%s\n", truncateRunes(text, maxSourceChars))
	for _, r := range related {
		fmt.Fprintf(&b, "\n=== EXISTING PAGE %s ===\n%s\n", r.path, r.text)
	}
	return []llm.Message{
		{Role: "system", Content: "You maintain a personal Markdown wiki. Read the source and reply with one JSON object only:\n" +
			`{"summary": string, "entities": [{"name","type","description"}], "concepts": [...], "decisions": [...], ` +
			`"contradictions": [{"page","claim"}], "structure": [{"title","type","reason"}]}` + "\n" +
			"Types: source, entity, concept, decision, commitment, person, organization, query. " +
			"List contradictions with the existing pages shown. Propose updating existing pages rather than duplicating them.\n\n" + fixed},
		{Role: "user", Content: b.String()},
	}
}

func generatePrompt(fixed string, t *Task, an *Analysis, related []relatedPage) []llm.Message {
	a, _ := json.Marshal(an)
	var b strings.Builder
	fmt.Fprintf(&b, "Source: %s\nAnalysis:\n%s\n", t.Source, a)
	for _, r := range related {
		fmt.Fprintf(&b, "\n=== EXISTING PAGE %s ===\n%s\n", r.path, r.text)
	}
	return []llm.Message{
		{Role: "system", Content: "Write the wiki pages for this analysed source. Reply with one JSON object only:\n" +
			`{"pages": [{"title": string, "type": string, "tags": [string], "body": markdown}], "overview": markdown}` + "\n" +
			"One page per subject, titled by its name; a page with an existing title replaces that page's body, so keep what is still true. " +
			"Include a page of type source summarising the source. Link pages with [[Title]]. No YAML frontmatter in bodies; Steward writes it.\n\n" + fixed},
		{Role: "user", Content: b.String()},
	}
}

// ask runs one chat completion attributed to action and decodes its JSON
// answer into out. Invalid JSON is an error: the task is deferred and no
// page is written.
func (s *Service) ask(ctx context.Context, action string, msgs []llm.Message, out any) error {
	actx := llm.WithAttribution(ctx, llm.Attribution{Service: UsageService, Action: action})
	temp := 0.2
	resp, err := s.opts.Model.Chat(actx, &llm.ChatRequest{Model: s.opts.ModelName, Messages: msgs, Temperature: &temp})
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	if len(resp.Choices) == 0 {
		return fmt.Errorf("%s: the model returned no answer", action)
	}
	text := strings.TrimSpace(resp.Choices[0].Message.Content)
	if i := strings.Index(text, "{"); i > 0 && strings.HasPrefix(text, "```") {
		text = strings.TrimSuffix(strings.TrimSpace(text[i:]), "```")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: the model's answer is not the expected JSON (%v); deferred, no page written", action, err)
	}
	return nil
}

// validateGenerated checks every page before any is written and adds the
// guaranteed source-summary page.
func validateGenerated(gen *Generated, an *Analysis, source string) ([]GeneratedPage, error) {
	valid := map[string]bool{}
	for _, t := range PageTypes {
		valid[t] = t != "overview"
	}
	var out []GeneratedPage
	hasSource := false
	seen := map[string]bool{}
	for i, p := range gen.Pages {
		p.Title = strings.TrimSpace(p.Title)
		switch {
		case p.Title == "" || len(p.Title) > 200 || strings.ContainsAny(p.Title, "/\\[]|#^:\x00\n") || strings.HasPrefix(p.Title, "."):
			return nil, fmt.Errorf("generated page %d has an unusable title %q; deferred, no page written", i+1, p.Title)
		case !valid[p.Type]:
			return nil, fmt.Errorf("generated page %q has unknown type %q; deferred, no page written", p.Title, p.Type)
		case strings.TrimSpace(p.Body) == "":
			return nil, fmt.Errorf("generated page %q is empty; deferred, no page written", p.Title)
		case strings.HasPrefix(strings.TrimSpace(p.Body), "---"):
			_, body, ok := splitFrontmatter(strings.TrimSpace(p.Body) + "\n")
			if ok {
				p.Body = body
			}
		}
		if p.ReviewBy != "" {
			if _, err := time.Parse("2006-01-02", p.ReviewBy); err != nil {
				return nil, fmt.Errorf("generated page %q has review_by %q, not a date; deferred", p.Title, p.ReviewBy)
			}
		}
		key := strings.ToLower(p.Title)
		if seen[key] {
			continue
		}
		seen[key] = true
		hasSource = hasSource || p.Type == "source"
		out = append(out, p)
	}
	if !hasSource {
		out = append(out, GeneratedPage{Title: "Source - " + strings.TrimSuffix(path.Base(source), path.Ext(source)), Type: "source",
			Body: "# " + path.Base(source) + "\n\n" + an.Summary + "\n"})
	}
	return out, nil
}

// pagePath is where a page with title lives.
func pagePath(title string) string { return PagesDir + "/" + title + ".md" }

// writeGenerated writes the pages (keeping created dates and merging
// sources of existing ones), then index.md, overview.md and the log entry.
func (s *Service) writeGenerated(ctx context.Context, t *Task, pages []GeneratedPage, overview, sha string) ([]string, error) {
	today := s.opts.Now().UTC().Format("2006-01-02")
	var written []string
	for _, p := range pages {
		rel := pagePath(p.Title)
		// An existing page of this title elsewhere in the vault is updated
		// in place.
		if to := s.vault.Resolve(p.Title, rel); to != "" && s.vault.IsPage(to) {
			rel = to
		}
		fm := Frontmatter{Title: p.Title, Type: p.Type, Sources: []string{t.Source}, Created: today, Updated: today, ReviewBy: p.ReviewBy, Tags: p.Tags}
		base := "new"
		if old := s.vault.Page(rel); old != nil {
			base = old.Hash
			if old.Frontmatter.Created != "" {
				fm.Created = old.Frontmatter.Created
			}
			fm.Sources = union(old.Frontmatter.Sources, fm.Sources)
			fm.Tags = union(old.Frontmatter.Tags, fm.Tags)
			if fm.ReviewBy == "" {
				fm.ReviewBy = old.Frontmatter.ReviewBy
			}
		}
		if _, err := s.vault.WriteFile(ctx, rel, MarshalPage(fm, p.Body), base); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	if strings.TrimSpace(overview) != "" {
		fm := Frontmatter{Title: "Overview", Type: "overview", Created: today, Updated: today}
		base := "new"
		if old := s.vault.Page(OverviewFile); old != nil {
			base, fm.Created = old.Hash, cmpOr(old.Frontmatter.Created, today)
		}
		if _, err := s.vault.WriteFile(ctx, OverviewFile, MarshalPage(fm, overview), base); err != nil {
			return written, err
		}
	}
	if err := s.writeCatalog(ctx); err != nil {
		return written, err
	}
	if err := s.Update(ctx, append(append([]string{}, written...), OverviewFile, IndexFile)...); err != nil {
		return written, err
	}
	// A task resumed after a crash must not log twice.
	marker := fmt.Sprintf("- task: %d", t.ID)
	if raw, _ := s.vault.ReadFile(LogFile); !strings.Contains(string(raw), marker+"\n- sha256: "+sha) {
		details := [][2]string{{"task", fmt.Sprint(t.ID)}, {"sha256", sha}, {"pages", strings.Join(written, ", ")}}
		if err := s.appendLog(ctx, "ingest", t.Source, details); err != nil {
			return written, err
		}
	}
	return written, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string{}, a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// writeCatalog regenerates index.md: every page under wiki/ by type, with
// the first line of its text.
func (s *Service) writeCatalog(ctx context.Context) error {
	byType := map[string][]*Page{}
	for _, p := range s.vault.Pages() {
		if strings.HasPrefix(p.Path, PagesDir+"/") {
			byType[cmpOr(p.Frontmatter.Type, "other")] = append(byType[cmpOr(p.Frontmatter.Type, "other")], p)
		}
	}
	var types []string
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	var b strings.Builder
	b.WriteString("# Index\n\nCatalog of the wiki's pages, by type. Regenerated after each ingest.\n")
	for _, t := range types {
		fmt.Fprintf(&b, "\n## %s\n\n", t)
		ps := byType[t]
		sort.Slice(ps, func(i, j int) bool { return strings.ToLower(ps[i].Title) < strings.ToLower(ps[j].Title) })
		for _, p := range ps {
			line := ""
			for _, l := range strings.Split(p.Body, "\n") {
				if l = strings.TrimSpace(strings.TrimLeft(l, "# ")); l != "" && l != p.Title {
					line = " — " + truncateRunes(l, 120)
					break
				}
			}
			fmt.Fprintf(&b, "- [[%s]]%s\n", strings.TrimSuffix(strings.TrimPrefix(p.Path, PagesDir+"/"), ".md"), line)
		}
	}
	fm := Frontmatter{Title: "Index", Type: "overview", Updated: s.opts.Now().UTC().Format("2006-01-02")}
	base := "new"
	if old := s.vault.Page(IndexFile); old != nil {
		base = old.Hash
	}
	_, err := s.vault.WriteFile(ctx, IndexFile, MarshalPage(fm, b.String()), base)
	return err
}
