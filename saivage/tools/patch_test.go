package tools_test

import (
	"os"
	"strings"
	"testing"
)

func TestApplyPatch(t *testing.T) {
	f := newFixture(t, analyst())
	f.writeFile("a.go", "package a\n\nfunc A() int {\n\treturn 1\n}\n")
	f.writeFile("old.txt", "move me\n")
	f.writeFile("gone.txt", "bye\n")
	patch := `*** Begin Patch
*** Add File: b/new.txt
+first
+second
*** Update File: a.go
@@ func A() int {
-	return 1
+	return 2
*** Update File: old.txt
*** Move to: moved/new.txt
@@
-move me
+moved
*** Delete File: gone.txt
*** End Patch`
	out := f.ok("apply_patch", map[string]any{"patch": patch})
	if !strings.Contains(out, "A b/new.txt") || !strings.Contains(out, "M a.go") || !strings.Contains(out, "R old.txt → moved/new.txt") || !strings.Contains(out, "D gone.txt") {
		t.Errorf("summary = %s", out)
	}
	for path, want := range map[string]string{"b/new.txt": "first\nsecond\n", "a.go": "package a\n\nfunc A() int {\n\treturn 2\n}\n", "moved/new.txt": "moved\n"} {
		if b, _ := os.ReadFile(f.path(path)); string(b) != want {
			t.Errorf("%s = %q", path, b)
		}
	}
	for _, p := range []string{"old.txt", "gone.txt"} {
		if _, err := os.Stat(f.path(p)); !os.IsNotExist(err) {
			t.Errorf("%s still exists", p)
		}
	}
}

func TestApplyPatchChecksEverythingFirst(t *testing.T) {
	f := newFixture(t, analyst())
	f.writeFile("a.txt", "one\n")
	tests := []struct{ patch, want string }{
		{"*** Begin Patch\n*** Update File: a.txt\n-one\n+uno\n*** Update File: missing.txt\n-x\n+y\n*** End Patch", "cannot update missing.txt"},
		{"*** Begin Patch\n*** Update File: a.txt\n-one\n+uno\n*** Add File: a.txt\n+x\n*** End Patch", "appears twice"},
		{"*** Begin Patch\n*** Update File: a.txt\n-two\n+dos\n*** End Patch", "lines to replace were not found"},
		{"*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch", "outside the project"},
		{"*** Begin Patch\n*** Add File: .saivage/cards/x\n+x\n*** End Patch", "inside .saivage"},
		{"garbage", "starts with the line"},
		{"*** Begin Patch\n*** Frobnicate: a.txt\n*** End Patch", "expected *** Add File"},
	}
	for _, tt := range tests {
		f.fails("apply_patch", map[string]any{"patch": tt.patch}, tt.want)
		if b, _ := os.ReadFile(f.path("a.txt")); string(b) != "one\n" {
			t.Fatalf("a.txt changed by a refused patch (%s): %q", tt.want, b)
		}
	}
}
