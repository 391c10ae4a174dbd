package wiki

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Files of wiki-add at the vault root.
const (
	AddManifestFile = ".llmwiki-added.json"
	AddLockFile     = ".llmwiki-added.lock"
)

// MaxAddBytes is the largest file wiki-add copies.
const MaxAddBytes = 100 << 20

// junkDirs are build and tool folders wiki-add never descends into.
var junkDirs = map[string]bool{"node_modules": true, "__pycache__": true, "build": true, "dist": true, "target": true,
	"vendor": true, "venv": true, "bower_components": true, "coverage": true, "out": true, "tmp": true}

// addTypes are the source types wiki-add copies (ingest reads text and
// Markdown directly, and PDF, Office and HTML through the document
// extractor).
var addTypes = map[string]bool{".md": true, ".markdown": true, ".txt": true, ".pdf": true, ".docx": true, ".pptx": true,
	".xlsx": true, ".html": true, ".htm": true, ".rtf": true, ".csv": true, ".json": true, ".eml": true, ".odt": true}

// AddOptions describe one wiki-add.
type AddOptions struct {
	// Inputs are files and folders to copy.
	Inputs []string
	// Root, when set, is the destination folder (inside raw/sources, as a
	// vault-relative or absolute path): folders keep their structure under
	// it, and tracked origins are relocated there.
	Root string
}

// AddItem is what happened to one input file.
type AddItem struct {
	Origin string `json:"origin"`
	Dest   string `json:"dest,omitempty"`
	// Action is written, skipped (same bytes), updated (tracked origin
	// changed), renamed (unrelated file of the same name; copied to
	// "name (N).ext"), relocated, or ignored (with Reason).
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Context is the imported folder, passed to ingest as classification
	// context.
	Context string `json:"context,omitempty"`
	sha     string
}

// Changed reports whether the item wrote a new or changed snapshot.
func (i AddItem) Changed() bool {
	return i.Action == "written" || i.Action == "updated" || i.Action == "renamed" || i.Action == "relocated"
}

type manifestEntry struct {
	Dest   string `json:"dest"`
	SHA256 string `json:"sha256"`
}

type addManifest struct {
	Version int                      `json:"version"`
	Origins map[string]manifestEntry `json:"origins"`
}

// AddSources copies files and folders into raw/sources/ with the
// collision table: a missing destination is written; the same SHA-256 is
// skipped; different bytes from a tracked origin overwrite its snapshot;
// different bytes from an unrelated origin go to "name (2).ext" (then the
// next free suffix). It never follows symlinks, refuses destinations
// outside raw/sources (traversal or symlink escapes), serialises with the
// .llmwiki-added.lock file (a stale lock fails closed) and publishes the
// origin → destination manifest by atomic rename before removing a
// relocated snapshot.
func AddSources(vaultDir string, opts AddOptions) ([]AddItem, error) {
	vaultDir, err := filepath.Abs(vaultDir)
	if err != nil {
		return nil, err
	}
	srcRoot := filepath.Join(vaultDir, filepath.FromSlash(SourcesDir))
	if err := os.MkdirAll(srcRoot, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", srcRoot, err)
	}
	destRoot, err := addDestination(vaultDir, srcRoot, opts.Root)
	if err != nil {
		return nil, err
	}
	unlock, err := addLock(vaultDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	man, err := loadManifest(filepath.Join(vaultDir, AddManifestFile))
	if err != nil {
		return nil, err
	}
	var items []AddItem
	var files []addFile
	for _, in := range opts.Inputs {
		fs, skipped, err := collect(in)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
		items = append(items, skipped...)
	}
	var relocatedFrom []string
	for _, f := range files {
		it, old, err := addOne(vaultDir, destRoot, opts.Root != "", man, f)
		if err != nil {
			return items, err
		}
		if old != "" {
			relocatedFrom = append(relocatedFrom, old)
		}
		items = append(items, it)
	}
	if err := saveManifest(filepath.Join(vaultDir, AddManifestFile), man); err != nil {
		return items, err
	}
	// Only after the manifest points to the new copies are the old ones
	// removed, unless another origin still uses them.
	for _, old := range relocatedFrom {
		used := false
		for _, e := range man.Origins {
			used = used || e.Dest == old
		}
		if !used {
			os.Remove(filepath.Join(vaultDir, filepath.FromSlash(old)))
		}
	}
	return items, nil
}

// addDestination validates the destination folder.
func addDestination(vaultDir, srcRoot, root string) (string, error) {
	if root == "" {
		return srcRoot, nil
	}
	dest := root
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(vaultDir, dest)
	}
	dest = filepath.Clean(dest)
	if dest != srcRoot && !strings.HasPrefix(dest, srcRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("destination %s is outside %s; sources can only be added there", root, SourcesDir)
	}
	realRoot, err := filepath.EvalSymlinks(srcRoot)
	if err != nil {
		return "", err
	}
	// Canonicalise the existing ancestors: a symlinked folder inside
	// raw/sources must not lead elsewhere.
	for probe := dest; ; probe = filepath.Dir(probe) {
		real, err := filepath.EvalSymlinks(probe)
		if err == nil {
			if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
				return "", fmt.Errorf("destination %s resolves outside %s (symlink escape)", root, SourcesDir)
			}
			break
		}
		if probe == srcRoot || probe == filepath.Dir(probe) {
			break
		}
	}
	return dest, nil
}

