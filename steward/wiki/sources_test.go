package wiki

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteSourceRewritesInPlaceAndStaysInSources(t *testing.T) {
	vault := t.TempDir()
	rel := "raw/sources/mail/mail-thread-7.md"
	if err := WriteSource(vault, rel, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteSource(vault, rel, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(vault, rel)); got != "two" {
		t.Fatalf("rewritten source holds %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(vault, "raw/sources/mail"))
	if len(entries) != 1 {
		t.Fatalf("rewrite left %d files (temporary files or copies): %v", len(entries), entries)
	}
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(vault, "raw/sources/escape"))
	for _, bad := range []string{"wiki/page.md", "raw/sources/../../x.md", "/etc/passwd", "raw/sources/escape/x.md", "raw/other.md"} {
		if err := WriteSource(vault, bad, []byte("x")); err == nil {
			t.Errorf("WriteSource(%q) was accepted", bad)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("a write escaped through the symlink: %v", entries)
	}
}

func TestCopySourceCollisionRules(t *testing.T) {
	vault, blobs := t.TempDir(), t.TempDir()
	contract := write(t, filepath.Join(blobs, "aa"), "contract v1")
	other := write(t, filepath.Join(blobs, "bb"), "another contract")
	logo := write(t, filepath.Join(blobs, "cc"), "\x89PNG")
	steps := []struct {
		origin, name, want string
	}{
		{contract, "contract.pdf", "written raw/sources/mail/contract.pdf"},
		{contract, "contract.pdf", "skipped raw/sources/mail/contract.pdf"},
		{other, "contract.pdf", "renamed raw/sources/mail/contract (2).pdf"},
		// The same bytes again (a rerun after a crash) find their suffixed copy.
		{other, "contract.pdf", "skipped raw/sources/mail/contract (2).pdf"},
		{logo, "logo.png", "ignored "},
		{contract, ".hidden.pdf", "ignored "},
	}
	for i, s := range steps {
		it, err := CopySource(vault, "mail", s.name, s.origin)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := it.Action + " " + it.Dest; got != s.want {
			t.Fatalf("step %d (%s as %s): %q, want %q", i, filepath.Base(s.origin), s.name, got, s.want)
		}
	}
	if _, err := os.Stat(filepath.Join(vault, "raw/sources/mail/logo.png")); err == nil {
		t.Fatal("an unsupported type was copied")
	}
	if got := read(t, filepath.Join(vault, "raw/sources/mail/contract (2).pdf")); got != "another contract" {
		t.Fatalf("suffixed copy holds %q", got)
	}
	for _, bad := range []string{"../x.pdf", "a/b.pdf", "", ".."} {
		if _, err := CopySource(vault, "mail", bad, contract); err == nil {
			t.Errorf("name %q was accepted", bad)
		}
	}
	if _, err := CopySource(vault, "../../out", "x.pdf", contract); err == nil || !strings.Contains(err.Error(), "raw/sources") {
		t.Errorf("a folder outside raw/sources was accepted: %v", err)
	}
}

func TestRemoveStaleTemps(t *testing.T) {
	vault := t.TempDir()
	dir := filepath.Join(vault, "raw/sources/mail")
	stale := write(t, filepath.Join(dir, ".tmp-mail-thread-1.md-123"), "half")
	note := write(t, filepath.Join(dir, "mail-thread-1.md"), "whole")
	if err := RemoveStaleTemps(vault, "mail"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("the stale temporary file is still there")
	}
	if read(t, note) != "whole" {
		t.Fatal("a published file was touched")
	}
	if err := RemoveStaleTemps(vault, "nothing-here"); err != nil {
		t.Fatalf("a missing folder: %v", err)
	}
}
