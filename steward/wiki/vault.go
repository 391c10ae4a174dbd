package wiki

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultMaxPageBytes is the largest Markdown file read as a page; larger
// files are reported by lint and left out of the index.
const DefaultMaxPageBytes = 8 << 20

// Well-known files and folders of a Steward vault.
const (
	SourcesDir   = "raw/sources"
	PagesDir     = "wiki"
	IndexFile    = "index.md"
	LogFile      = "log.md"
	PurposeFile  = "purpose.md"
	SchemaFile   = "schema.md"
	OverviewFile = "overview.md"
)

// ErrConflict reports a write whose base version is no longer the file on
// disk: someone changed the page since it was opened.
var ErrConflict = errors.New("the page changed on disk since it was opened")

// Problem is a file the vault could not use as a page.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Vault is a folder of Markdown pages held in memory as parsed metadata.
// Readers are concurrent; writers take the vault lock.
type Vault struct {
	dir      string
	lockPath string
	maxBytes int64

	mu          sync.RWMutex
	pages       map[string]*Page
	attachments map[string]bool
	sources     map[string]bool // files under raw/ (not pages)
	problems    map[string]Problem
	resolver    *Resolver
	gen         uint64 // incremented on every change
}

// Generation returns a number that changes whenever the vault's state does
// (caches of derived data compare it).
func (v *Vault) Generation() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.gen
}

// VaultOptions configure OpenVault.
type VaultOptions struct {
	// Dir is the vault folder; it must exist.
	Dir string
	// LockPath is the file locked by writers (default Dir/.steward.lock);
	// the index directory is a good place, so that opening a vault read-only
	// adds nothing to it.
	LockPath string
	// MaxPageBytes bounds a page file (default DefaultMaxPageBytes).
	MaxPageBytes int64
}

