package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
)

// repairProject is a project whose root has two versions (a child was
// added) and whose objective record has an accepted version.
func repairProject(t *testing.T) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{"SAIVAGE_ROOT": dir}
	p, _, err := project.Init(context.Background(), project.InitOptions{Options: project.Options{Root: dir}, Objective: "Objective v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cards.Create(context.Background(), cards.CreateInput{Parent: "project", Type: "goal", Title: "Child", Author: "t",
		Bootstrap: map[string]string{"brief": "b"}}); err != nil {
		t.Fatal(err)
	}
	return vars, filepath.Join(dir, ".saivage", "cards")
}

// TestRepair: crafted damage — a corrupt card head, a corrupt selected
// card document, a corrupt record head, a missing head with a previous
// selector — is reported first (nothing changes), each restoration is the
// immediate previous selector, applied only with --yes under the lock;
// damage without a previous selector is reported and nothing is changed.
func TestRepair(t *testing.T) {
	tests := []struct {
		name   string
		damage func(cardsDir string)
		// selectors restored, and what the tree looks like afterwards
		want, tree string
	}{
		{"corrupt card head", func(c string) { os.WriteFile(filepath.Join(c, "project", "head.json"), []byte("{garbage"), 0o644) },
			"cards/project/head.json", "project [project] backlog — Project\n"},
		{"corrupt selected card document", func(c string) {
			m, _ := filepath.Glob(filepath.Join(c, "project", "history", "2-*.json"))
			os.WriteFile(m[0], []byte(`{"torn":`), 0o644)
		}, "cards/project/head.json", "project [project] backlog — Project\n"},
		{"missing card head", func(c string) { os.Remove(filepath.Join(c, "project", "head.json")) },
			"cards/project/head.json", "project [project] backlog — Project\n"},
		{"corrupt record head and card head", func(c string) {
			os.WriteFile(filepath.Join(c, "project", "records", "objective", "head.json"), []byte("not json"), 0o644)
			os.WriteFile(filepath.Join(c, "project", "head.json"), []byte("{garbage"), 0o644)
		}, "cards/project/head.json cards/project/records/objective/head.json", "project [project] backlog — Project\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars, cardsDir := repairProject(t)
			tt.damage(cardsDir)
			if code, _, _ := runCLI(t, vars, "validate"); code != 1 {
				t.Fatal("the damage was not refused")
			}
			code, out, errs := runCLI(t, vars, "repair")
			if code != 1 || !strings.Contains(out, "nothing changed") {
				t.Fatalf("report = %d %q %q", code, out, errs)
			}
			if c, _, _ := runCLI(t, vars, "validate"); c != 1 {
				t.Fatal("the report changed the project")
			}
			var got []string
			for _, line := range strings.Split(out, "\n") {
				if sel, ok := strings.CutPrefix(line, "restore .saivage/"); ok {
					got = append(got, strings.TrimSuffix(sel, " from its previous selector"))
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Fatalf("candidates = %v, want %s\n%s", got, tt.want, out)
			}
			code, out, errs = runCLI(t, vars, "repair", "--yes")
			if code != 0 || !strings.Contains(out, "repaired") {
				t.Fatalf("repair --yes = %d %q %q", code, out, errs)
			}
			if code, out, errs := runCLI(t, vars, "tree"); code != 0 || out != tt.tree {
				t.Errorf("tree = %d %q %q", code, out, errs)
			}
			if code, out, _ := runCLI(t, vars, "repair"); code != 0 || !strings.Contains(out, "nothing to repair") {
				t.Errorf("second repair = %d %q", code, out)
			}
		})
	}

	// No previous selector: reported, nothing changed.
	vars, cardsDir := repairProject(t)
	head := filepath.Join(cardsDir, "project.a", "head.json")
	os.WriteFile(head, []byte("{garbage"), 0o644)
	code, out, errs := runCLI(t, vars, "repair", "--yes")
	if code != 1 || !strings.Contains(out, "no restoration cures") || !strings.Contains(out, "project.a") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("unrepairable = %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(head); string(b) != "{garbage" {
		t.Error("an unrepairable head was changed")
	}
}
