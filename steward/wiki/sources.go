package wiki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Writers that own their sources (automatic mail promotion) publish them
// with WriteSource and CopySource instead of AddSources: they keep their own
// record of what they wrote, so wiki-add's manifest and its lock — which a
// killed writer leaves behind and which then fails closed — are not
// involved. Both need no lock of their own: renames and exclusive creation
// are atomic, and a repeated call finds its own earlier result.

// sourcesPath validates rel as a file under raw/sources/ and returns its
// absolute path: no traversal, no symlinked ancestor leading elsewhere.
func sourcesPath(vaultDir, rel string) (string, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(c, SourcesDir+"/") {
		return "", fmt.Errorf("%s is not under %s/", rel, SourcesDir)
	}
	abs, err := filepath.Abs(vaultDir)
	if err != nil {
		return "", err
	}
	srcRoot := filepath.Join(abs, filepath.FromSlash(SourcesDir))
	if err := os.MkdirAll(srcRoot, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", srcRoot, err)
	}
	full := filepath.Join(abs, filepath.FromSlash(c))
	if _, err := addDestination(abs, srcRoot, filepath.Dir(full)); err != nil {
		return "", err
	}
	return full, nil
}

// WriteSource publishes content as the source file rel (a path under
// raw/sources/) through a temporary file and a rename, so that readers see
// the old or the new file, never a part; writing the same rel again
// replaces it. Sources are immutable for page writers (Vault.WriteFile);
// this is for the pipelines that own their source files.
func WriteSource(vaultDir, rel string, content []byte) error {
	full, err := sourcesPath(vaultDir, rel)
	if err != nil {
		return fmt.Errorf("write source %s: %w", rel, err)
	}
	if st, err := os.Lstat(full); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("write source %s: it exists and is not a regular file", rel)
	}
	if err := AtomicWrite(full, content); err != nil {
		return fmt.Errorf("write source %s: %w", rel, err)
	}
	return nil
}

// CopySource copies the file origin into raw/sources/<dir>/<name> with the
// collision rules of AddSources for an untracked origin: a missing
// destination is created exclusively; one holding the same SHA-256 is
// reused ("skipped"); different bytes go to "name (2).ext", then the next
// free suffix ("renamed") — and a suffixed copy that already holds the same
// bytes is reused, so repeating a copy after a crash never duplicates it.
// wiki-add's type and size rules apply: an unsupported type or an oversized
// file comes back as Action "ignored" with its Reason, and nothing is
// written. name must be a plain file name.
func CopySource(vaultDir, dir, name, origin string) (AddItem, error) {
	it := AddItem{Origin: origin}
	if name == "" || name != path.Base(name) || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return it, fmt.Errorf("copy source: %q is not a plain file name", name)
	}
	st, err := os.Lstat(origin)
	if err != nil {
		return it, fmt.Errorf("copy source %s: %w", origin, err)
	}
	if reason := skipReason(namedInfo{st, name}); reason != "" {
		it.Action, it.Reason = "ignored", reason
		return it, nil
	}
	data, err := readLimited(origin)
	if err != nil {
		return it, fmt.Errorf("copy source %s: %w", origin, err)
	}
	rel := path.Join(SourcesDir, dir, name)
	full, err := sourcesPath(vaultDir, rel)
	if err != nil {
		return it, fmt.Errorf("copy source %s: %w", rel, err)
	}
	it.sha = Hash(data)
	ext := filepath.Ext(full)
	stem := strings.TrimSuffix(full, ext)
	for n := 1; n < 10000; n++ {
		dest := full
		if n > 1 {
			dest = fmt.Sprintf("%s (%d)%s", stem, n, ext)
		}
		cur, err := os.ReadFile(dest)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = publishExclusive(dest, data)
			if err == nil {
				it.Action = "written"
				if n > 1 {
					it.Action = "renamed"
				}
			} else if _, statErr := os.Lstat(dest); statErr == nil {
				n-- // a concurrent writer took the name: look at it again
				continue
			}
		case err == nil && Hash(cur) == it.sha:
			it.Action, it.Reason = "skipped", "same content"
		case err == nil:
			continue
		}
		if err != nil {
			return it, fmt.Errorf("copy source to %s: %w", dest, err)
		}
		it.Dest = path.Join(path.Dir(rel), filepath.Base(dest))
		return it, nil
	}
	return it, fmt.Errorf("copy source: no free name for %s", rel)
}

// namedInfo gives skipReason the destination's name for the type rule.
type namedInfo struct {
	fs.FileInfo
	name string
}

func (n namedInfo) Name() string { return n.name }

// publishExclusive creates dest with data, failing when it exists. The
// bytes go to a temporary file first and are linked into place, so that a
// writer killed midway never leaves a partial file under the final name.
func publishExclusive(dest string, data []byte) error {
	tmp, err := writeTemp(dest, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, dest)
}

// RemoveStaleTemps removes the temporary files a killed writer left in the
// source folder dir (under raw/sources/). Call it only while no writer of
// that folder runs.
func RemoveStaleTemps(vaultDir, dir string) error {
	full, err := sourcesPath(vaultDir, path.Join(SourcesDir, dir, "x"))
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Dir(full))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") && e.Type().IsRegular() {
			os.Remove(filepath.Join(filepath.Dir(full), e.Name()))
		}
	}
	return nil
}
