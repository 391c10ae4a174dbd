// Package localsourcetest helps tests of connectors that read local stores:
// it finds the shared real-world fixtures and writes source files.
package localsourcetest

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Fixture returns the path of rel under the shared fixtures folder
// (../shared/fixtures beside the project root), skipping the test when the
// fixtures are absent.
func Fixture(t testing.TB, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("project root not found")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "fixtures", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s absent: %v", rel, err)
	}
	return p
}

// WriteFile writes content to path, creating its folders.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// CopyFile copies src into dir and returns the copy's path. Tests read the
// read-only fixtures through copies because SQLite creates -shm/-wal files
// beside a WAL database even for read-only connections.
func CopyFile(t testing.TB, src, dir string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
