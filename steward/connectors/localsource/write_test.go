package localsource_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/connectors/localsource"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "event.ics")
	if err := localsource.WriteFileAtomic(path, []byte("one"), localsource.WriteOptions{NoClobber: true, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	err := localsource.WriteFileAtomic(path, []byte("two"), localsource.WriteOptions{NoClobber: true})
	if !errors.Is(err, localsource.ErrExists) {
		t.Errorf("no-clobber over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Errorf("a refused write changed the file: %q", b)
	}
	if err := localsource.WriteFileAtomic(path, []byte("three"), localsource.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "three" || st.Mode().Perm() != 0o600 {
		t.Errorf("replace: %q, mode %v", b, st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := localsource.WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil, localsource.WriteOptions{}); err == nil {
		t.Error("a write into a missing folder succeeded")
	}
	if err := localsource.RemoveFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("RemoveFile left the file: %v", err)
	}
}

func TestCollections(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "work"), 0o755)
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	os.MkdirAll(filepath.Join(root, ".hidden"), 0o755)
	os.WriteFile(filepath.Join(root, "work", "displayname"), []byte("Work calendar\n"), 0o644)
	got, err := localsource.Collections(root, ".ics")
	want := []string{filepath.Join(root, "empty"), filepath.Join(root, "work")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Collections = %v, %v; want %v", got, err, want)
	}
	os.WriteFile(filepath.Join(root, "a.ICS"), []byte("x"), 0o644)
	if got, _ := localsource.Collections(root, ".ics"); len(got) != 3 || got[0] != root {
		t.Errorf("a root holding items is a collection too: %v", got)
	}
	if got := localsource.DisplayName(filepath.Join(root, "work")); got != "Work calendar" {
		t.Errorf("DisplayName = %q", got)
	}
	if got := localsource.DisplayName(filepath.Join(root, "empty")); got != "empty" {
		t.Errorf("DisplayName without the file = %q", got)
	}
}

func TestFoldLine(t *testing.T) {
	long := "DESCRIPTION:" + strings.Repeat("è", 80)
	folded := localsource.FoldLine(long)
	for _, l := range strings.Split(folded, "\r\n") {
		if len(l) > 75 {
			t.Errorf("line of %d octets", len(l))
		}
	}
	if strings.ReplaceAll(folded, "\r\n ", "") != long {
		t.Errorf("folding changed the content")
	}
	if localsource.FoldLine("SUMMARY:short") != "SUMMARY:short" {
		t.Error("a short line was folded")
	}
}

func TestNewUUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := localsource.NewUUID(), localsource.NewUUID()
	if !re.MatchString(a) || a == b {
		t.Errorf("NewUUID = %q, %q", a, b)
	}
}
