package wiki

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

const tasksVault = "../../../shared/fixtures/wiki/obsidian-tasks-docs"

// treeHashes maps every file under dir to its content hash.
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = Hash(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestObsidianTasksVault opens a real third-party Obsidian vault, checks that
// its links resolve as Obsidian resolves them, and that indexing, search,
// graph and lint change no byte of it and add no file to it.
func TestObsidianTasksVault(t *testing.T) {
	if _, err := os.Stat(tasksVault); err != nil {
		t.Skipf("fixture vault not present: %v", err)
	}
	before := treeHashes(t, tasksVault)
	ctx := context.Background()
	svc := openService(t, Options{Dir: tasksVault, IndexDir: t.TempDir()})
	v := svc.Vault()
	pages := v.Pages()
	if len(pages) != 118 {
		t.Fatalf("pages = %d, want the vault's 118 notes", len(pages))
	}
	// The fixture keeps only .md files: the two screenshots On Completion.md
	// embeds are the vault's only unresolvable links, in Obsidian too.
	missingAttachments := map[string]bool{"on-completion-before.png": true, "on-completion-after.png": true}
	var total, headingLinks, selfLinks, aliased, embeds int
	for _, pg := range pages {
		for _, l := range v.Links(pg) {
			total++
			if l.Alias != "" {
				aliased++
			}
			if l.Embed {
				embeds++
			}
			if l.To == "" {
				if !missingAttachments[l.Target] {
					t.Errorf("%s:%d: [[%s]] does not resolve", pg.Path, l.Line, l.Raw)
				}
				continue
			}
			if l.Target == "" {
				selfLinks++
				if l.To != pg.Path {
					t.Errorf("%s: [[%s]] resolved to %s, want the page itself", pg.Path, l.Raw, l.To)
				}
			} else {
				// Obsidian resolves by file name, case-insensitively: the
				// target's last element names the file found.
				want := strings.ToLower(path.Base(l.Target))
				got := strings.ToLower(strings.TrimSuffix(path.Base(l.To), ".md"))
				if got != want && strings.ToLower(path.Base(l.To)) != want {
					t.Errorf("%s: [[%s]] resolved to %s", pg.Path, l.Raw, l.To)
				}
				if strings.Contains(l.Target, "/") && !strings.HasSuffix(strings.ToLower(l.To), strings.ToLower(l.Target)+".md") {
					t.Errorf("%s: partial path [[%s]] resolved to %s", pg.Path, l.Raw, l.To)
				}
			}
			if l.Heading != "" {
				headingLinks++
				if l.HeadingMissing {
					t.Errorf("%s:%d: [[%s]]: %s has no heading %q", pg.Path, l.Line, l.Raw, l.To, l.Heading)
				}
			}
		}
	}
	if total < 1100 || headingLinks < 200 || selfLinks < 50 || aliased < 200 || embeds < 20 {
		t.Errorf("links=%d headings=%d self=%d aliased=%d embeds=%d: the scan misses links", total, headingLinks, selfLinks, aliased, embeds)
	}
	// Spot checks, verified by hand against the vault.
	for _, c := range []struct{ from, target, want string }{
		{"Other Plugins/QuickAdd.md", "Advanced/Notifications", "Advanced/Notifications.md"},
		{"Queries/Filters.md", "custom filters", "Scripting/Custom Filters.md"},
		{"Introduction.md", "dates", "Getting Started/Dates.md"},
		{"Introduction.md", "Sample HTML - Full mode", "snippets-embedded-in-multiple-pages/Sample HTML - Full mode.md"},
	} {
		if got := v.Resolve(c.target, c.from); got != c.want {
			t.Errorf("Resolve(%q from %s) = %q, want %q", c.target, c.from, got, c.want)
		}
	}

	if _, err := svc.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Search(ctx, SearchRequest{Query: "recurring tasks", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "Getting Started/Recurring Tasks.md" {
		t.Errorf("search 'recurring tasks' = %+v, want Recurring Tasks first", res.Results)
	}
	if _, err := svc.Graph(ctx); err != nil {
		t.Fatal(err)
	}
	rep := svc.Lint(ctx)
	if n := rep.Count("broken_link"); n != 2 {
		t.Errorf("lint broken links = %d, want the 2 missing screenshots: %+v", n, rep.Issues)
	}
	after := treeHashes(t, tasksVault)
	if len(after) != len(before) {
		t.Fatalf("the vault has %d files after indexing, had %d", len(after), len(before))
	}
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
}

// writeVault creates files under a new temporary vault.
func writeVault(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGeneratedVaultLinks covers what the Tasks vault lacks: duplicate note
// names, broken links, links in code, self links and attachments.
func TestGeneratedVaultLinks(t *testing.T) {
	dir := writeVault(t, map[string]string{
		"Meeting.md":               "# Top\n",
		"work/Meeting.md":          "# Work meeting\n",
		"work/deep/Meeting.md":     "# Deep\n",
		"home/Plan.md":             "# Plan\n## Budget\n",
		"work/Plan.md":             "# Work plan\n",
		"work/Notes.md":            "[[Meeting]] [[Plan]] [[deep/Meeting]] [[home/plan#budget]] [[./Plan]] [[../Meeting]]\n",
		"Other.md":                 "[[Plan]] [[Nowhere]] [[#Local]] [[Other#Missing]] ![[diagram.PNG]] [[board.canvas]]\n## Local\n",
		"Code.md":                  "`[[Plan]]` and ``a [[Plan]] b``\n```\n[[Plan]]\n```\n~~~md\n[[Nowhere]]\n~~~\n<!-- [[Plan]] -->\n\\[[Plan]]\n| a | [[Other\\|alias]] |\n",
		"assets/diagram.png":       "\x89PNG",
		"board.canvas":             "{}",
		"raw/sources/Meeting.md":   "a source, not a page",
		".obsidian/workspace.json": "{}",
	})
	svc := openService(t, Options{Dir: dir, IndexDir: t.TempDir()})
	v := svc.Vault()
	links := func(p string) []ResolvedLink { return v.Links(v.Page(p)) }

	got := map[string]string{}
	for _, l := range links("work/Notes.md") {
		got[l.Raw] = l.To
	}
	want := map[string]string{
		"Meeting":          "work/Meeting.md", // same folder wins over the shorter root path
		"Plan":             "work/Plan.md",
		"deep/Meeting":     "work/deep/Meeting.md",
		"home/plan#budget": "home/Plan.md",
		"./Plan":           "work/Plan.md",
		"../Meeting":       "Meeting.md",
	}
	for raw, to := range want {
		if got[raw] != to {
			t.Errorf("work/Notes.md [[%s]] → %q, want %q", raw, got[raw], to)
		}
	}
	other := links("Other.md")
	if len(other) != 6 {
		t.Fatalf("Other.md links = %+v", other)
	}
	// From the root, two Plan.md live in folders of equal depth: the
	// alphabetically first path wins; Meeting.md at the root is shortest.
	if other[0].To != "home/Plan.md" || v.Resolve("Meeting", "Other.md") != "Meeting.md" {
		t.Errorf("shortest path: Plan → %q, Meeting → %q", other[0].To, v.Resolve("Meeting", "Other.md"))
	}
	if other[1].To != "" {
		t.Errorf("[[Nowhere]] resolved to %q", other[1].To)
	}
	if other[2].To != "Other.md" || other[2].HeadingMissing {
		t.Errorf("[[#Local]] = %+v", other[2])
	}
	if !other[3].HeadingMissing {
		t.Errorf("[[Other#Missing]] = %+v, want a missing heading", other[3])
	}
	if other[4].To != "assets/diagram.png" || other[4].Note || !other[4].Embed {
		t.Errorf("attachment embed = %+v", other[4])
	}
	if other[5].To != "board.canvas" {
		t.Errorf("[[board.canvas]] = %+v", other[5])
	}
	code := links("Code.md")
	if len(code) != 1 || code[0].Target != "Other" || code[0].Alias != "alias" {
		t.Errorf("Code.md links = %+v, want only the table link", code)
	}
	if v.Page("raw/sources/Meeting.md") != nil || v.Page(".obsidian/workspace.json") != nil {
		t.Error("sources or hidden files were read as pages")
	}
	rep := svc.Lint(context.Background())
	if rep.Count("broken_link") != 1 || rep.Count("broken_heading") != 1 {
		t.Errorf("lint = %+v", rep.Issues)
	}
}

func TestCleanPath(t *testing.T) {
	for _, bad := range []string{"", "../x.md", "a/../../x.md", "/etc/passwd", ".obsidian/x.md", "a/.git/config"} {
		if _, err := CleanPath(bad); err == nil {
			t.Errorf("CleanPath(%q) accepted", bad)
		}
	}
	if c, err := CleanPath("wiki/./A.md"); err != nil || c != "wiki/A.md" {
		t.Errorf("CleanPath = %q, %v", c, err)
	}
}
