package tools

import (
	"strings"
	"testing"
)

// FuzzParsePatch: the parser never panics, and an accepted patch's update
// chunks apply to arbitrary content without panicking.
func FuzzParsePatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch", "")
	f.Add("*** Begin Patch\n*** Update File: a\n@@ x\n-x\n+y\n*** End of File\n*** End Patch", "x\ny\n")
	f.Fuzz(func(t *testing.T, patch, content string) {
		fps, err := parsePatch(patch)
		if err != nil {
			return
		}
		for _, fp := range fps {
			if fp.Path == "" {
				t.Fatal("accepted a file section without a path")
			}
			if fp.Op == patchUpdate {
				_, _ = applyChunks(content, fp.Chunks)
			}
		}
	})
}

// FuzzSearchIgnore: the ignore parser never panics and accepted rules are
// usable.
func FuzzSearchIgnore(f *testing.F) {
	f.Add("generated/\n*.min.js\n# c\n")
	f.Fuzz(func(t *testing.T, data string) {
		rules, err := parseSearchIgnore(data)
		if err != nil {
			if !strings.Contains(err.Error(), SearchIgnoreFile) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		_ = rules.ignored("a/b.go", false)
	})
}

func TestApplyChunksFuzzyWhitespace(t *testing.T) {
	out, err := applyChunks("a  \n  b\nc\n", []patchChunk{{Old: []string{"a", "b"}, New: []string{"A", "B"}}})
	if err != nil || out != "A\nB\nc\n" {
		t.Fatalf("= %q, %v", out, err)
	}
}
