package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// PathGuard decides whether a file may be written at path. The host's
// sensitive-path policy implements it; DefaultGuard is the connector's own.
type PathGuard interface {
	CheckWrite(path string) error
}

// ErrSensitivePath reports a destination the guard refuses.
var ErrSensitivePath = errors.New("destination is a protected location")

// DefaultGuard refuses writes into system folders, the user's hidden
// folders (~/.ssh, ~/.gnupg, ~/.config …), ~/Library outside Downloads and
// Desktop-like folders, and Steward's own data directory. Paths are judged
// after resolving symbolic links, so a link cannot smuggle a write past it.
type DefaultGuard struct {
	Home        string // the user's home directory
	StewardHome string
}

var systemDirs = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/proc", "/sys", "/dev", "/var", "/opt", "/root",
	"/System", "/Library", "/Applications", "/private", "/Volumes/Recovery"}

// CheckWrite implements PathGuard.
func (g DefaultGuard) CheckWrite(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: %q is not an absolute path", ErrSensitivePath, path)
	}
	resolved, err := resolveExisting(filepath.Clean(path))
	if err != nil {
		return fmt.Errorf("check destination %s: %w", path, err)
	}
	within := func(dir string) bool {
		if dir == "" {
			return false
		}
		d, err := resolveExisting(filepath.Clean(dir))
		if err != nil {
			d = filepath.Clean(dir)
		}
		return resolved == d || strings.HasPrefix(resolved, d+string(filepath.Separator))
	}
	if within(g.StewardHome) {
		return fmt.Errorf("%w: %s is inside Steward's data directory", ErrSensitivePath, path)
	}
	home := g.Home
	if home != "" && within(home) {
		rel, _ := filepath.Rel(mustResolve(home), resolved)
		first := strings.Split(rel, string(filepath.Separator))[0]
		if strings.HasPrefix(first, ".") {
			return fmt.Errorf("%w: %s is inside a hidden folder of your home", ErrSensitivePath, path)
		}
		if first == "Library" {
			return fmt.Errorf("%w: %s is inside ~/Library", ErrSensitivePath, path)
		}
		return nil // the home directory is not a system folder even when it lives under /var or /root
	}
	for _, d := range systemDirs {
		if within(d) && !isTemp(resolved) {
			return fmt.Errorf("%w: %s is a system folder", ErrSensitivePath, path)
		}
	}
	return nil
}

func isTemp(p string) bool {
	t := mustResolve(os.TempDir())
	if p == t || strings.HasPrefix(p, t+string(filepath.Separator)) {
		return true
	}
	return runtime.GOOS == "darwin" && strings.HasPrefix(p, "/private/var/folders/")
}

func mustResolve(p string) string {
	r, err := resolveExisting(filepath.Clean(p))
	if err != nil {
		return filepath.Clean(p)
	}
	return r
}

// resolveExisting resolves symbolic links in the longest existing prefix of
// p and appends the rest.
func resolveExisting(p string) (string, error) {
	var rest []string
	cur := p
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}
