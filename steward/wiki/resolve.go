package wiki

import (
	"path"
	"sort"
	"strings"
)

// Resolver resolves wikilink targets to vault files the way Obsidian does:
//
//   - matching is case-insensitive;
//   - "Page" means "Page.md"; a target with another extension ("a.png",
//     "board.canvas") names that file;
//   - a target starting with "./" or "../" is relative to the linking page's
//     folder; any other target with folders is first tried as a path from
//     the vault root;
//   - otherwise the file name is looked up anywhere in the vault; a target
//     with folders ("Advanced/Notifications") must match the end of the path
//     (a partial path);
//   - among several matches, the one in the linking page's folder wins, then
//     the shortest path, then the alphabetically first — which is why the
//     shortest unique path is always enough to name a file.
type Resolver struct {
	files  map[string]string   // lower-case path → path
	byName map[string][]string // lower-case file name → paths
}

// NewResolver indexes the vault-relative paths of every file (notes and
// attachments).
func NewResolver(paths []string) *Resolver {
	r := &Resolver{files: make(map[string]string, len(paths)), byName: make(map[string][]string, len(paths))}
	for _, p := range paths {
		r.add(p)
	}
	return r
}

func (r *Resolver) add(p string) {
	lp := strings.ToLower(p)
	if _, ok := r.files[lp]; ok {
		return
	}
	r.files[lp] = p
	name := path.Base(lp)
	r.byName[name] = append(r.byName[name], p)
}

func (r *Resolver) remove(p string) {
	lp := strings.ToLower(p)
	if _, ok := r.files[lp]; !ok {
		return
	}
	delete(r.files, lp)
	name := path.Base(lp)
	list := r.byName[name]
	for i, q := range list {
		if q == p {
			r.byName[name] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(r.byName[name]) == 0 {
		delete(r.byName, name)
	}
}

// Resolve returns the file the link target names from the page at source,
// or "" when no file matches (a broken link). An empty target is the
// source page itself.
func (r *Resolver) Resolve(target, source string) string {
	t := strings.TrimSpace(strings.ReplaceAll(target, "\\", "/"))
	if t == "" {
		return source
	}
	t = strings.TrimPrefix(t, "/")
	candidates := []string{t + ".md", t}
	if hasExt(t) {
		candidates = []string{t, t + ".md"}
	}
	dir := path.Dir(source)
	if strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../") {
		for _, c := range candidates {
			if p, ok := r.files[strings.ToLower(path.Join(dir, c))]; ok {
				return p
			}
		}
		return ""
	}
	if strings.Contains(t, "/") {
		for _, c := range candidates {
			if p, ok := r.files[strings.ToLower(path.Clean(c))]; ok {
				return p
			}
		}
	}
	for _, c := range candidates {
		lc := strings.ToLower(path.Clean(c))
		var matches []string
		for _, p := range r.byName[path.Base(lc)] {
			lp := strings.ToLower(p)
			if !strings.Contains(lc, "/") || strings.HasSuffix(lp, "/"+lc) {
				matches = append(matches, p)
			}
		}
		if len(matches) > 0 {
			return pick(matches, dir)
		}
	}
	return ""
}

func pick(matches []string, dir string) string {
	if len(matches) == 1 {
		return matches[0]
	}
	sort.Slice(matches, func(i, j int) bool {
		a, b := matches[i], matches[j]
		if sa, sb := path.Dir(a) == dir, path.Dir(b) == dir; sa != sb {
			return sa
		}
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return a < b
	})
	return matches[0]
}

// hasExt reports whether the last path element has a file extension of the
// kind Obsidian treats as naming a file type (letters and digits, 1–5).
func hasExt(t string) bool {
	ext := path.Ext(path.Base(t))
	if len(ext) < 2 || len(ext) > 6 {
		return false
	}
	for _, c := range ext[1:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// HeadingKey normalises a heading for comparison with a link's heading
// part: Obsidian ignores case, the characters it cannot put in a link and
// runs of spaces.
func HeadingKey(h string) string {
	h = strings.Map(func(r rune) rune {
		switch r {
		case '#', '|', '^', ':', '%', '[', ']', '\\', '/':
			return ' '
		}
		return r
	}, strings.ToLower(h))
	return strings.Join(strings.Fields(h), " ")
}

// HasHeading reports whether heading (possibly a nested "A#B" path, or a
// "^block" reference, which is not checked) is one of headings.
func HasHeading(headings []string, heading string) bool {
	if strings.HasPrefix(heading, "^") {
		return true
	}
	parts := strings.Split(heading, "#")
	want := HeadingKey(parts[len(parts)-1])
	for _, h := range headings {
		if HeadingKey(h) == want {
			return true
		}
	}
	return false
}