// OpenVault opens the vault at opts.Dir and reads every file in it.
func OpenVault(ctx context.Context, opts VaultOptions) (*Vault, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("open wiki %s: %w", opts.Dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open wiki %s: %w (create it with `steward wiki init` or set STEWARD_WIKI_DIR)", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open wiki %s: not a directory", dir)
	}
	v := &Vault{dir: dir, lockPath: opts.LockPath, maxBytes: opts.MaxPageBytes}
	if v.lockPath == "" {
		v.lockPath = filepath.Join(dir, ".steward.lock")
	}
	if v.maxBytes <= 0 {
		v.maxBytes = DefaultMaxPageBytes
	}
	if err := v.Rescan(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// Dir returns the vault folder.
func (v *Vault) Dir() string { return v.dir }

// isSource reports whether p lies under raw/ (imported sources, not pages).
func isSource(p string) bool { return p == "raw" || strings.HasPrefix(p, "raw/") }

// Rescan reads every file again, replacing the in-memory state.
func (v *Vault) Rescan(ctx context.Context) error {
	pages := map[string]*Page{}
	att := map[string]bool{}
	src := map[string]bool{}
	problems := map[string]Problem{}
	var all []string
	err := filepath.WalkDir(v.dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			rel, _ := filepath.Rel(v.dir, full)
			problems[filepath.ToSlash(rel)] = Problem{filepath.ToSlash(rel), err.Error()}
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		rel, _ := filepath.Rel(v.dir, full)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil // symlinks are never followed
		}
		all = append(all, rel)
		switch {
		case isSource(rel):
			src[rel] = true
		case strings.EqualFold(path.Ext(rel), ".md"):
			pg, prob := v.load(rel)
			if prob != "" {
				problems[rel] = Problem{rel, prob}
			} else {
				pages[rel] = pg
			}
		default:
			att[rel] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan wiki %s: %w", v.dir, err)
	}
	v.mu.Lock()
	v.pages, v.attachments, v.sources, v.problems = pages, att, src, problems
	v.resolver = NewResolver(all)
	v.gen++
	v.mu.Unlock()
	return nil
}

// load reads and parses one page, or explains why it cannot be one.
func (v *Vault) load(rel string) (*Page, string) {
	full := filepath.Join(v.dir, filepath.FromSlash(rel))
	st, err := os.Lstat(full)
	if err != nil {
		return nil, err.Error()
	}
	if st.Size() > v.maxBytes {
		return nil, fmt.Sprintf("file is %d bytes, over the %d-byte page limit; it is not indexed", st.Size(), v.maxBytes)
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return nil, err.Error()
	}
	if bytes.IndexByte(b[:min(len(b), 8192)], 0) >= 0 {
		return nil, "file holds binary data, not Markdown text; it is not indexed"
	}
	pg := ParsePage(rel, b)
	pg.ModTime = st.ModTime()
	return pg, ""
}

// Refresh re-reads one file after a change (or notices its removal) and
// reports whether the vault's state changed.
func (v *Vault) Refresh(rel string) (changed bool) {
	rel = path.Clean(filepath.ToSlash(rel))
	full := filepath.Join(v.dir, filepath.FromSlash(rel))
	st, err := os.Lstat(full)
	v.mu.Lock()
	defer v.mu.Unlock()
	defer func() {
		if changed {
			v.gen++
		}
	}()
	if err != nil || !st.Mode().IsRegular() {
		_, had := v.pages[rel]
		_, hadProb := v.problems[rel]
		changed = had || hadProb || v.attachments[rel] || v.sources[rel]
		delete(v.pages, rel)
		delete(v.problems, rel)
		delete(v.attachments, rel)
		delete(v.sources, rel)
		v.resolver.remove(rel)
		return changed
	}
	v.resolver.add(rel)
	switch {
	case isSource(rel):
		changed = !v.sources[rel]
		v.sources[rel] = true
	case strings.EqualFold(path.Ext(rel), ".md"):
		old := v.pages[rel]
		if old != nil && old.Size == st.Size() && old.ModTime.Equal(st.ModTime()) {
			return false
		}
		pg, prob := v.load(rel)
		if prob != "" {
			delete(v.pages, rel)
			v.problems[rel] = Problem{rel, prob}
			return true
		}
		delete(v.problems, rel)
		v.pages[rel] = pg
		changed = old == nil || old.Hash != pg.Hash
	default:
		changed = !v.attachments[rel]
		v.attachments[rel] = true
	}
	return changed
}

// Page returns the parsed page at rel, or nil.
func (v *Vault) Page(rel string) *Page {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.pages[rel]
}

// Pages returns every page sorted by path.
func (v *Vault) Pages() []*Page {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*Page, 0, len(v.pages))
	for _, p := range v.pages {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Problems returns the files that could not be read as pages.
func (v *Vault) Problems() []Problem {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Problem, 0, len(v.problems))
	for _, p := range v.problems {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Sources returns the files under raw/, sorted.
func (v *Vault) Sources() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.sources))
	for p := range v.sources {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Resolve resolves a link target from the page at source (see Resolver).
func (v *Vault) Resolve(target, source string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.resolver.Resolve(target, source)
}

// IsPage reports whether rel is a page (a Markdown note).
func (v *Vault) IsPage(rel string) bool { return v.Page(rel) != nil }

// ResolvedLink is a link with the file it names.
type ResolvedLink struct {
	Link
	// To is the vault path the link resolves to, "" when broken.
	To string `json:"to,omitempty"`
	// Note is true when To is a Markdown page (not an attachment).
	Note bool `json:"note,omitempty"`
	// HeadingMissing is true when the target exists but has no such heading.
	HeadingMissing bool `json:"headingMissing,omitempty"`
}

// Links returns the page's links with their resolution.
func (v *Vault) Links(pg *Page) []ResolvedLink {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]ResolvedLink, len(pg.Links))
	for i, l := range pg.Links {
		to := v.resolver.Resolve(l.Target, pg.Path)
		rl := ResolvedLink{Link: l, To: to}
		if tp := v.pages[to]; tp != nil {
			rl.Note = true
			rl.HeadingMissing = l.Heading != "" && !HasHeading(tp.Headings, l.Heading)
		}
		out[i] = rl
	}
	return out
}

// CleanPath validates a vault-relative path given by a user or a model:
// forward slashes, no traversal, no hidden elements, not absolute.
func CleanPath(p string) (string, error) {
	s := filepath.ToSlash(strings.TrimSpace(p))
	if s == "" {
		return "", errors.New("empty page path")
	}
	if path.IsAbs(s) || filepath.IsAbs(p) || strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("page path %q must be relative to the wiki", p)
	}
	c := path.Clean(s)
	for _, el := range strings.Split(c, "/") {
		if el == ".." || strings.HasPrefix(el, ".") {
			return "", fmt.Errorf("page path %q leaves the wiki or names a hidden file", p)
		}
	}
	return c, nil
}

// ReadFile returns the bytes of the vault file rel, refusing paths that
// leave the vault, including through a symlink.
func (v *Vault) ReadFile(rel string) ([]byte, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return nil, err
	}
	full, err := v.inside(c)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("read wiki page %s: %w", c, err)
	}
	return b, nil
}

// inside returns the absolute path of rel after checking that its existing
// ancestors resolve inside the vault.
func (v *Vault) inside(rel string) (string, error) {
	full := filepath.Join(v.dir, filepath.FromSlash(rel))
	root, err := filepath.EvalSymlinks(v.dir)
	if err != nil {
		return "", fmt.Errorf("resolve wiki folder: %w", err)
	}
	probe := full
	for {
		if real, err := filepath.EvalSymlinks(probe); err == nil {
			if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
				return "", fmt.Errorf("%s resolves outside the wiki (symlink)", rel)
			}
			return full, nil
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return full, nil
		}
		probe = parent
	}
}

