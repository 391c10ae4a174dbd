package tools

import (
	"strings"
	"testing"
)

// FuzzParsePatch: the parser never panics, and an accepted patch's update
// chunks apply to arbitrary content without panicking; when they apply, the
// result has the lines the chunks say (each replacement's new lines, in a
// result whose line count changed by what the chunks add and remove).
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
			if fp.Op != patchUpdate {
				continue
			}
			out, err := applyChunks(content, fp.Chunks)
			if err != nil {
				continue
			}
			// Like applyChunks, a file without a final newline keeps none, so
			// a trailing "\n" in its result is an added empty last line.
			trailingNL := content == "" || strings.HasSuffix(content, "\n")
			want := countLines(content, true)
			for _, ch := range fp.Chunks {
				want += len(ch.New) - len(ch.Old)
				if block := strings.Join(ch.New, "\n"); len(ch.New) > 0 && !strings.Contains("\n"+out+"\n", "\n"+block+"\n") {
					t.Fatalf("applied %+v to %q: %q lacks the new lines %q", fp.Chunks, content, out, block)
				}
			}
			if got := countLines(out, trailingNL); got != want && !(out == "" && want == 1) { // one empty line joins to ""
				t.Fatalf("applied %+v to %q: %d lines, want %d: %q", fp.Chunks, content, got, want, out)
			}
		}
	})
}

// countLines is the number of lines in content, whose final "\n" ends the
// last line when trailingNL and starts an empty one otherwise.
func countLines(content string, trailingNL bool) int {
	if content == "" {
		return 0
	}
	if trailingNL {
		content = strings.TrimSuffix(content, "\n")
	}
	return strings.Count(content, "\n") + 1
}

// FuzzSearchIgnore: the ignore parser never panics; an accepted file keeps
// one rule per pattern line, each literal pattern prunes the path it names,
// and directory-only rules never prune a file.
func FuzzSearchIgnore(f *testing.F) {
	f.Add("generated/\n*.min.js\n# c\n")
	f.Add("/build/\ndocs/api\nvendor\n")
	f.Add("b.go/\n") // a directory named like the file checked below
	f.Fuzz(func(t *testing.T, data string) {
		rules, err := parseSearchIgnore(data)
		if err != nil {
			if !strings.Contains(err.Error(), SearchIgnoreFile) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		patterns := 0
		for _, line := range strings.Split(data, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				patterns++
			}
		}
		if len(rules) != patterns {
			t.Fatalf("%d rules from %d pattern lines in %q", len(rules), patterns, data)
		}
		allDirOnly := true
		for _, r := range rules {
			allDirOnly = allDirOnly && r.dirOnly
			if strings.ContainsAny(r.pattern, "*?[\\") {
				continue
			}
			rel := r.pattern
			if !strings.Contains(rel, "/") {
				rel = "some/dir/" + rel
			}
			if !rules.ignored(rel, true) {
				t.Fatalf("rule %+v does not prune %q", r, rel)
			}
		}
		if allDirOnly && rules.ignored("a/b.go", false) {
			t.Fatalf("directory-only rules %+v pruned a file", rules)
		}
	})
}

func TestApplyChunksFuzzyWhitespace(t *testing.T) {
	out, err := applyChunks("a  \n  b\nc\n", []patchChunk{{Old: []string{"a", "b"}, New: []string{"A", "B"}}})
	if err != nil || out != "A\nB\nc\n" {
		t.Fatalf("= %q, %v", out, err)
	}
}
