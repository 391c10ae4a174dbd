package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/agent"
)

// SkippedDirs are directory names discovery never enters: version control,
// build output, caches and dependency trees.
var SkippedDirs = []string{
	".git", ".hg", ".svn", ".saivage",
	"node_modules", "bower_components", "vendor", ".venv", "venv", "__pycache__",
	".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".cache", ".gradle", ".next", ".nuxt",
	"build", "dist", "target", "out", "coverage",
}

// SearchIgnoreFile is read from the project root by recursive project
// searches: one slash-separated glob per line relative to the project
// root ('#' starts a comment; a trailing '/' matches directories only).
// It prunes discovery; it is not a confidentiality or permission control.
const SearchIgnoreFile = ".saivage-search-ignore"

// Limits of discovery.
const (
	DefaultGlobLimit = 200
	DefaultGrepLimit = 100
	MaxSearchLimit   = 1000
	MaxGrepFileBytes = 2 << 20
	maxWalkEntries   = 200000
)

func init() {
	register("glob", globTool)
	register("grep", grepTool)
}

type ignoreRule struct {
	pattern string
	dirOnly bool
}

// searchIgnore is a parsed .saivage-search-ignore.
type searchIgnore []ignoreRule

// parseSearchIgnore parses the file strictly: a malformed pattern is an
// error naming its line.
func parseSearchIgnore(data string) (searchIgnore, error) {
	var out searchIgnore
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{pattern: strings.TrimPrefix(line, "/")}
		if strings.HasSuffix(r.pattern, "/") {
			r.pattern, r.dirOnly = strings.TrimSuffix(r.pattern, "/"), true
		}
		if r.pattern == "" || strings.Contains(r.pattern, "\\") || strings.HasPrefix(r.pattern, "../") {
			return nil, fmt.Errorf("%s line %d: %q is not a project-relative slash pattern", SearchIgnoreFile, i+1, line)
		}
		if _, err := path.Match(r.pattern, ""); err != nil {
			return nil, fmt.Errorf("%s line %d: %q: %v", SearchIgnoreFile, i+1, line, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ignored reports whether the project-relative slash path rel is pruned.
// A pattern without '/' matches any single path element's name; with '/'
// it matches the relative path.
func (s searchIgnore) ignored(rel string, dir bool) bool {
	for _, r := range s {
		if r.dirOnly && !dir {
			continue
		}
		if strings.Contains(r.pattern, "/") {
			if ok, _ := path.Match(r.pattern, rel); ok {
				return true
			}
			continue
		}
		if ok, _ := path.Match(r.pattern, path.Base(rel)); ok {
			return true
		}
	}
	return false
}

// walker performs one fresh deterministic traversal.
type walker struct {
	env    *Env
	ignore searchIgnore
	inProj bool
	seen   int
}

// newWalker loads .saivage-search-ignore once when base is inside the
// project (explicit external roots do not load it).
func (e *Env) newWalker(base string) (*walker, error) {
	w := &walker{env: e, inProj: within(e.Root, base)}
	if w.inProj {
		data, err := os.ReadFile(filepath.Join(e.Root, SearchIgnoreFile))
		switch {
		case err == nil:
			if w.ignore, err = parseSearchIgnore(string(data)); err != nil {
				return nil, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("read %s: %w", SearchIgnoreFile, err)
		}
	}
	return w, nil
}

var errWalkLimit = errors.New("walk limit")

// walk visits regular files below base in lexical order, skipping fixed
// directories, ignored paths and directory symlinks.
func (w *walker) walk(ctx context.Context, base string, visit func(p, rel string) error) error {
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if w.seen++; w.seen > maxWalkEntries {
			return errWalkLimit
		}
		if w.seen%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if p != base && w.env.stateArea(p) == "internal" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel := filepath.ToSlash(w.env.relTo(p))
		if d.IsDir() {
			if p != base && (slices.Contains(SkippedDirs, d.Name()) || (w.inProj && w.ignore.ignored(rel, true))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || (w.inProj && w.ignore.ignored(rel, false)) {
			return nil // symlinks (to directories or files) are not followed
		}
		return visit(p, rel)
	})
	if errors.Is(err, errWalkLimit) {
		return fmt.Errorf("the search visited more than %d entries; narrow the path", maxWalkEntries)
	}
	return err
}

func (e *Env) relTo(p string) string {
	if within(e.Root, p) {
		if rel, err := filepath.Rel(e.Root, p); err == nil {
			return rel
		}
	}
	return p
}

// matchGlob matches a slash path against a pattern where ** spans any
// number of path elements and other elements use path.Match.
func matchGlob(pattern, name string) bool {
	return matchParts(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := range name {
				if matchParts(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
	Offset  int    `json:"offset,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

func window(offset, limit, def int) (int, int) {
	if offset < 0 {
		offset = 0
	}
	if limit <= 0 {
		limit = def
	}
	return offset, min(limit, MaxSearchLimit)
}

func globTool(env *Env) agent.Tool {
	return tool(spec("glob", "Find files by glob pattern (** matches any number of directories; e.g. **/*.go). "+
		"Skips .git, build, cache and dependency directories and paths listed in .saivage-search-ignore.",
		`{"type":"object","properties":{"pattern":{"type":"string","minLength":1},"path":{"type":"string","description":"directory to search (default: the project)"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false}`),
		func(ctx context.Context, a globArgs) (agent.ToolResult, error) {
			if _, err := path.Match(strings.ReplaceAll(a.Pattern, "**", "*"), ""); err != nil {
				return failf("pattern %q: %v", a.Pattern, err), nil
			}
			base := env.Root
			if a.Path != "" {
				var err error
				if base, err = env.readPath(a.Path); err != nil {
					return failf("%v", err), nil
				}
			}
			w, err := env.newWalker(base)
			if err != nil {
				return failf("%v", err), nil
			}
			offset, limit := window(a.Offset, a.Limit, DefaultGlobLimit)
			var matches []string
			total := 0
			err = w.walk(ctx, base, func(p, _ string) error {
				rel, _ := filepath.Rel(base, p)
				rel = filepath.ToSlash(rel)
				if matchGlob(a.Pattern, rel) || (!strings.Contains(a.Pattern, "/") && matchGlob(a.Pattern, path.Base(rel))) {
					if total >= offset && len(matches) < limit {
						matches = append(matches, env.display(p))
					}
					total++
				}
				return nil
			})
			if err != nil {
				return failf("%v", cleanErr(err, env.display(base))), nil
			}
			if total == 0 {
				return ok("no files match " + a.Pattern), nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d file(s) match %s", total, a.Pattern)
			if offset > 0 || offset+len(matches) < total {
				fmt.Fprintf(&b, " (showing %d–%d; continue with offset %d)", offset+1, offset+len(matches), offset+len(matches))
			}
			b.WriteString("\n" + strings.Join(matches, "\n"))
			return ok(b.String()), nil
		})
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Include    string `json:"include,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Offset     int    `json:"offset,omitempty"`
	Limit      int    `json:"limit,omitempty"`
}

func grepTool(env *Env) agent.Tool {
	return tool(spec("grep", "Search file contents with a regular expression (RE2 syntax) and list matching lines as path:line:text. "+
		"include filters files by glob (e.g. *.go or src/**/*.ts). Skips binary files, .git, build, cache and dependency directories and .saivage-search-ignore paths.",
		`{"type":"object","properties":{"pattern":{"type":"string","minLength":1},"path":{"type":"string","description":"file or directory (default: the project)"},"include":{"type":"string"},"ignore_case":{"type":"boolean"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["pattern"],"additionalProperties":false}`),
		func(ctx context.Context, a grepArgs) (agent.ToolResult, error) {
			expr := a.Pattern
			if a.IgnoreCase {
				expr = "(?i)" + expr
			}
			re, err := regexp.Compile(expr)
			if err != nil {
				return failf("pattern %q is not a valid regular expression: %v", a.Pattern, err), nil
			}
			base := env.Root
			if a.Path != "" {
				if base, err = env.readPath(a.Path); err != nil {
					return failf("%v", err), nil
				}
			}
			offset, limit := window(a.Offset, a.Limit, DefaultGrepLimit)
			var hits []string
			total := 0
			scan := func(p string) error {
				st, err := os.Stat(p)
				if err != nil || st.Size() > MaxGrepFileBytes {
					return nil
				}
				data, err := os.ReadFile(p)
				if err != nil || isBinary(data) {
					return nil
				}
				sc := bufio.NewScanner(strings.NewReader(string(data)))
				sc.Buffer(make([]byte, 64<<10), MaxGrepFileBytes)
				for n := 1; sc.Scan(); n++ {
					if line := sc.Text(); re.MatchString(line) {
						if total >= offset && len(hits) < limit {
							if len(line) > 400 {
								line = truncUTF8(line, 400) + "…"
							}
							hits = append(hits, fmt.Sprintf("%s:%d:%s", env.display(p), n, line))
						}
						total++
					}
				}
				return nil
			}
			st, err := os.Stat(base)
			if err != nil {
				return failf("%v", cleanErr(err, env.display(base))), nil
			}
			if st.IsDir() {
				w, err := env.newWalker(base)
				if err != nil {
					return failf("%v", err), nil
				}
				err = w.walk(ctx, base, func(p, _ string) error {
					if a.Include != "" {
						rel, _ := filepath.Rel(base, p)
						rel = filepath.ToSlash(rel)
						if !matchGlob(a.Include, rel) && !matchGlob(a.Include, path.Base(rel)) {
							return nil
						}
					}
					return scan(p)
				})
				if err != nil {
					return failf("%v", err), nil
				}
			} else if err := scan(base); err != nil {
				return failf("%v", err), nil
			}
			if total == 0 {
				return ok("no matches for " + a.Pattern), nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d matching line(s)", total)
			if offset > 0 || offset+len(hits) < total {
				fmt.Fprintf(&b, " (showing %d–%d; continue with offset %d)", offset+1, offset+len(hits), offset+len(hits))
			}
			b.WriteString("\n" + env.redact(strings.Join(hits, "\n")))
			return ok(b.String()), nil
		})
}
