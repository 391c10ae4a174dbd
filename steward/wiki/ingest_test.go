package wiki

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
	"github.com/agentstack/agentstack/steward/connectors/documents"
)

const fixtures = "../../../shared/fixtures/"

// scriptedWiki answers the two ingest steps like a model would, from the
// source named in the request: pages depend on the source and on version
// (a changed source gives changed bodies).
type scriptedWiki struct {
	version  string
	badJSON  bool
	generate func(source string) Generated
}

func userText(req llmtest.Request) string {
	msgs, _ := req.Body["messages"].([]any)
	var b strings.Builder
	for _, m := range msgs {
		if mm, ok := m.(map[string]any); ok {
			b.WriteString(fmt.Sprint(mm["content"]))
		}
	}
	return b.String()
}

func (sw *scriptedWiki) reply(req llmtest.Request) llmtest.Reply {
	text := userText(req)
	source := ""
	if i := strings.Index(text, "Source: "); i >= 0 {
		source = strings.TrimSpace(strings.SplitN(text[i+8:], "\n", 2)[0])
	}
	if sw.badJSON {
		return llmtest.Reply{Content: "Sure! Here are the pages: {pages: [oops"}
	}
	switch req.Header.Get(llm.HeaderUsageAction) {
	case UsageActionAnalyze:
		a := Analysis{Summary: "Summary of " + source + " " + sw.version, Entities: []AnalysisItem{{Name: "Steward", Type: "entity"}}}
		b, _ := json.Marshal(a)
		return llmtest.Reply{Content: "```json\n" + string(b) + "\n```"}
	case UsageActionGenerate:
		g := sw.generate(source)
		b, _ := json.Marshal(g)
		return llmtest.Reply{Content: string(b)}
	}
	return llmtest.Reply{Status: 400, ErrorMessage: "unattributed call"}
}

func defaultGenerate(version string) func(string) Generated {
	return func(source string) Generated {
		base := filepath.Base(source)
		switch {
		case strings.HasSuffix(base, ".md"):
			return Generated{Pages: []GeneratedPage{
				{Title: "Task Priority", Type: "concept", Tags: []string{"tasks"}, Body: "# Task Priority\n\nPriorities order tasks " + version + ". See [[Source - Priority]] and [[Encryption]].\n"},
				{Title: "Source - Priority", Type: "source", Body: "Summary of the Priority docs " + version + ".\n"},
			}, Overview: "The wiki covers task priorities " + version + "."}
		case strings.HasSuffix(base, ".pdf"):
			// No source page: Steward adds the guaranteed summary.
			return Generated{Pages: []GeneratedPage{{Title: "Encryption", Type: "concept", Body: "Principles of encryption from the thesis " + version + ". Related: [[Task Priority]].\n"}}}
		default:
			return Generated{Pages: []GeneratedPage{
				{Title: "Imported Air", Type: "entity", ReviewBy: "2030-01-01", Body: "Walking on imported air " + version + ".\n"},
				{Title: "Source - single-paragraph", Type: "source", Body: "A one-paragraph document.\n"},
			}}
		}
	}
}

func newIngestService(t *testing.T, prov *llmtest.Server) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	if err := InitVault(dir); err != nil {
		t.Fatal(err)
	}
	return openIngestService(t, prov, dir, filepath.Join(dir, ".steward")), dir
}

func openIngestService(t *testing.T, prov *llmtest.Server, dir, indexDir string) *Service {
	return openService(t, Options{Dir: dir, IndexDir: indexDir,
		Model: llm.NewClient(llm.ClientOptions{BaseURL: prov.URL}), ModelName: "tier-test",
		// Far above the 15 s default: a PDF extraction on a loaded machine
		// outran it, the source failed and a test of ingestion flaked.
		Extractor:    documents.New(documents.Options{Timeout: 5 * time.Minute}),
		RetryBackoff: time.Millisecond,
	})
}

