package runtime_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/runtime"
)

// operate invokes one of the Analyst's tools as principal.
func (e *env) operate(principal, tool string, args map[string]any) agent.ToolResult {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.rt.Operate(context.Background(), principal, tool, raw)
	if err != nil {
		e.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (e *env) fileIs(rel, want string) {
	e.t.Helper()
	got, err := os.ReadFile(filepath.Join(e.dir, rel))
	switch {
	case want == "" && !os.IsNotExist(err):
		e.t.Errorf("%s exists (%q, %v); it must not", rel, got, err)
	case want != "" && string(got) != want:
		e.t.Errorf("%s = %q (%v), want %q", rel, got, err, want)
	}
}

// The Analyst's source-file admission gate on a real classic-git checkout:
// the internal Analyst and the operator/external surfaces write source only
// while no Run owns the checkout and HEAD is on the delivery branch at
// exactly the root's tip with a clean checkout; a refused call (a whole
// multi-file patch included) writes nothing; .saivage/work stays writable.
func TestGitSourceGateAdmitsAnalystWrites(t *testing.T) {
	e := newGitEnv(t)
	ctx := context.Background()
	refused := func(res agent.ToolResult, why ...string) {
		t.Helper()
		if !res.IsError || !strings.Contains(res.Content, "nothing was written") {
			t.Fatalf("result = %+v, want a source-gate refusal", res)
		}
		for _, w := range why {
			if !strings.Contains(res.Content, w) {
				t.Errorf("refusal %q does not say %q", res.Content, w)
			}
		}
	}
	allowed := func(res agent.ToolResult) {
		t.Helper()
		if res.IsError {
			t.Fatalf("result = %+v, want the write admitted", res)
		}
	}

	// Idle at the exact delivery: admitted, through the external surface.
	allowed(e.operate(runtime.PrincipalExternal, "edit", map[string]any{"path": "README.md", "old_string": "# demo", "new_string": "# demo, edited"}))
	e.fileIs("README.md", "# demo, edited\n")
	// That edit is uncommitted source: the next write is refused, naming it.
	refused(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": "notes.txt", "content": "x\n"}),
		"notes.txt is source", "differs from the delivery branch main", "README.md")
	e.fileIs("notes.txt", "")
	allowed(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": ".saivage/work/scratch.txt", "content": "scratch\n"}))
	e.fileIs(".saivage/work/scratch.txt", "scratch\n")
	git(t, e.dir, "checkout", "-q", "--", "README.md")

	// A Run owns the checkout: the root Planner's first model call streams
	// until hold is closed.
	hold := make(chan struct{})
	first := call("write", map[string]any{"path": "record:plan", "content": "plan"})
	first.Content, first.Hold = "Planning.", hold
	e.script.Add("planner@project", first, emit("blocked", "waiting for the operator", nil))
	if err := e.rt.Run(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitObs("the root Planner's model call", func(o runtime.Observation) bool {
		return o.Kind == runtime.ObsModelCall && o.Session == "agent:planner:project"
	})
	refused(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": "README.md", "content": "overwritten\n"}), "the runtime is running")
	e.fileIs("README.md", "# demo\n")
	// One refused destination refuses the whole patch: the .saivage/work
	// file it would add is not created either.
	patch := "*** Begin Patch\n*** Add File: .saivage/work/patch-note.txt\n+note\n*** Update File: shared.txt\n@@\n-base\n+patched\n*** End Patch\n"
	refused(e.operate(runtime.PrincipalExternal, "apply_patch", map[string]any{"patch": patch}), "shared.txt is source", "the runtime is running")
	e.fileIs("shared.txt", "base\n")
	e.fileIs(".saivage/work/patch-note.txt", "")
	// Non-source destinations alone stay writable during the Run.
	allowed(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": ".saivage/work/during.txt", "content": "ok\n"}))
	// A link under .saivage/work is classified by what it resolves to.
	if err := os.Symlink(filepath.Join(e.dir, "README.md"), filepath.Join(e.dir, ".saivage", "work", "readme-link")); err != nil {
		t.Fatal(err)
	}
	refused(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": ".saivage/work/readme-link", "content": "via link\n"}), "README.md is source")
	e.fileIs("README.md", "# demo\n")
	// The internal Analyst's own write goes through the same gate.
	e.script.Add("analyst", call("write", map[string]any{"path": "README.md", "content": "from the analyst\n"}), text("I could not write it."))
	if _, _, err := e.rt.Analyst().Submit(ctx, "Change the README."); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Analyst().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e.fileIs("README.md", "# demo\n")
	var turnRefused bool
	for _, r := range e.rows("", "analyst") {
		turnRefused = turnRefused || (r.Kind == "tool_result" && r.Name == "write" && strings.Contains(string(r.Content), "nothing was written"))
	}
	if !turnRefused {
		t.Error("the internal Analyst's write was not refused by the gate")
	}

	close(hold)
	e.waitRunEnded()
	// Stopped, but the Run left HEAD detached at the root's source.
	refused(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": "README.md", "content": "after\n"}), "not at the exact delivery", "detached HEAD")
	e.fileIs("README.md", "# demo\n")
	if n := len(e.events("source_write_refused")); n != 6 {
		t.Errorf("source_write_refused events = %d, want 6", n)
	}
	// Back on the delivery branch at the root's tip: admitted again.
	git(t, e.dir, "checkout", "-q", "main")
	allowed(e.operate(runtime.PrincipalOperator, "write", map[string]any{"path": "README.md", "content": "after\n"}))
	e.fileIs("README.md", "after\n")
}