// Lock takes the vault's writer lock (an flock on the lock file, so other
// Steward processes on the same vault wait too) and returns its release.
func (v *Vault) Lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(v.lockPath), 0o700); err != nil {
		return nil, fmt.Errorf("create wiki lock folder: %w", err)
	}
	f, err := os.OpenFile(v.lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open wiki lock %s: %w", v.lockPath, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock wiki %s: %w", v.lockPath, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the wiki lock: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WriteFile writes a vault file atomically (temporary file + rename) under
// the vault lock. With a non-empty baseHash the write happens only if the
// file on disk still has that content hash, or, for baseHash "new", does
// not exist; otherwise it fails with ErrConflict. Markdown pages must have
// a parseable header. Sources under raw/ are never written. It returns the
// new page.
func (v *Vault) WriteFile(ctx context.Context, rel string, content []byte, baseHash string) (*Page, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return nil, err
	}
	if isSource(c) {
		return nil, fmt.Errorf("%s is an imported source; sources are immutable (use `steward wiki add`)", c)
	}
	isMD := strings.EqualFold(path.Ext(c), ".md")
	if isMD {
		if pg := ParsePage(c, content); pg.FrontmatterError != "" {
			return nil, fmt.Errorf("refusing to write %s: %s", c, pg.FrontmatterError)
		}
		if int64(len(content)) > v.maxBytes {
			return nil, fmt.Errorf("refusing to write %s: %d bytes is over the %d-byte page limit", c, len(content), v.maxBytes)
		}
	}
	unlock, err := v.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	full, err := v.inside(c)
	if err != nil {
		return nil, err
	}
	if baseHash != "" {
		cur, err := os.ReadFile(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if baseHash != "new" {
				return nil, fmt.Errorf("write %s: %w (it was deleted)", c, ErrConflict)
			}
		case err != nil:
			return nil, fmt.Errorf("write %s: %w", c, err)
		case Hash(cur) != baseHash:
			return nil, fmt.Errorf("write %s: %w; reload it and apply your change again", c, ErrConflict)
		}
	}
	if err := AtomicWrite(full, content); err != nil {
		return nil, fmt.Errorf("write wiki page %s: %w", c, err)
	}
	v.Refresh(c)
	return v.Page(c), nil
}

// AtomicWrite writes b to path through a temporary file in the same folder
// and a rename, so that readers see the old or the new file, never a part.
func AtomicWrite(full string, b []byte) error {
	tmp, err := writeTemp(full, b)
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, full); err != nil {
		os.Remove(tmp)
	}
	return err
}

// writeTemp writes data, synced and mode 0644, to a new temporary file
// beside dest (creating its folder) and returns its path; the caller
// publishes it by rename or link.
func writeTemp(dest string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(dest), ".tmp-"+filepath.Base(dest)+"-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// scaffold holds the starting content of a new vault's fixed files.
var scaffold = map[string]string{
	PurposeFile: "---\ntitle: Purpose\ntype: overview\nsources: []\n---\n# Purpose\n\nThis wiki is Steward's long-term memory: durable facts, decisions, commitments, people and organizations from the user's sources, each page linked to the sources it came from.\n",
	SchemaFile: "---\ntitle: Schema\ntype: overview\nsources: []\n---\n# Schema\n\n" +
		"- Pages live in `wiki/`, one subject per page, named by their title.\n" +
		"- Every page has YAML frontmatter: title, type (source, entity, concept, decision, commitment, person, organization, query), sources (paths under raw/sources), created, updated, optional review_by and tags.\n" +
		"- Each ingested source gets a page of type source summarising it.\n" +
		"- Link related pages with `[[Page Title]]` wikilinks; prefer updating a page to creating a near-duplicate.\n",
	IndexFile:    "---\ntitle: Index\ntype: overview\nsources: []\n---\n# Index\n\nNo pages yet.\n",
	LogFile:      "# Log\n\nAppend-only record of wiki operations: `## [TIME] OPERATION | SUBJECT` followed by details.\n",
	OverviewFile: "---\ntitle: Overview\ntype: overview\nsources: []\n---\n# Overview\n\nNothing ingested yet.\n",
}

// InitVault creates a Steward vault at dir: raw/sources/, wiki/ and the
// fixed files. Existing files are left alone.
func InitVault(dir string) error {
	for _, d := range []string{SourcesDir, PagesDir} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return fmt.Errorf("create wiki folder %s: %w", d, err)
		}
	}
	for name, body := range scaffold {
		full := filepath.Join(dir, name)
		if _, err := os.Stat(full); err == nil {
			continue
		}
		if err := AtomicWrite(full, []byte(body)); err != nil {
			return fmt.Errorf("create %s: %w", full, err)
		}
	}
	return nil
}
