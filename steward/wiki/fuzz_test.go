package wiki

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParsePage: any bytes parse without panicking; every link found is
// text of the page; a page Steward writes parses back to the same header.
func FuzzParsePage(f *testing.F) {
	for _, s := range []string{
		"---\ntitle: A\ntype: concept\nsources: [raw/sources/a.md]\n---\n[[B|b]] ![[c.png]] [[#H]]\n# H\n",
		"---\ntitle: [broken\n---\n",
		"```\n[[in fence]]\n```\n`[[code]]` <!-- [[comment]] --> \\[[escaped]] [[Page\\|alias]]",
		"---\n---\n", "---", "[[", "]]", "[[]]", "[[a[[b]]", "\x00\xff", "---\nreview_by: tomorrow\n---\n",
		"東京都 [[東京]] città [[Città#Sezione|alias]]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pg := ParsePage("wiki/x.md", b)
		text := strings.ToValidUTF8(string(b), "\uFFFD")
		for _, l := range pg.Links {
			if !strings.Contains(text, "[["+l.Raw+"]]") {
				t.Fatalf("link %q is not in the page", l.Raw)
			}
		}
		if pg.FrontmatterError != "" || pg.Frontmatter.Title == "" || strings.ContainsAny(pg.Frontmatter.Title, "\r\n") {
			return
		}
		out := ParsePage("wiki/x.md", MarshalPage(pg.Frontmatter, pg.Body))
		if out.FrontmatterError != "" {
			t.Fatalf("Steward wrote a header it cannot read: %s\n%s", out.FrontmatterError, MarshalPage(pg.Frontmatter, pg.Body))
		}
		a, b2 := pg.Frontmatter, out.Frontmatter
		a.HasSources, b2.HasSources = true, true
		if a.Sources == nil {
			a.Sources = []string{}
		}
		if b2.Sources == nil {
			b2.Sources = []string{}
		}
		if !reflect.DeepEqual(a, b2) {
			t.Fatalf("header changed on rewrite: %+v → %+v", a, b2)
		}
	})
}
