package templates

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestRegistryIsExplicit(t *testing.T) {
	var names []string
	for _, tpl := range All() {
		names = append(names, tpl.Name)
	}
	if !slices.Equal(names, []string{"classic", "classic-typed", "paad-typed", "classic-git"}) {
		t.Fatalf("templates = %v", names)
	}
	// Every embedded directory is a registered template's layer, and every
	// file of a template's own directory is in its compiled closure (no
	// orphan prompts ship).
	entries, _ := fs.ReadDir(embedded, ".")
	for _, e := range entries {
		if !slices.ContainsFunc(All(), func(t Template) bool { return t.dir == e.Name() }) {
			t.Errorf("embedded directory %s is not a registered template", e.Name())
		}
	}
}

func TestPromptClosureIsExact(t *testing.T) {
	closures := map[string][]string{}
	for _, tpl := range All() {
		paths, err := tpl.Paths()
		if err != nil {
			t.Fatal(err)
		}
		closures[tpl.Name] = paths
		if paths[len(paths)-1] != ConfigFile {
			t.Errorf("%s: config.yaml is not last", tpl.Name)
		}
		_ = fs.WalkDir(embedded, tpl.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if rel := strings.TrimPrefix(p, tpl.dir+"/"); !slices.Contains(paths, rel) {
				t.Errorf("%s ships %s, which its configuration never reads", tpl.Name, rel)
			}
			return nil
		})
		for _, p := range paths {
			if _, err := tpl.read(p); err != nil {
				t.Errorf("%s: %v", tpl.Name, err)
			}
		}
	}
	// Typed goals plan with typed cards: the classic goal prompt is not in
	// the typed closures, and PAAD swaps both plan prompts.
	if slices.Contains(closures["classic-typed"], "prompts/nodes/goal-plan.md") || !slices.Contains(closures["classic-typed"], "prompts/nodes/typed-goal-plan.md") {
		t.Errorf("classic-typed closure = %v", closures["classic-typed"])
	}
	for _, p := range []string{"prompts/nodes/typed-goal-plan.md", "prompts/nodes/project-plan.md"} {
		if slices.Contains(closures["paad-typed"], p) {
			t.Errorf("paad-typed still reads %s", p)
		}
	}
	// Shared prompts are the same bytes in every template that reads them.
	classic, _ := Lookup("classic")
	for _, name := range []string{"classic-typed", "paad-typed"} {
		tpl, _ := Lookup(name)
		for _, p := range closures[name] {
			if !slices.Contains(closures["classic"], p) || p == ConfigFile {
				continue
			}
			a, _ := classic.read(p)
			b, _ := tpl.read(p)
			if string(a) != string(b) {
				t.Errorf("%s: %s differs from classic", name, p)
			}
		}
	}
}

// TestPAADHasExactlyFiveDifferences: paad-typed is classic-typed with five
// explicit differences and nothing else.
func TestPAADHasExactlyFiveDifferences(t *testing.T) {
	load := func(name string) any {
		tpl, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := tpl.read(ConfigFile)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var diffs []string
	var walk func(p string, a, b any)
	walk = func(p string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			for k := range am {
				walk(path.Join(p, k), am[k], bm[k])
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					diffs = append(diffs, path.Join(p, k))
				}
			}
			return
		}
		if yamlString(t, a) != yamlString(t, b) {
			diffs = append(diffs, p)
		}
	}
	walk("", load("classic-typed"), load("paad-typed"))
	slices.Sort(diffs)
	want := []string{
		"card_types/goal/permitted_child_types",
		"card_types/goal/workflow/nodes/plan/execution/prompt/reference",
		"card_types/project/workflow/nodes/plan/execution/prompt/reference",
		"compaction/snap",
		"oversight/enabled",
	}
	if !slices.Equal(diffs, want) {
		t.Fatalf("differences = %v\nwant %v", diffs, want)
	}
}

func yamlString(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
