// Package backup writes, verifies and restores backups of STEWARD_HOME.
//
// Every SQLite store is copied through SQLite's online backup API
// (modernc.org/sqlite exposes sqlite3_backup_* on its connections), in one
// step per database: for a WAL database that is one read transaction, a
// consistent snapshot that never blocks the running service's writers, and
// that another process's commit cannot restart half-way (a stepped backup
// starts over whenever another connection writes the source). Other files
// are copied as bytes; symlinks are recreated as symlinks, never followed.
//
// A backup is written into a ".pending-*" directory beside the output and
// renamed to the output only after every file and the manifest are on disk;
// a failure leaves the .pending-* directory (with an INCOMPLETE note when
// the process could still write one) and no output. Directories are 0700,
// files 0600. manifest.json records the kind, where each entry came from,
// its SHA-256, and which known sources were absent.
package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/agentstack/agentstack/sqlitedb"
)

// Kind is what a backup holds.
type Kind string

// The kinds of backup.
const (
	// Operational holds every SQLite store and the settings, sessions and
	// keys: what Steward needs to come back with its chats, watches, audit
	// trail and usage.
	Operational Kind = "operational"
	// Full adds the payloads: the wiki vault, uploads and mail blobs.
	Full Kind = "full"
)

// ManifestName is the manifest's file name inside a backup.
const ManifestName = "manifest.json"

// incompleteName is the note a failed backup leaves in its .pending-* dir.
const incompleteName = "INCOMPLETE"

// Entry types.
const (
	TypeSQLite  = "sqlite"
	TypeFile    = "file"
	TypeSymlink = "symlink"
	TypeDir     = "dir"
)

// Manifest describes one backup.
type Manifest struct {
	Format  int       `json:"format"`
	Kind    Kind      `json:"kind"`
	Created time.Time `json:"created"`
	Version string    `json:"version,omitempty"`
	// Roots maps each top-level folder of the backup to where it came from
	// (home → STEWARD_HOME, wiki → the vault, external/NAME → a store kept
	// outside STEWARD_HOME by a path setting).
	Roots   []Root   `json:"roots"`
	Entries []Entry  `json:"entries"`
	Absent  []Absent `json:"absent,omitempty"`
}

// Root is one source folder or file and where it lives in the backup.
type Root struct {
	Name   string `json:"name"`   // folder in the backup: home, wiki, external/watches.db …
	Source string `json:"source"` // absolute path it was copied from
	// RestoreAs is where restore puts it, relative to the new home.
	RestoreAs string `json:"restoreAs"`
}

// Entry is one file, database, symlink or directory in the backup.
type Entry struct {
	Path   string `json:"path"` // slash-separated, relative to the backup
	Type   string `json:"type"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"` // a symlink's target, as it was
}

// Absent is a known source that did not exist when the backup ran.
type Absent struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Source is a store or folder outside the home walk: a path setting
// (WATCH_DB=…) or the wiki vault.
type Source struct {
	Name string // folder name in the backup, e.g. "wiki" or "external/watches.db"
	Path string // absolute
	// RestoreAs is where restore puts it, relative to the new home.
	RestoreAs string
	// FullOnly sources are payloads copied by full backups only.
	FullOnly bool
}

