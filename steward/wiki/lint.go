package wiki

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// LintIssue is one problem lint found.
type LintIssue struct {
	// Kind is broken_link, broken_heading, orphan, missing_sources,
	// duplicate_title, frontmatter, overdue_review or unreadable.
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// LintReport is the result of a lint run.
type LintReport struct {
	Pages  int         `json:"pages"`
	Issues []LintIssue `json:"issues"`
}

// Count returns the number of issues of kind.
func (r LintReport) Count(kind string) int {
	n := 0
	for _, i := range r.Issues {
		if i.Kind == kind {
			n++
		}
	}
	return n
}

// fixedPage reports whether p is one of the vault's fixed files, which
// nothing needs to link to.
func fixedPage(p string) bool {
	switch p {
	case IndexFile, LogFile, PurposeFile, SchemaFile, OverviewFile:
		return true
	}
	return false
}

// Lint checks the vault deterministically (no model): broken links and
// headings, orphans, Steward pages without sources, duplicate titles,
// frontmatter errors, overdue review_by dates and unreadable files. It
// reads only the in-memory state and writes nothing.
func Lint(v *Vault, today time.Time) LintReport {
	pages := v.Pages()
	rep := LintReport{Pages: len(pages), Issues: []LintIssue{}}
	add := func(kind, p string, line int, format string, args ...any) {
		rep.Issues = append(rep.Issues, LintIssue{Kind: kind, Path: p, Line: line, Message: fmt.Sprintf(format, args...)})
	}
	incoming := map[string]int{}
	titles := map[string][]string{}
	day := today.Format("2006-01-02")
	for _, p := range pages {
		titles[strings.ToLower(p.Title)] = append(titles[strings.ToLower(p.Title)], p.Path)
		for _, l := range v.Links(p) {
			switch {
			case l.To == "":
				add("broken_link", p.Path, l.Line, "[[%s]] does not resolve to any file", l.Raw)
			case l.HeadingMissing:
				add("broken_heading", p.Path, l.Line, "[[%s]]: %s has no heading %q", l.Raw, l.To, l.Heading)
			}
			if l.To != "" && l.To != p.Path {
				incoming[l.To]++
			}
		}
		if p.FrontmatterError != "" {
			add("frontmatter", p.Path, 1, "%s", p.FrontmatterError)
		}
		fm := p.Frontmatter
		if fm.Type != "" && !fixedPage(p.Path) && fm.Type != "overview" && len(fm.Sources) == 0 {
			add("missing_sources", p.Path, 1, "page of type %s lists no sources", fm.Type)
		}
		if fm.ReviewBy != "" && len(fm.ReviewBy) >= 10 && fm.ReviewBy[:10] < day {
			add("overdue_review", p.Path, 1, "review_by %s has passed", fm.ReviewBy[:10])
		}
	}
	for _, p := range pages {
		if incoming[p.Path] == 0 && !fixedPage(p.Path) {
			add("orphan", p.Path, 0, "no page links here")
		}
	}
	for _, paths := range titles {
		if len(paths) > 1 {
			for _, p := range paths {
				add("duplicate_title", p, 1, "title %q is also used by %s", v.Page(p).Title, strings.Join(others(paths, p), ", "))
			}
		}
	}
	for _, pr := range v.Problems() {
		add("unreadable", pr.Path, 0, "%s", pr.Reason)
	}
	sort.SliceStable(rep.Issues, func(i, j int) bool {
		a, b := rep.Issues[i], rep.Issues[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Kind < b.Kind
	})
	return rep
}

func others(list []string, not string) []string {
	var out []string
	for _, s := range list {
		if s != not {
			out = append(out, s)
		}
	}
	return out
}
