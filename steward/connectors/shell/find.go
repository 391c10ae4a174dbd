package shell

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// find_files bounds.
const (
	DefaultFindResults = 50
	MaxFindResults     = 500
	DefaultFindDepth   = 12
	maxFindVisited     = 200_000
	findTimeBudget     = 10 * time.Second
)

// FindRequest filters a directory walk. Zero fields do not filter.
type FindRequest struct {
	Root           string    // absolute directory (default: home)
	Name           string    // case-insensitive substring of the file name
	Glob           string    // shell pattern matched against the file name
	Extensions     []string  // e.g. ["pdf", ".docx"]
	ModifiedAfter  time.Time // inclusive
	ModifiedBefore time.Time // exclusive
	MinSize        int64
	MaxSize        int64  // 0 = no maximum
	Type           string // "file" (default), "dir" or "any"
	MaxResults     int
	MaxDepth       int
	IncludeHidden  bool
}

// FoundFile is one match.
type FoundFile struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind     string `json:"kind"`
	Path     string `json:"path"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

// FindResult is find_files' answer.
type FindResult struct {
	// Kind names the card the web app draws (docs/protocol.md "Rich tool results").
	Kind      string      `json:"kind"`
	Root      string      `json:"root"`
	Files     []FoundFile `json:"files"`
	Truncated bool        `json:"truncated,omitempty"`
	Reason    string      `json:"reason,omitempty"` // why the walk stopped early
	Visited   int         `json:"visited"`
	Skipped   int         `json:"skippedProtected"`
}

// FindFiles walks Root without following symlinks, skipping protected and
// (unless asked) hidden entries, and returns matches sorted by path.
func (r *Runner) FindFiles(ctx context.Context, req FindRequest) (*FindResult, error) {
	if req.Root == "" {
		req.Root = r.opts.Home
	}
	if !filepath.IsAbs(req.Root) {
		return nil, refuse("root %q must be an absolute path", req.Root)
	}
	root, err := r.opts.Guard.Check(req.Root)
	if err != nil {
		return nil, refuse("%v", err)
	}
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return nil, refuse("root %s does not exist or is not a directory", req.Root)
	}
	if req.Glob != "" {
		if _, err := filepath.Match(req.Glob, ""); err != nil {
			return nil, refuse("bad glob %q: %v", req.Glob, err)
		}
	}
	switch req.Type {
	case "":
		req.Type = "file"
	case "file", "dir", "any":
	default:
		return nil, refuse("type must be file, dir or any")
	}
	if req.MinSize < 0 || req.MaxSize < 0 || req.MaxResults < 0 || req.MaxDepth < 0 {
		return nil, refuse("sizes, max_results and max_depth must not be negative")
	}
	limit := req.MaxResults
	if limit == 0 {
		limit = DefaultFindResults
	}
	limit = min(limit, MaxFindResults)
	depth := req.MaxDepth
	if depth == 0 {
		depth = DefaultFindDepth
	}
	exts := map[string]bool{}
	for _, e := range req.Extensions {
		exts["."+strings.ToLower(strings.TrimPrefix(e, "."))] = true
	}
	name := strings.ToLower(req.Name)
	deadline := time.Now().Add(findTimeBudget)
	res := &FindResult{Root: root, Files: []FoundFile{}}
	errStop := errors.New("stop")
	rootDepth := strings.Count(root, string(filepath.Separator))
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable entry: skip
		}
		if res.Visited++; res.Visited&1023 == 0 {
			if ctx.Err() != nil {
				res.Truncated, res.Reason = true, "cancelled"
				return errStop
			}
			if time.Now().After(deadline) {
				res.Truncated, res.Reason = true, "the walk took longer than 10 s; narrow the root or filters"
				return errStop
			}
		}
		if res.Visited > maxFindVisited {
			res.Truncated, res.Reason = true, "more than 200,000 entries visited; narrow the root or filters"
			return errStop
		}
		if p != root {
			if r.opts.Guard.Match(p) != nil {
				res.Skipped++
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !req.IncludeHidden && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() && strings.Count(p, string(filepath.Separator))-rootDepth >= depth {
				return fs.SkipDir
			}
		}
		if p == root || !matchesType(req.Type, d) {
			return nil
		}
		base := d.Name()
		if name != "" && !strings.Contains(strings.ToLower(base), name) {
			return nil
		}
		if req.Glob != "" {
			if ok, _ := filepath.Match(req.Glob, base); !ok {
				return nil
			}
		}
		if len(exts) > 0 && !exts[strings.ToLower(filepath.Ext(base))] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Size() < req.MinSize || (req.MaxSize > 0 && info.Size() > req.MaxSize) {
			return nil
		}
		if (!req.ModifiedAfter.IsZero() && info.ModTime().Before(req.ModifiedAfter)) ||
			(!req.ModifiedBefore.IsZero() && !info.ModTime().Before(req.ModifiedBefore)) {
			return nil
		}
		if len(res.Files) >= limit {
			res.Truncated, res.Reason = true, "more matches than max_results"
			return errStop
		}
		typ := "file"
		switch {
		case d.IsDir():
			typ = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			typ = "symlink"
		}
		res.Files = append(res.Files, FoundFile{Path: p, Name: base, Type: typ, Size: info.Size(), Modified: info.ModTime().UTC().Format(time.RFC3339)})
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	slices.SortFunc(res.Files, func(a, b FoundFile) int { return strings.Compare(a.Path, b.Path) })
	return res, nil
}

func matchesType(typ string, d fs.DirEntry) bool {
	switch typ {
	case "dir":
		return d.IsDir()
	case "file":
		return !d.IsDir()
	}
	return true
}
