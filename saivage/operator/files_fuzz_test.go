package operator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAdmitPath checks the Files admission on arbitrary input against a
// project with private files and symlinks: an admitted path is clean,
// inside the project after resolution, and private neither by name nor by
// target.
func FuzzAdmitPath(f *testing.F) {
	root := f.TempDir()
	for _, p := range []string{"src/main.go", ".env", ".saivage/auth-token", ".git/config", "keys/id_rsa", "notes/a.md"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte("x"), 0o600)
	}
	os.Symlink(filepath.Join(root, ".saivage"), filepath.Join(root, "state-link"))
	os.Symlink("/etc", filepath.Join(root, "etc-link"))
	os.Symlink(filepath.Join(root, ".env"), filepath.Join(root, "notes/env-link"))
	for _, seed := range []string{"", ".", "src/main.go", ".env", "src/../.env", "state-link/auth-token", "etc-link/passwd",
		"notes/env-link", "/etc/passwd", "notes//a.md", "notes/./a.md", "NOTES/A.MD", ".Env", "a\x00b", "..", "src\\main.go", "record:project"} {
		f.Add(seed)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		abs, rel, err := admitPath(root, raw)
		if err != nil {
			return
		}
		if rel != "." && (strings.HasPrefix(rel, "/") || strings.Contains(rel, "..") || privacy(rel) != "") {
			t.Fatalf("admitted %q as %q", raw, rel)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			t.Fatalf("admitted %q but it does not resolve: %v", raw, err)
		}
		r, err := filepath.Rel(realRoot, real)
		if err != nil || strings.HasPrefix(r, "..") || privacy(filepath.ToSlash(r)) != "" {
			t.Fatalf("admitted %q resolving to %s", raw, real)
		}
	})
}

// FuzzNotText checks that whatever the text check accepts is valid UTF-8
// without NUL bytes.
func FuzzNotText(f *testing.F) {
	for _, seed := range []string{"", "hello\r\n", "\uFEFFbom", "a\x00b", "\xff\xfe", strings.Repeat("\x01", 20) + "abc"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if notText(b) == "" && (!utf8.Valid(b) || strings.ContainsRune(string(b), 0)) {
			t.Fatalf("accepted %q as text", b)
		}
	})
}
