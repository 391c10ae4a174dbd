package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/tools"
)

func TestReadWriteEdit(t *testing.T) {
	f := newFixture(t, analyst())
	if out := f.ok("write", map[string]any{"path": "src/app/main.go", "content": "package main\n\nfunc main() {}\n"}); !strings.Contains(out, "created src/app/main.go") {
		t.Errorf("write = %q", out)
	}
	out := f.ok("read", map[string]any{"path": "src/app/main.go", "offset": 3, "limit": 1})
	if out != "     3\tfunc main() {}\n" {
		t.Errorf("read window = %q", out)
	}
	f.ok("edit", map[string]any{"path": "src/app/main.go", "old_string": "func main() {}", "new_string": "func main() { println(1) }"})
	if b, _ := os.ReadFile(f.path("src/app/main.go")); !strings.Contains(string(b), "println(1)") {
		t.Errorf("edited = %q", b)
	}
	f.writeFile("dup.txt", "a a a")
	f.fails("edit", map[string]any{"path": "dup.txt", "old_string": "a", "new_string": "b"}, "occurs 3 times")
	f.ok("edit", map[string]any{"path": "dup.txt", "old_string": "a", "new_string": "b", "replace_all": true})
	f.fails("edit", map[string]any{"path": "dup.txt", "old_string": "zzz", "new_string": "b"}, "was not found")
	f.fails("read", map[string]any{"path": "missing.txt"}, "does not exist")
	f.writeFile("bin.dat", "\x00\x01\x02")
	f.fails("read", map[string]any{"path": "bin.dat"}, "looks binary")
	if out := f.ok("read", map[string]any{"path": "src"}); !strings.Contains(out, "app/") {
		t.Errorf("directory listing = %q", out)
	}
	f.fails("read", map[string]any{"path": "x.txt", "bogus": 1}, "invalid arguments")
}

func TestPathAdmission(t *testing.T) {
	f := newFixture(t, analyst())
	outside := t.TempDir()
	// Reads may use absolute paths outside the project; writes may not.
	os.WriteFile(filepath.Join(outside, "note.txt"), []byte("outside\n"), 0o644)
	if out := f.ok("read", map[string]any{"path": filepath.Join(outside, "note.txt")}); !strings.Contains(out, "outside") {
		t.Errorf("external read = %q", out)
	}
	f.fails("write", map[string]any{"path": filepath.Join(outside, "x.txt"), "content": "x"}, "outside the project")
	f.fails("write", map[string]any{"path": "../escape.txt", "content": "x"}, "outside the project")
	// Saivage's state is protected, except .saivage/work.
	f.fails("read", map[string]any{"path": ".saivage/cards/project/head.json"}, "inside .saivage")
	f.fails("read", map[string]any{"path": ".saivage/auth-token"}, "inside .saivage")
	f.fails("write", map[string]any{"path": ".saivage/config.yaml", "content": "x"}, "inside .saivage")
	f.ok("write", map[string]any{"path": ".saivage/work/scratch.txt", "content": "ok"})
	if out := f.ok("read", map[string]any{"path": ".saivage/prompts/agents/planner.md"}); !strings.Contains(out, "Planner") {
		t.Errorf("prompt read = %q", out)
	}
	// A symlink into .saivage does not acquire access.
	if err := os.Symlink(filepath.Join(f.env.Root, ".saivage", "cards"), f.path("alias")); err != nil {
		t.Fatal(err)
	}
	f.fails("read", map[string]any{"path": "alias/project/head.json"}, "inside .saivage")
	f.fails("write", map[string]any{"path": "alias/project/x.json", "content": "x"}, "inside .saivage")
	if err := os.Symlink(filepath.Join(f.env.Root, ".saivage", "work"), f.path("workalias")); err != nil {
		t.Fatal(err)
	}
	f.fails("write", map[string]any{"path": "workalias/x.txt", "content": "x"}, "inside .saivage")
}

func TestRecordPaths(t *testing.T) {
	// A card caller writes only its node's drafts, and only with write.
	f := newFixture(t, tools.Caller{Agent: "planner", Card: "project", Node: "plan", DraftRecords: []string{"plan"}, Tools: []string{"read", "write", "edit"}})
	ref, _ := f.p.Cards.RecordRef(t.Context(), "project", "plan")
	if _, err := f.p.Cards.Records().OpenDraft(ref, "agent:planner"); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("write", map[string]any{"path": "record:plan", "content": "step 1\nstep 2\n"}); !strings.Contains(out, "draft of record:project/plan") {
		t.Errorf("write record = %q", out)
	}
	f.ok("edit", map[string]any{"path": "record:plan", "old_string": "step 2", "new_string": "step two"})
	if out := f.ok("read", map[string]any{"path": "record:plan"}); !strings.Contains(out, "open draft") || !strings.Contains(out, "step two") {
		t.Errorf("read record = %q", out)
	}
	f.fails("write", map[string]any{"path": "record:objective", "content": "x"}, "does not write record")
	f.fails("write", map[string]any{"path": "record:project/nope", "content": "x"}, "declares no record")
	if out := f.ok("read", map[string]any{"path": "record:project/objective@1"}); !strings.Contains(out, "Tools.") || !strings.Contains(out, "immutable version 1") {
		t.Errorf("exact version = %q", out)
	}
	f.fails("write", map[string]any{"path": "record:project/objective@1", "content": "x"}, "immutable")
	f.fails("read", map[string]any{"path": "record:"}, "expected record:NAME")
	f.env.Caller.Tools = []string{"read", "edit"}
	f.fails("edit", map[string]any{"path": "record:plan", "old_string": "step 1", "new_string": "x"}, "needs the write tool")

	// The Analyst accepts directly, only when the runtime admits it.
	g := newFixture(t, analyst())
	g.rt.intervene = errString("the runtime is running")
	g.fails("write", map[string]any{"path": "record:project/plan", "content": "new plan"}, "the runtime is running")
	g.rt.intervene = nil
	if out := g.ok("write", map[string]any{"path": "record:project/plan", "content": "new plan"}); !strings.Contains(out, "version 1") {
		t.Errorf("analyst record write = %q", out)
	}
	g.fails("write", map[string]any{"path": "record:plan", "content": "x"}, "must name the card")
}

type errString string

func (e errString) Error() string { return string(e) }