// addLock creates the lock file exclusively. An existing one is never
// taken over: it may belong to a writer still running.
func addLock(vaultDir string) (func(), error) {
	p := filepath.Join(vaultDir, AddLockFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		holder, _ := os.ReadFile(p)
		return nil, fmt.Errorf("another wiki-add holds the lock %s (%s); if no `steward wiki add` is still running "+
			"(check with `ps -p PID` for the pid above), remove the file and try again",
			p, strings.TrimSpace(string(holder)))
	}
	if err != nil {
		return nil, fmt.Errorf("create lock %s: %w", p, err)
	}
	fmt.Fprintf(f, "pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	f.Close()
	return func() { os.Remove(p) }, nil
}

func loadManifest(p string) (*addManifest, error) {
	m := &addManifest{Version: 1, Origins: map[string]manifestEntry{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON (%v); fix or move it aside — it maps origins to snapshots", p, err)
	}
	if m.Origins == nil {
		m.Origins = map[string]manifestEntry{}
	}
	return m, nil
}

func saveManifest(p string, m *addManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := AtomicWrite(p, append(b, '\n')); err != nil {
		return fmt.Errorf("publish %s: %w", p, err)
	}
	return nil
}

// addFile is one collected input file.
type addFile struct {
	origin  string // absolute
	rel     string // destination path under the root
	context string // the imported folder, for folder imports
}

// collect lists the files of one input without following symlinks.
func collect(in string) ([]addFile, []AddItem, error) {
	abs, err := filepath.Abs(in)
	if err != nil {
		return nil, nil, err
	}
	st, err := os.Lstat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("add %s: %w", in, err)
	}
	var files []addFile
	var skipped []AddItem
	consider := func(full, rel, ctx string, info fs.FileInfo) {
		switch reason := skipReason(info); {
		case reason != "":
			skipped = append(skipped, AddItem{Origin: full, Action: "ignored", Reason: reason})
		default:
			files = append(files, addFile{origin: full, rel: rel, context: ctx})
		}
	}
	if !st.IsDir() {
		consider(abs, filepath.Base(abs), "", st)
		return files, skipped, nil
	}
	base := filepath.Base(abs)
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			skipped = append(skipped, AddItem{Origin: p, Action: "ignored", Reason: err.Error()})
			return nil
		}
		if p == abs {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if strings.HasPrefix(name, ".") || junkDirs[name] {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		consider(p, filepath.Join(base, rel), abs, info)
		return nil
	})
	return files, skipped, err
}

func skipReason(info fs.FileInfo) string {
	name := info.Name()
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return "symlink (never followed)"
	case !info.Mode().IsRegular():
		return "not a regular file"
	case strings.HasPrefix(name, "."):
		return "hidden file"
	case info.Size() > MaxAddBytes:
		return fmt.Sprintf("larger than %d MiB", MaxAddBytes>>20)
	case !addTypes[strings.ToLower(filepath.Ext(name))]:
		return "unsupported type " + filepath.Ext(name)
	}
	return ""
}

// addOne applies the collision table to one file. It returns the old
// destination when a tracked snapshot was relocated.
func addOne(vaultDir, destRoot string, explicitRoot bool, man *addManifest, f addFile) (AddItem, string, error) {
	it := AddItem{Origin: f.origin, Context: f.context}
	data, err := readLimited(f.origin)
	if err != nil {
		it.Action, it.Reason = "ignored", err.Error()
		return it, "", nil
	}
	it.sha = Hash(data)
	rel := func(full string) string {
		r, _ := filepath.Rel(vaultDir, full)
		return filepath.ToSlash(r)
	}
	tracked, isTracked := man.Origins[f.origin]
	dest := filepath.Join(destRoot, f.rel)
	if isTracked && !explicitRoot {
		dest = filepath.Join(vaultDir, filepath.FromSlash(tracked.Dest))
	}
	// Another origin sharing the snapshot keeps it; this one gets its own.
	shared := false
	for o, e := range man.Origins {
		if o != f.origin && e.Dest == rel(dest) {
			shared = true
		}
	}
	cur, err := os.ReadFile(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := createExclusive(dest, data); err != nil {
			return it, "", err
		}
		it.Action = "written"
	case err != nil:
		return it, "", fmt.Errorf("read %s: %w", dest, err)
	case Hash(cur) == it.sha:
		it.Action = "skipped"
		it.Reason = "same content"
	case isTracked && tracked.Dest == rel(dest) && !shared:
		if err := AtomicWrite(dest, data); err != nil {
			return it, "", fmt.Errorf("update %s: %w", dest, err)
		}
		it.Action = "updated"
	default:
		next, err := writeSuffixed(dest, data)
		if err != nil {
			return it, "", err
		}
		dest = next
		it.Action = "renamed"
	}
	it.Dest = rel(dest)
	old := ""
	if isTracked && tracked.Dest != it.Dest && explicitRoot {
		old = tracked.Dest
		if it.Action == "written" {
			it.Action = "relocated"
		}
	}
	man.Origins[f.origin] = manifestEntry{Dest: it.Dest, SHA256: it.sha}
	return it, old, nil
}

func readLimited(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxAddBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxAddBytes {
		return nil, fmt.Errorf("larger than %d MiB", MaxAddBytes>>20)
	}
	return b, nil
}

func createExclusive(dest string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dest)
		return fmt.Errorf("write %s: %w", dest, err)
	}
	return nil
}

// writeSuffixed creates "name (N).ext" for the first free N ≥ 2, retrying
// on a collision with a concurrent creator.
func writeSuffixed(dest string, data []byte) (string, error) {
	ext := path.Ext(dest)
	stem := strings.TrimSuffix(dest, ext)
	for n := 2; n < 10000; n++ {
		p := fmt.Sprintf("%s (%d)%s", stem, n, ext)
		err := createExclusive(p, data)
		if err == nil {
			return p, nil
		}
		if _, statErr := os.Lstat(p); statErr != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for %s", dest)
}