// Event reports progress.
type Event struct {
	Phase string `json:"phase"` // "copy", "verify", "restore"
	Path  string `json:"path"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
	Bytes int64  `json:"bytes"`
}

// Options configures a backup.
type Options struct {
	Home   string
	Output string // must not exist
	Kind   Kind
	// Sources are kept outside Home (path settings, the wiki vault).
	Sources []Source
	// Payloads are Home-relative folders copied by full backups only (uploads,
	// mail/blobs, a vault inside Home).
	Payloads []string
	// Skip are Home-relative folders never copied (backups, logs).
	Skip []string
	// Known are Home-relative files whose absence the manifest records.
	Known    []string
	Version  string
	Progress func(Event)
	Now      func() time.Time
}

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// skipFile reports files that are never copied: SQLite's side files (the
// backup API already read their content), locks and staging leftovers.
func skipFile(name string) bool {
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return name == ".lock" || strings.HasPrefix(name, ".pending-")
}

// item is one thing to copy.
type item struct {
	src  string // absolute
	rel  string // slash path in the backup
	mode fs.FileMode
}

// Run writes a backup of opts.Home to opts.Output and returns its manifest.
func Run(ctx context.Context, opts Options) (*Manifest, error) {
	if opts.Kind != Operational && opts.Kind != Full {
		return nil, fmt.Errorf("backup kind %q: use operational or full", opts.Kind)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(Event) {}
	}
	out, err := filepath.Abs(opts.Output)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("%s already exists; choose a new directory (a backup never overwrites another)", out)
	}
	home, err := filepath.Abs(opts.Home)
	if err != nil {
		return nil, err
	}
	if within(out, home) && !within(out, filepath.Join(home, "backups")) {
		return nil, fmt.Errorf("the output %s is inside STEWARD_HOME; use STEWARD_HOME/backups/… or a directory outside it", out)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(out), ".pending-"+filepath.Base(out)+"-")
	if err != nil {
		return nil, fmt.Errorf("create the staging directory: %w", err)
	}
	m, err := write(ctx, opts, home, stage)
	if err != nil {
		os.WriteFile(filepath.Join(stage, incompleteName), []byte("This backup did not complete and must not be used:\n"+err.Error()+"\n"), 0o600)
		return nil, fmt.Errorf("%w (the incomplete copy is left in %s)", err, stage)
	}
	if err := os.Rename(stage, out); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", stage, out, err)
	}
	syncDir(filepath.Dir(out))
	return m, nil
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func write(ctx context.Context, opts Options, home, stage string) (*Manifest, error) {
	m := &Manifest{Format: 1, Kind: opts.Kind, Created: opts.Now().UTC(), Version: opts.Version}
	skip := map[string]bool{}
	for _, s := range opts.Skip {
		skip[filepath.Clean(s)] = true
	}
	for _, p := range opts.Payloads {
		if opts.Kind != Full {
			skip[filepath.Clean(p)] = true
		}
	}
	var items []item
	m.Roots = append(m.Roots, Root{Name: "home", Source: home, RestoreAs: "."})
	homeItems, err := collect(home, "home", func(rel string) bool { return skip[rel] })
	if err != nil {
		return nil, err
	}
	items = append(items, homeItems...)
	for _, s := range opts.Sources {
		if s.FullOnly && opts.Kind != Full {
			continue
		}
		src := s.Path
		if within(src, home) {
			continue // already in the home walk
		}
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			m.Absent = append(m.Absent, Absent{Name: s.Name, Source: src})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", src, err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			// An explicitly configured location: back up what it names.
			if src, err = filepath.EvalSymlinks(src); err != nil {
				return nil, fmt.Errorf("resolve %s: %w", s.Path, err)
			}
		}
		m.Roots = append(m.Roots, Root{Name: s.Name, Source: src, RestoreAs: s.RestoreAs})
		more, err := collect(src, s.Name, func(string) bool { return false })
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	for _, k := range opts.Known {
		if _, err := os.Lstat(filepath.Join(home, k)); errors.Is(err, fs.ErrNotExist) {
			m.Absent = append(m.Absent, Absent{Name: k, Source: filepath.Join(home, k)})
		}
	}
	for i, it := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := copyItem(ctx, it, filepath.Join(stage, filepath.FromSlash(it.rel)))
		if err != nil {
			return nil, err
		}
		m.Entries = append(m.Entries, e)
		opts.Progress(Event{Phase: "copy", Path: it.rel, Done: i + 1, Total: len(items), Bytes: e.Size})
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileSync(filepath.Join(stage, ManifestName), data); err != nil {
		return nil, err
	}
	syncDir(stage)
	return m, nil
}

// collect lists root (a folder or one file) under the backup folder name,
// directories first, without following symlinks. skipRel gets
// root-relative OS paths.
func collect(root, name string, skipRel func(string) bool) ([]item, error) {
	var items []item
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (skipRel(rel) || skipFile(d.Name())) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		t := d.Type()
		if !t.IsRegular() && !t.IsDir() && t&fs.ModeSymlink == 0 {
			return nil // sockets, pipes, devices
		}
		r := name
		if rel != "." {
			r = name + "/" + filepath.ToSlash(rel)
		}
		items = append(items, item{src: path, rel: r, mode: t})
		return nil
	})
	return items, err
}

func copyItem(ctx context.Context, it item, dst string) (Entry, error) {
	e := Entry{Path: it.rel}
	switch {
	case it.mode.IsDir():
		e.Type = TypeDir
		return e, os.MkdirAll(dst, 0o700)
	case it.mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(it.src)
		if err != nil {
			return e, fmt.Errorf("read symlink %s: %w", it.src, err)
		}
		e.Type, e.Target = TypeSymlink, target
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return e, err
		}
		return e, os.Symlink(target, dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return e, err
	}
	isDB, err := isSQLite(it.src)
	if err != nil {
		return e, err
	}
	if isDB {
		e.Type = TypeSQLite
		if err := backupDB(ctx, it.src, dst); err != nil {
			return e, err
		}
		e.Size, e.SHA256, err = hashFile(dst)
		return e, err
	}
	e.Type = TypeFile
	e.Size, e.SHA256, err = copyFile(it.src, dst)
	return e, err
}

func isSQLite(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, _ := io.ReadFull(f, head)
	return n == len(head) && bytes.Equal(head, sqliteMagic), nil
}

// backuper is the modernc.org/sqlite connection's online backup API.
type backuper interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// backupDB copies the database at src to dst with sqlite3_backup, in one
// step (see the package comment).
func backupDB(ctx context.Context, src, dst string) error {
	db, err := sqlitedb.Open(ctx, src, sqlitedb.Options{ReadOnly: true, MaxOpenConns: 1})
	if err != nil {
		return fmt.Errorf("open %s for backup: %w", src, err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open %s for backup: %w", src, err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		b, ok := dc.(backuper)
		if !ok {
			return errors.New("the SQLite driver offers no online backup")
		}
		bk, err := b.NewBackup(dst)
		if err != nil {
			return err
		}
		for more := true; more; {
			if more, err = bk.Step(-1); err != nil {
				bk.Finish()
				return err
			}
		}
		return bk.Finish()
	})
	if err != nil {
		return fmt.Errorf("back up %s: %w", src, err)
	}
	// The copy keeps the source's WAL flag; a rollback-journal file stays a
	// single file when someone opens the backup to look inside (stores
	// switch back to WAL when a restored home is served).
	if err := setJournalDelete(ctx, dst); err != nil {
		return fmt.Errorf("finish the copy of %s: %w", src, err)
	}
	if err := os.Chmod(dst, 0o600); err != nil {
		return err
	}
	return syncFile(dst)
}

func setJournalDelete(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=DELETE").Scan(&mode); err != nil {
		return err
	}
	if mode != "delete" {
		return fmt.Errorf("journal mode stayed %s", mode)
	}
	return nil
}

func copyFile(src, dst string) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("create %s: %w", dst, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", fmt.Errorf("copy %s: %w", src, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func writeFileSync(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return syncFile(path)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// ReadManifest loads dir's manifest.
func ReadManifest(dir string) (*Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, incompleteName)); err == nil || strings.HasPrefix(filepath.Base(dir), ".pending-") {
		return nil, fmt.Errorf("%s is an incomplete backup (a failed or interrupted run); it cannot be used", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("read the manifest of %s: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: damaged manifest: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Format != 1 {
		return nil, fmt.Errorf("%s: manifest format %d is not supported by this steward", dir, m.Format)
	}
	return &m, nil
}

// Problem is one verification failure.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Verify re-hashes every entry of the backup in dir against its manifest;
// it also reports files the manifest does not list. A nil error means the
// backup is intact.
func Verify(dir string, progress func(Event)) (*Manifest, []Problem, error) {
	if progress == nil {
		progress = func(Event) {}
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	var problems []Problem
	listed := map[string]bool{ManifestName: true}
	for i, e := range m.Entries {
		listed[e.Path] = true
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if !validRel(e.Path) {
			problems = append(problems, Problem{e.Path, "path escapes the backup"})
			continue
		}
		info, err := os.Lstat(p)
		if err != nil {
			problems = append(problems, Problem{e.Path, "missing"})
			continue
		}
		switch e.Type {
		case TypeDir:
			if !info.IsDir() {
				problems = append(problems, Problem{e.Path, "is not a directory"})
			}
		case TypeSymlink:
			if t, err := os.Readlink(p); err != nil || t != e.Target {
				problems = append(problems, Problem{e.Path, "symlink target differs"})
			}
		default:
			if !info.Mode().IsRegular() {
				problems = append(problems, Problem{e.Path, "is not a regular file"})
				continue
			}
			n, sum, err := hashFile(p)
			switch {
			case err != nil:
				problems = append(problems, Problem{e.Path, err.Error()})
			case n != e.Size:
				problems = append(problems, Problem{e.Path, fmt.Sprintf("size %d, manifest says %d", n, e.Size)})
			case sum != e.SHA256:
				problems = append(problems, Problem{e.Path, "SHA-256 differs from the manifest"})
			}
		}
		progress(Event{Phase: "verify", Path: e.Path, Done: i + 1, Total: len(m.Entries), Bytes: e.Size})
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if !listed[filepath.ToSlash(rel)] {
			problems = append(problems, Problem{filepath.ToSlash(rel), "not in the manifest"})
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	sort.Slice(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
	if len(problems) > 0 {
		var b strings.Builder
		for _, p := range problems {
			fmt.Fprintf(&b, "\n  %s: %s", p.Path, p.Reason)
		}
		return m, problems, fmt.Errorf("backup %s failed verification (%d problems):%s", dir, len(problems), b.String())
	}
	return m, nil, nil
}

func validRel(p string) bool {
	c := filepath.Clean(filepath.FromSlash(p))
	return !filepath.IsAbs(c) && c != ".." && !strings.HasPrefix(c, ".."+string(filepath.Separator))
}

// Restore verifies the backup in dir and copies it into home, which must not
// exist or be empty: restore never writes over a home in use. Each root
// lands at its RestoreAs path inside home. It returns the manifest.
func Restore(ctx context.Context, dir, home string, progress func(Event)) (*Manifest, error) {
	if progress == nil {
		progress = func(Event) {}
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(home); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty; restore only into a new, empty STEWARD_HOME (never over one in use)", home)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", home, err)
	}
	m, _, err := Verify(dir, nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(home), 0o700); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(filepath.Dir(home), ".pending-restore-"+filepath.Base(home)+"-")
	if err != nil {
		return nil, err
	}
	roots := map[string]Root{}
	for _, r := range m.Roots {
		if !validRel(r.RestoreAs) {
			return nil, fmt.Errorf("manifest root %s restores outside the home (%s)", r.Name, r.RestoreAs)
		}
		roots[r.Name] = r
	}
	for i, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dst, err := restorePath(roots, stage, e.Path)
		if err != nil {
			return nil, err
		}
		src := filepath.Join(dir, filepath.FromSlash(e.Path))
		switch e.Type {
		case TypeDir:
			err = os.MkdirAll(dst, 0o700)
		case TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(dst), 0o700); err == nil {
				err = os.Symlink(e.Target, dst)
			}
		default:
			if err = os.MkdirAll(filepath.Dir(dst), 0o700); err == nil {
				_, _, err = copyFile(src, dst)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("restore %s: %w (the partial restore is left in %s)", e.Path, err, stage)
		}
		progress(Event{Phase: "restore", Path: e.Path, Done: i + 1, Total: len(m.Entries), Bytes: e.Size})
	}
	os.Remove(home) // an existing empty directory
	if err := os.Rename(stage, home); err != nil {
		return nil, fmt.Errorf("rename %s to %s: %w", stage, home, err)
	}
	return m, nil
}

func restorePath(roots map[string]Root, stage, p string) (string, error) {
	for name, r := range roots {
		if p == name || strings.HasPrefix(p, name+"/") {
			rest := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
			return filepath.Join(stage, filepath.FromSlash(r.RestoreAs), filepath.FromSlash(rest)), nil
		}
	}
	return "", fmt.Errorf("manifest entry %s belongs to no root", p)
}
