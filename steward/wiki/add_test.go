package wiki

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, p, body string) string {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func actions(items []AddItem) map[string]string {
	out := map[string]string{}
	for _, it := range items {
		out[filepath.Base(it.Origin)] = it.Action + " " + it.Dest
	}
	return out
}

func manifest(t *testing.T, vault string) map[string]manifestEntry {
	t.Helper()
	var m addManifest
	if err := json.Unmarshal([]byte(read(t, filepath.Join(vault, AddManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	return m.Origins
}

func TestAddCollisionTable(t *testing.T) {
	vault, outside := t.TempDir(), t.TempDir()
	a := write(t, filepath.Join(outside, "one", "notes.md"), "first")
	b := write(t, filepath.Join(outside, "two", "notes.md"), "unrelated")

	// Missing → write.
	items, err := AddSources(vault, AddOptions{Inputs: []string{a}})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(items)["notes.md"]; got != "written raw/sources/notes.md" {
		t.Fatalf("first add: %s", got)
	}
	// Same SHA-256 → skip.
	items, _ = AddSources(vault, AddOptions{Inputs: []string{a}})
	if items[0].Action != "skipped" {
		t.Errorf("re-add of identical bytes: %+v", items[0])
	}
	// Different bytes, unrelated origin → name (2).ext, then (3).
	items, _ = AddSources(vault, AddOptions{Inputs: []string{b}})
	if items[0].Action != "renamed" || items[0].Dest != "raw/sources/notes (2).md" {
		t.Errorf("unrelated same name: %+v", items[0])
	}
	c := write(t, filepath.Join(outside, "three", "notes.md"), "third")
	items, _ = AddSources(vault, AddOptions{Inputs: []string{c}})
	if items[0].Dest != "raw/sources/notes (3).md" {
		t.Errorf("next suffix: %+v", items[0])
	}
	// Different bytes, tracked origin → overwrite its own snapshot, even
	// when it lives at a suffixed name.
	write(t, b, "unrelated, edited")
	items, _ = AddSources(vault, AddOptions{Inputs: []string{b}})
	if items[0].Action != "updated" || items[0].Dest != "raw/sources/notes (2).md" {
		t.Errorf("tracked origin changed: %+v", items[0])
	}
	if read(t, filepath.Join(vault, "raw/sources/notes (2).md")) != "unrelated, edited" || read(t, filepath.Join(vault, "raw/sources/notes.md")) != "first" {
		t.Error("snapshots mixed up")
	}
	m := manifest(t, vault)
	if m[a].Dest != "raw/sources/notes.md" || m[b].Dest != "raw/sources/notes (2).md" || m[b].SHA256 != Hash([]byte("unrelated, edited")) {
		t.Errorf("manifest = %+v", m)
	}
	// Relocation with --root: new copy and manifest first, then the old
	// copy goes.
	items, err = AddSources(vault, AddOptions{Inputs: []string{a}, Root: "raw/sources/archive"})
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Action != "relocated" || items[0].Dest != "raw/sources/archive/notes.md" {
		t.Errorf("relocation: %+v", items[0])
	}
	if _, err := os.Stat(filepath.Join(vault, "raw/sources/notes.md")); !os.IsNotExist(err) {
		t.Error("the relocated snapshot's old copy was kept")
	}
	if manifest(t, vault)[a].Dest != "raw/sources/archive/notes.md" {
		t.Error("manifest not updated by the relocation")
	}
	// A snapshot shared by a deduplicated origin survives relocation of
	// the other, and a changed shared origin gets its own copy.
	d1 := write(t, filepath.Join(outside, "d1", "shared.md"), "same")
	d2 := write(t, filepath.Join(outside, "d2", "shared.md"), "same")
	AddSources(vault, AddOptions{Inputs: []string{d1}})
	items, _ = AddSources(vault, AddOptions{Inputs: []string{d2}})
	if items[0].Action != "skipped" || items[0].Dest != "raw/sources/shared.md" {
		t.Fatalf("dedup: %+v", items[0])
	}
	AddSources(vault, AddOptions{Inputs: []string{d1}, Root: "raw/sources/moved"})
	if read(t, filepath.Join(vault, "raw/sources/shared.md")) != "same" {
		t.Error("a snapshot another origin uses was removed")
	}
	write(t, d2, "d2 changed")
	items, _ = AddSources(vault, AddOptions{Inputs: []string{d2}})
	if items[0].Action != "updated" && items[0].Action != "renamed" {
		t.Errorf("changed shared origin: %+v", items[0])
	}
	if _, err := os.Stat(filepath.Join(vault, AddLockFile)); !os.IsNotExist(err) {
		t.Error("lock left behind")
	}
}

func TestAddFolderSkipsAndEscapes(t *testing.T) {
	vault, outside := t.TempDir(), t.TempDir()
	proj := filepath.Join(outside, "project")
	write(t, filepath.Join(proj, "README.md"), "readme")
	write(t, filepath.Join(proj, "docs", "spec.txt"), "spec")
	write(t, filepath.Join(proj, ".secret.md"), "hidden")
	write(t, filepath.Join(proj, ".git", "config.md"), "git")
	write(t, filepath.Join(proj, "node_modules", "x.md"), "junk")
	write(t, filepath.Join(proj, "image.exe"), "bin")
	secret := write(t, filepath.Join(outside, "elsewhere.md"), "not to be followed")
	os.Symlink(secret, filepath.Join(proj, "link.md"))
	big := filepath.Join(proj, "big.pdf")
	f, _ := os.Create(big)
	f.Truncate(MaxAddBytes + 1)
	f.Close()

	items, err := AddSources(vault, AddOptions{Inputs: []string{proj}})
	if err != nil {
		t.Fatal(err)
	}
	got := actions(items)
	if got["README.md"] != "written raw/sources/project/README.md" || got["spec.txt"] != "written raw/sources/project/docs/spec.txt" {
		t.Errorf("folder import: %v", got)
	}
	for _, name := range []string{"image.exe", "link.md", "big.pdf", ".secret.md"} {
		if !strings.HasPrefix(got[name], "ignored") {
			t.Errorf("%s: %q, want ignored", name, got[name])
		}
	}
	for _, name := range []string{"config.md", "x.md"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s was collected", name)
		}
	}
	for _, it := range items {
		if it.Action == "written" && it.Context != proj {
			t.Errorf("folder context = %q", it.Context)
		}
	}
	// Traversal and symlink escapes of the destination are refused.
	os.Symlink(outside, filepath.Join(vault, "raw", "sources", "escape"))
	for _, root := range []string{"../outside", "raw/sources/../../x", "wiki", filepath.Join(vault, "raw", "sources", "escape", "sub")} {
		if _, err := AddSources(vault, AddOptions{Inputs: []string{secret}, Root: root}); err == nil {
			t.Errorf("--root %s accepted", root)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); !os.IsNotExist(err) {
		t.Error("a file was written through the symlink")
	}
}

func TestAddStaleLockFailsClosed(t *testing.T) {
	vault, outside := t.TempDir(), t.TempDir()
	a := write(t, filepath.Join(outside, "a.md"), "a")
	write(t, filepath.Join(vault, AddLockFile), "pid 999999 since 2026-01-01T00:00:00Z\n")
	_, err := AddSources(vault, AddOptions{Inputs: []string{a}})
	if err == nil || !strings.Contains(err.Error(), "remove the file") || !strings.Contains(err.Error(), "pid 999999") {
		t.Fatalf("stale lock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vault, SourcesDir, "a.md")); !os.IsNotExist(err) {
		t.Error("copied despite the lock")
	}
	if read(t, filepath.Join(vault, AddLockFile)) == "" {
		t.Error("the lock was taken over")
	}
	// A broken manifest also stops the add instead of being overwritten.
	os.Remove(filepath.Join(vault, AddLockFile))
	write(t, filepath.Join(vault, AddManifestFile), "{broken")
	if _, err := AddSources(vault, AddOptions{Inputs: []string{a}}); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("broken manifest: %v", err)
	}
	if read(t, filepath.Join(vault, AddManifestFile)) != "{broken" {
		t.Error("manifest overwritten")
	}
}