// drain runs the queue until no task is due.
func drain(t *testing.T, s *Service) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		did, err := s.IngestNext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			c, _ := s.Queue().Counts(context.Background())
			if c.Queued == 0 && c.Running == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond) // a retry's back-off
		}
	}
	t.Fatal("the queue did not drain")
}

func TestIngestRealDocuments(t *testing.T) {
	prov := llmtest.NewServer(t)
	sw := &scriptedWiki{version: "v1", generate: defaultGenerate("v1")}
	prov.Handle(sw.reply)
	s, dir := newIngestService(t, prov)
	ctx := context.Background()
	outside := t.TempDir()
	md := filepath.Join(outside, "Priority.md")
	copyFile(t, fixtures+"wiki/obsidian-tasks-docs/Getting Started/Priority.md", md)
	pdf := filepath.Join(outside, "thesis.pdf")
	copyFile(t, fixtures+"documents/pdf-corpus/pdfjs/bug886717.pdf", pdf)
	docx := filepath.Join(outside, "single-paragraph.docx")
	copyFile(t, fixtures+"documents/mammoth-docx/single-paragraph.docx", docx)

	items, tasks, err := s.Add(ctx, AddOptions{Inputs: []string{md, pdf, docx}})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || len(tasks) != 3 {
		t.Fatalf("add: %+v %+v", items, tasks)
	}
	drain(t, s)
	reqs := prov.Requests()
	if len(reqs) != 6 {
		t.Fatalf("model calls = %d, want 2 per source", len(reqs))
	}
	var analyzeText string
	for _, r := range reqs {
		if r.Header.Get(llm.HeaderUsageService) != "wiki" {
			t.Errorf("call not attributed to wiki: %v", r.Header)
		}
		if r.Header.Get(llm.HeaderUsageAction) == UsageActionAnalyze {
			analyzeText += userText(r)
		}
	}
	// The PDF and DOCX reached the model through the document extractor;
	// purpose.md and schema.md went with them.
	for _, want := range []string{"Principles of encryption", "Walking on imported air", "priority", "=== purpose.md ===", "=== schema.md ==="} {
		if !strings.Contains(strings.ToLower(analyzeText), strings.ToLower(want)) {
			t.Errorf("analysis prompts lack %q", want)
		}
	}
	for _, p := range []string{"wiki/Task Priority.md", "wiki/Source - Priority.md", "wiki/Encryption.md", "wiki/Source - thesis.md", "wiki/Imported Air.md"} {
		pg := s.Vault().Page(p)
		if pg == nil {
			t.Fatalf("page %s not written", p)
		}
		if pg.FrontmatterError != "" || len(pg.Frontmatter.Sources) != 1 || !strings.HasPrefix(pg.Frontmatter.Sources[0], "raw/sources/") ||
			pg.Frontmatter.Created == "" || pg.Frontmatter.Type == "" {
			t.Errorf("%s frontmatter = %+v %s", p, pg.Frontmatter, pg.FrontmatterError)
		}
	}
	if got := s.Vault().Page("wiki/Imported Air.md").Frontmatter.ReviewBy; got != "2030-01-01" {
		t.Errorf("review_by = %q", got)
	}
	index := read(t, filepath.Join(dir, IndexFile))
	for _, want := range []string{"[[Task Priority]]", "[[Encryption]]", "[[Source - thesis]]", "## concept", "## source"} {
		if !strings.Contains(index, want) {
			t.Errorf("index.md lacks %q:\n%s", want, index)
		}
	}
	if ov := read(t, filepath.Join(dir, OverviewFile)); !strings.Contains(ov, "task priorities v1") {
		t.Errorf("overview.md = %s", ov)
	}
	log := read(t, filepath.Join(dir, LogFile))
	if n := strings.Count(log, "] ingest | raw/sources/"); n != 3 {
		t.Errorf("log has %d ingest entries:\n%s", n, log)
	}
	if lint := s.Lint(ctx); lint.Count("broken_link") != 0 || lint.Count("missing_sources") != 0 || lint.Count("frontmatter") != 0 {
		t.Errorf("lint after ingest: %+v", lint.Issues)
	}
	if res := mustSearch(t, s, SearchRequest{Query: "encryption"}); len(res.Results) == 0 || res.Results[0].Path != "wiki/Encryption.md" {
		t.Errorf("search after ingest: %v", paths(res.Results))
	}

	// The same file again: no model call.
	before := len(prov.Requests())
	if _, err := s.Ingest(ctx, "raw/sources/Priority.md", ""); err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if len(prov.Requests()) != before {
		t.Errorf("re-ingest of an unchanged source called the model %d times", len(prov.Requests())-before)
	}

	// A changed file updates the same pages.
	created := s.Vault().Page("wiki/Task Priority.md").Frontmatter.Created
	pagesBefore := len(s.Vault().Pages())
	sw.version, sw.generate = "v2", defaultGenerate("v2")
	os.WriteFile(md, append(readBytes(t, md), "\nA new paragraph.\n"...), 0o644)
	items, tasks, err = s.Add(ctx, AddOptions{Inputs: []string{md}})
	if err != nil || len(tasks) != 1 || items[0].Action != "updated" {
		t.Fatalf("re-add: %+v %v", items, err)
	}
	drain(t, s)
	if len(prov.Requests()) != before+2 {
		t.Errorf("changed source: %d model calls, want 2", len(prov.Requests())-before)
	}
	pg := s.Vault().Page("wiki/Task Priority.md")
	if !strings.Contains(pg.Body, "v2") || pg.Frontmatter.Created != created || len(s.Vault().Pages()) != pagesBefore {
		t.Errorf("update: body %q created %q pages %d→%d", pg.Body, pg.Frontmatter.Created, pagesBefore, len(s.Vault().Pages()))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, readBytes(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIngestInvalidJSONDefersThenFails(t *testing.T) {
	prov := llmtest.NewServer(t)
	sw := &scriptedWiki{badJSON: true}
	prov.Handle(sw.reply)
	s, dir := newIngestService(t, prov)
	ctx := context.Background()
	src := write(t, filepath.Join(t.TempDir(), "note.md"), "a note")
	_, tasks, err := s.Add(ctx, AddOptions{Inputs: []string{src}})
	if err != nil {
		t.Fatal(err)
	}
	pagesBefore := treeHashes(t, filepath.Join(dir, PagesDir))
	drain(t, s)
	task, _ := s.Queue().Get(ctx, tasks[0].ID)
	if task.Status != TaskFailed || task.Attempts != MaxRetries+1 || !strings.Contains(task.Error, "not the expected JSON") {
		t.Errorf("task = %+v", task)
	}
	if n := len(prov.Requests()); n != MaxRetries+1 {
		t.Errorf("model calls = %d, want one per attempt", n)
	}
	if after := treeHashes(t, filepath.Join(dir, PagesDir)); len(after) != len(pagesBefore) {
		t.Errorf("pages written from invalid JSON: %v", after)
	}
	// Retry after fixing the model; cancel works on a queued task.
	sw.badJSON, sw.generate = false, defaultGenerate("v1")
	if err := s.Queue().Retry(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Queue().Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, s)
	if task, _ = s.Queue().Get(ctx, task.ID); task.Status != TaskCancelled {
		t.Errorf("cancelled task ran: %+v", task)
	}
	s.Queue().Retry(ctx, task.ID)
	drain(t, s)
	if task, _ = s.Queue().Get(ctx, task.ID); task.Status != TaskDone || len(task.Pages) == 0 {
		t.Errorf("retried task = %+v", task)
	}
}

// TestIngestResumesAfterSIGKILL kills a process in the middle of a queue
// (its model call for the first source is in flight), restarts the queue
// in this process and checks every source is ingested once.
func TestIngestResumesAfterSIGKILL(t *testing.T) {
	if os.Getenv("WIKI_INGEST_CHILD") != "" {
		return // the child is run through TestIngestChild
	}
	prov := llmtest.NewServer(t)
	hold := make(chan struct{})
	defer close(hold)
	sw := &scriptedWiki{version: "v1", generate: defaultGenerate("v1")}
	killed := make(chan struct{})
	prov.Handle(func(req llmtest.Request) llmtest.Reply {
		select {
		case <-killed:
			return sw.reply(req)
		default:
		}
		if req.Header.Get(llm.HeaderUsageAction) == UsageActionGenerate {
			r := sw.reply(req)
			r.Delay = 10 * time.Minute // never answers: the child is killed meanwhile
			return r
		}
		return sw.reply(req)
	})
	dir := t.TempDir()
	InitVault(dir)
	indexDir := filepath.Join(dir, ".steward")
	s := openIngestService(t, prov, dir, indexDir)
	outside := t.TempDir()
	var inputs []string
	for _, n := range []string{"a.md", "b.md", "c.md"} {
		inputs = append(inputs, write(t, filepath.Join(outside, n), "note "+n))
	}
	if _, _, err := s.Add(context.Background(), AddOptions{Inputs: inputs}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestIngestChild$", "-test.v")
	cmd.Env = append(os.Environ(), "WIKI_INGEST_CHILD=1", "WIKI_DIR="+dir, "WIKI_INDEX="+indexDir, "WIKI_MODEL_URL="+prov.URL)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !hasAction(prov.Requests(), UsageActionGenerate) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child never reached step 2:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	close(killed)

	s = openIngestService(t, prov, dir, indexDir)
	ctx := context.Background()
	tasks, _ := s.Queue().List(ctx, 10)
	var queued int
	for _, task := range tasks {
		if task.Status == TaskQueued {
			queued++
		}
	}
	if queued != 3 {
		t.Fatalf("after the crash %d tasks are queued, want 3 (the interrupted one requeued): %+v", queued, tasks)
	}
	drain(t, s)
	c, _ := s.Queue().Counts(ctx)
	if c.Done != 3 || c.Failed != 0 {
		t.Errorf("counts = %+v", c)
	}
	log := read(t, filepath.Join(dir, LogFile))
	for _, n := range []string{"a.md", "b.md", "c.md"} {
		if k := strings.Count(log, "] ingest | raw/sources/"+n); k != 1 {
			t.Errorf("%s logged %d times", n, k)
		}
	}
	var sourcePages int
	for _, p := range s.Vault().Pages() {
		if p.Frontmatter.Type == "source" {
			sourcePages++
		}
	}
	if sourcePages != 1 { // all three .md sources write "Source - Priority" in this script
		t.Errorf("source pages = %d, want the one shared page", sourcePages)
	}
	if pg := s.Vault().Page("wiki/Task Priority.md"); pg == nil || len(pg.Frontmatter.Sources) != 3 {
		t.Errorf("shared page sources: %+v", pg)
	}
}

func hasAction(reqs []llmtest.Request, action string) bool {
	for _, r := range reqs {
		if r.Header.Get(llm.HeaderUsageAction) == action {
			return true
		}
	}
	return false
}

// TestIngestChild is the process TestIngestResumesAfterSIGKILL kills.
func TestIngestChild(t *testing.T) {
	if os.Getenv("WIKI_INGEST_CHILD") == "" {
		t.Skip("run by TestIngestResumesAfterSIGKILL")
	}
	s, err := Open(context.Background(), Options{Dir: os.Getenv("WIKI_DIR"), IndexDir: os.Getenv("WIKI_INDEX"),
		Model: llm.NewClient(llm.ClientOptions{BaseURL: os.Getenv("WIKI_MODEL_URL")}), ModelName: "tier-test"})
	if err != nil {
		t.Fatal(err)
	}
	s.RunIngest(context.Background())
}
