package tools_test

import (
	"os"
	"strings"
	"testing"
)

func searchFixture(t *testing.T) *fixture {
	f := newFixture(t, analyst())
	for path, content := range map[string]string{
		"main.go":                   "package main // TODO main\n",
		"pkg/util.go":               "package pkg // TODO util\n",
		"pkg/util_test.go":          "package pkg // TODO test\n",
		"node_modules/dep/index.js": "// TODO dependency\n",
		".git/config":               "TODO git\n",
		"build/out.go":              "// TODO build\n",
		"generated/big.go":          "// TODO generated\n",
		"docs/notes.md":             "TODO docs\n",
		"docs/secret.md":            "TODO ignored file\n",
		"bin/tool":                  "TODO\x00binary\n",
		"deep/a/b/c/readme.md":      "todo lower case\n",
		"outside-link-target/x.go":  "// TODO linked\n",
	} {
		f.writeFile(path, content)
	}
	f.writeFile(".saivage-search-ignore", "# generated code\ngenerated/\ndocs/secret.md\n")
	return f
}

func TestGlobSkipsAndIgnores(t *testing.T) {
	f := searchFixture(t)
	out := f.ok("glob", map[string]any{"pattern": "**/*.go"})
	for _, want := range []string{"main.go", "pkg/util.go", "pkg/util_test.go", "outside-link-target/x.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("glob lacks %s:\n%s", want, out)
		}
	}
	for _, skipped := range []string{"build/out.go", "generated/big.go", "node_modules"} {
		if strings.Contains(out, skipped) {
			t.Errorf("glob includes %s:\n%s", skipped, out)
		}
	}
	if out := f.ok("glob", map[string]any{"pattern": "*.md"}); strings.Contains(out, "secret.md") || !strings.Contains(out, "docs/notes.md") {
		t.Errorf("glob *.md = %s", out)
	}
	if out := f.ok("glob", map[string]any{"pattern": "**/*.go", "limit": 2}); !strings.HasPrefix(out, "4 file(s)") || !strings.Contains(out, "continue with offset 2") {
		t.Errorf("window = %s", out)
	}
	// Directory symlinks are not followed.
	if err := os.Symlink(f.path("outside-link-target"), f.path("linkdir")); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("glob", map[string]any{"pattern": "**/x.go"}); strings.Contains(out, "linkdir") {
		t.Errorf("followed a directory symlink: %s", out)
	}
	// A strict ignore file: a malformed pattern names its line.
	f.writeFile(".saivage-search-ignore", "ok/\n[bad\n")
	f.fails("glob", map[string]any{"pattern": "*.go"}, ".saivage-search-ignore line 2")
	// An explicit external root does not load the project's ignore file.
	f.ok("glob", map[string]any{"pattern": "*", "path": t.TempDir()})
}

func TestGrep(t *testing.T) {
	f := searchFixture(t)
	out := f.ok("grep", map[string]any{"pattern": "TODO"})
	for _, want := range []string{"main.go:1:package main // TODO main", "pkg/util.go:1:", "docs/notes.md:1:TODO docs"} {
		if !strings.Contains(out, want) {
			t.Errorf("grep lacks %q:\n%s", want, out)
		}
	}
	for _, skipped := range []string{"dependency", "TODO git", "TODO build", "generated", "ignored file", "binary"} {
		if strings.Contains(out, skipped) {
			t.Errorf("grep includes %q:\n%s", skipped, out)
		}
	}
	if out := f.ok("grep", map[string]any{"pattern": "todo", "ignore_case": true, "include": "*.md"}); !strings.Contains(out, "deep/a/b/c/readme.md:1:todo lower case") || strings.Contains(out, ".go:") {
		t.Errorf("grep include/ignore_case = %s", out)
	}
	if out := f.ok("grep", map[string]any{"pattern": "TODO", "path": "pkg/util.go"}); !strings.HasPrefix(out, "1 matching line") {
		t.Errorf("grep one file = %s", out)
	}
	f.fails("grep", map[string]any{"pattern": "("}, "not a valid regular expression")
	if out := f.ok("grep", map[string]any{"pattern": "TODO", "limit": 1, "offset": 1}); !strings.Contains(out, "showing 2–2") {
		t.Errorf("grep window = %s", out)
	}
}
