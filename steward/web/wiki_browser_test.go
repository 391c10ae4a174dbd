package web_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentstack/agentstack/steward/wiki"
)

// TestBrowserWiki opens the Wiki section in headless Chromium against a
// real host with the wiki API mounted as steward serve mounts it: it
// follows a wikilink, edits and saves a page, sees the conflict message
// when the file changed on disk, searches, views the graph, the queue and
// lint.
func TestBrowserWiki(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	b := newBrowser(t, 1280, 860, false)
	h := newHarness(t)
	vault := t.TempDir()
	if err := wiki.InitVault(vault); err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{
		"wiki/Project Atlas.md": "---\ntitle: Project Atlas\ntype: concept\nsources: [raw/sources/minutes.md]\nupdated: 2026-11-30\n---\n# Project Atlas\n\n" +
			"Atlas moves **invoices** to Postgres. Owner: [[Anna Rossi|Anna]]. Budget in [[Budget#Approval]]. Not yet written: [[Risks]].\n\n" +
			"`[[Not a link]]` stays code.\n",
		"wiki/Anna Rossi.md":     "---\ntitle: Anna Rossi\ntype: person\nsources: [raw/sources/minutes.md]\n---\nLeads [[Project Atlas]].\n",
		"wiki/Budget.md":         "---\ntitle: Budget\ntype: decision\nsources: [raw/sources/minutes.md]\n---\n## Approval\n40k approved for [[Project Atlas]].\n",
		"raw/sources/minutes.md": "minutes",
	}
	for p, body := range pages {
		os.WriteFile(filepath.Join(vault, filepath.FromSlash(p)), []byte(body), 0o644)
	}
	svc, err := wiki.Open(context.Background(), wiki.Options{Dir: vault, IndexDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Ingest(context.Background(), "raw/sources/minutes.md", ""); err != nil {
		t.Fatal(err)
	}
	api := wiki.APIHandler(svc)
	for _, m := range []string{"GET", "PUT", "POST"} {
		h.host.Handle(m+" /wiki/api/", http.StripPrefix("/wiki/api", api))
	}

	b.do(chromedp.Navigate(h.url() + "#/wiki/~pages"))
	b.wait(`document.documentElement.dataset.ready === '1' && document.querySelector('.wiki-page')?.dataset.loaded === 'pages'`)
	if !eval[bool](b, `[...document.querySelectorAll('.wiki-tree a')].some((a) => a.textContent === 'Project Atlas')`) {
		t.Fatal("the page tree lacks Project Atlas")
	}
	b.shot("wiki-tree")

	t.Run("renders a page with wikilinks and backlinks", func(t *testing.T) {
		b.t = t
		b.click(".wiki-tree", "Project Atlas")
		b.wait(`document.querySelector('.wiki-page')?.dataset.loaded === 'page'`)
		links := eval[[]string](b, `[...document.querySelectorAll('.wiki-content .wikilink')].map((a) => a.textContent + '→' + (a.getAttribute('href') || 'none') + (a.classList.contains('broken') ? ' broken' : ''))`)
		want := []string{"Anna→#/wiki/wiki%2FAnna%20Rossi.md", "Budget#Approval→#/wiki/wiki%2FBudget.md", "Risks→none broken"}
		if strings.Join(links, " | ") != strings.Join(want, " | ") {
			t.Errorf("wikilinks = %q", links)
		}
		if got := eval[string](b, `document.querySelector('.wiki-content code')?.textContent`); got != "[[Not a link]]" {
			t.Errorf("code span = %q", got)
		}
		backlinks := eval[[]string](b, `[...document.querySelectorAll('.backlinks a')].map((a) => a.textContent)`)
		if strings.Join(backlinks, ",") != "Anna Rossi,Budget" {
			t.Errorf("backlinks = %v", backlinks)
		}
		b.wait(`document.querySelector('.wiki-neighbours svg .graph-node')`)
		b.shot("wiki-page")
	})

	t.Run("a chat answer's wiki citation opens the page in the app", func(t *testing.T) {
		b.t = t
		got := eval[string](b, `(async () => {
			const m = await import(document.querySelector('link[rel=modulepreload][href*="markdown.js"]').href);
			const a = m.renderMarkdown('See [Project Atlas](#/wiki/wiki%2FProject%20Atlas.md).').querySelector('a');
			return a.getAttribute('href') + ' target=' + a.getAttribute('target');
		})()`)
		if got != "#/wiki/wiki%2FProject%20Atlas.md target=null" {
			t.Errorf("citation link = %q", got)
		}
	})

	t.Run("follows a wikilink", func(t *testing.T) {
		b.t = t
		b.click(".wiki-content", "Anna")
		b.wait(`document.getElementById('wiki-title')?.textContent === 'Anna Rossi' && document.querySelector('.wiki-page')?.dataset.loaded === 'page'`)
	})

	t.Run("edits and saves a page", func(t *testing.T) {
		b.t = t
		b.click(".view-header", "Edit")
		b.wait(`document.getElementById('wiki-editor')`)
		b.setValue("#wiki-editor", "---\ntitle: Anna Rossi\ntype: person\nsources: [raw/sources/minutes.md]\n---\nLeads [[Project Atlas]] and the *audit*.\n")
		b.click(".wiki-editor", "Save")
		b.wait(`document.querySelector('.wiki-content em')?.textContent === 'audit'`)
		got, _ := os.ReadFile(filepath.Join(vault, "wiki", "Anna Rossi.md"))
		if !strings.Contains(string(got), "and the *audit*") {
			t.Errorf("file after save: %s", got)
		}
	})

	t.Run("refuses to overwrite a page changed on disk", func(t *testing.T) {
		b.t = t
		b.click(".view-header", "Edit")
		b.wait(`document.getElementById('wiki-editor')`)
		outside := "---\ntitle: Anna Rossi\ntype: person\nsources: [raw/sources/minutes.md]\n---\nChanged in another editor.\n"
		os.WriteFile(filepath.Join(vault, "wiki", "Anna Rossi.md"), []byte(outside), 0o644)
		b.setValue("#wiki-editor", "---\ntitle: Anna Rossi\n---\nmy stale edit\n")
		b.click(".wiki-editor", "Save")
		b.wait(`document.querySelector('.wiki-page')?.dataset.conflict === '1'`)
		msg := eval[string](b, `document.querySelector('.wiki-edit-status').textContent`)
		if !strings.Contains(msg, "changed on disk since you opened it") {
			t.Errorf("conflict message = %q", msg)
		}
		if v := eval[string](b, `document.getElementById('wiki-editor').value`); !strings.Contains(v, "my stale edit") {
			t.Error("the user's text was lost")
		}
		if got, _ := os.ReadFile(filepath.Join(vault, "wiki", "Anna Rossi.md")); string(got) != outside {
			t.Errorf("the outside change was overwritten: %s", got)
		}
		b.shot("wiki-conflict")
	})

	t.Run("searches", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url() + "#/wiki/~search"))
		b.wait(`document.getElementById('wiki-search')`)
		b.setValue("#wiki-search", "postgres invoices")
		b.click(".wiki-search", "Search")
		b.wait(`document.querySelector('.wiki-page')?.dataset.searched === 'postgres invoices'`)
		first := eval[string](b, `document.querySelector('.search-results a')?.textContent`)
		if first != "Project Atlas" {
			t.Errorf("first result = %q", first)
		}
		b.shot("wiki-search")
	})

	t.Run("views the graph, the queue and lint", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(h.url() + "#/wiki/~graph"))
		b.wait(`document.querySelector('.wiki-page')?.dataset.loaded === 'graph'`)
		if n := eval[int](b, `document.querySelectorAll('.wiki-graph .graph-node').length`); n < 3 {
			t.Errorf("graph nodes = %d", n)
		}
		b.shot("wiki-graph")
		b.do(chromedp.Navigate(h.url() + "#/wiki/~queue"))
		b.wait(`document.querySelector('.wiki-page')?.dataset.loaded === 'queue' && document.querySelector('[data-state="queued"]')`)
		b.click(".wiki-body", "Cancel")
		b.wait(`document.querySelector('[data-state="cancelled"]')`)
		b.click(".wiki-body", "Retry")
		b.wait(`document.querySelector('[data-state="queued"]')`)
		b.do(chromedp.Navigate(h.url() + "#/wiki/~lint"))
		b.wait(`document.querySelector('.wiki-page')?.dataset.loaded === 'lint'`)
		kinds := eval[string](b, `document.querySelector('.wiki-body').textContent`)
		if !strings.Contains(kinds, "broken link") || !strings.Contains(kinds, "[[Risks]]") {
			t.Errorf("lint view: %s", kinds)
		}
		b.shot("wiki-lint")
	})
	b.noExceptions()
}
