package tools_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/agentstack/agentstack/saivage/config"
	"github.com/agentstack/agentstack/saivage/tools"
)

// gitOn returns a copy of cfg with the native Git workflow on.
func gitOn(cfg *config.Config) *config.Config {
	c := *cfg
	c.GitWorkflow = &config.GitWorkflow{Enabled: true, FormatVersion: 1, DeliveryBranch: "main"}
	return &c
}

// Under the Git workflow a global caller's file writers are built only
// with the source gate; card callers and OFF projects need none.
func TestSourceGateRequiredOnlyForGlobalWritersUnderGit(t *testing.T) {
	writers := []string{"write", "edit", "apply_patch"}
	for _, tc := range []struct {
		name   string
		on     bool
		caller tools.Caller
		names  []string
		want   error
	}{
		{"on-global-writers", true, analyst(), writers, tools.ErrNoSourceGate},
		{"on-global-one-writer", true, analyst(), []string{"read", "apply_patch"}, tools.ErrNoSourceGate},
		{"on-global-readers", true, analyst(), []string{"read", "grep"}, nil},
		{"on-card-writers", true, tools.Caller{Agent: "executor", Card: "project", Node: "work"}, writers, nil},
		{"off-global-writers", false, analyst(), writers, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.caller)
			if tc.on {
				f.env.Config = gitOn(f.env.Config)
			}
			bound, err := tools.Build(tc.names, f.env)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Build = %v, want %v", err, tc.want)
			}
			if tc.want == nil && len(bound) != len(tc.names) {
				t.Fatalf("bound %d tools, want %d", len(bound), len(tc.names))
			}
		})
	}
}

// The gate sees every destination of a call, resolved through its
// existing ancestor, before any read or write: a refusal leaves every file
// as it was, and a multi-file patch is classified whole.
func TestSourceGateRunsBeforeAnyEffect(t *testing.T) {
	f := newFixture(t, analyst())
	f.env.Config = gitOn(f.env.Config)
	f.writeFile("keep.txt", "keep\n")
	f.writeFile("a.txt", "old\n")
	var seen [][]string
	refuse := ""
	f.env.SourceGate = func(_ context.Context, paths []string) error {
		seen = append(seen, slices.Clone(paths))
		if slices.Contains(paths, f.path(refuse)) {
			return errors.New("refused by the gate: " + refuse)
		}
		return nil
	}
	read := func(rel string) string {
		b, _ := os.ReadFile(f.path(rel))
		return string(b)
	}
	exists := func(rel string) bool {
		_, err := os.Lstat(f.path(rel))
		return err == nil
	}

	refuse = "keep.txt"
	f.fails("write", map[string]any{"path": "keep.txt", "content": "new\n"}, "refused by the gate: keep.txt")
	f.fails("edit", map[string]any{"path": "keep.txt", "old_string": "keep", "new_string": "gone"}, "refused by the gate")
	patch := "*** Begin Patch\n*** Add File: new/dir/b.txt\n+b\n*** Update File: a.txt\n*** Move to: moved.txt\n@@\n-old\n+new\n*** Delete File: keep.txt\n*** End Patch\n"
	f.fails("apply_patch", map[string]any{"patch": patch}, "refused by the gate")
	if got := read("keep.txt"); got != "keep\n" {
		t.Errorf("keep.txt = %q after refusals", got)
	}
	if got := read("a.txt"); got != "old\n" {
		t.Errorf("a.txt = %q after the refused patch", got)
	}
	if exists("new") || exists("moved.txt") {
		t.Error("the refused patch created files or directories")
	}
	want := []string{f.path("new/dir/b.txt"), f.path("a.txt"), f.path("moved.txt"), f.path("keep.txt")}
	if last := seen[len(seen)-1]; !slices.Equal(last, want) {
		t.Errorf("the patch's gate call saw %v, want every destination %v in one call", last, want)
	}

	refuse = "none"
	f.ok("apply_patch", map[string]any{"patch": patch})
	if got := read("moved.txt"); got != "new\n" || exists("keep.txt") || read("new/dir/b.txt") != "b\n" {
		t.Errorf("the admitted patch was not applied: moved.txt=%q", got)
	}
	if n := len(seen); n != 4 {
		t.Errorf("gate calls = %d, want one per tool call (4)", n)
	}
}
