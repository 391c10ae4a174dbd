package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/conversations"
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

	// No previous selector, and damage repair may not discard (a record
	// of the card): reported, nothing changed.
	vars, cardsDir := repairProject(t)
	rec := filepath.Join(cardsDir, "project.a", "records", "brief", "head.json")
	os.Remove(filepath.Join(filepath.Dir(rec), "head.prev.json"))
	os.WriteFile(rec, []byte("{garbage"), 0o644)
	code, out, errs := runCLI(t, vars, "repair", "--yes", "--discard")
	if code != 1 || !strings.Contains(out, "no restoration cures") || !strings.Contains(out, "not damage in its records") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("unrepairable = %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(rec); string(b) != "{garbage" {
		t.Error("an unrepairable record head was changed")
	}
}

// TestRepairDiscard: a child card whose selection is unusable with no
// previous selector is reported as a discard; --yes alone changes
// nothing; --yes --discard moves the card's six own roots to a fresh
// attic (children stay in place) and publishes a FAILED placeholder
// authored runtime:repair with empty records, under the same parent.
func TestRepairDiscard(t *testing.T) {
	vars, cardsDir := repairProject(t)
	p, err := project.Open(context.Background(), project.Options{Root: vars["SAIVAGE_ROOT"]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cards.Create(context.Background(), cards.CreateInput{Parent: "project.a", Type: "task", Title: "Grandchild", Author: "t",
		Bootstrap: map[string]string{"brief": "g"}}); err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(cardsDir, "project.a", "head.json")
	os.Remove(filepath.Join(cardsDir, "project.a", "head.prev.json")) // no previous selector to restore
	os.WriteFile(head, []byte("{garbage"), 0o644)

	code, out, errs := runCLI(t, vars, "repair")
	if code != 1 || !strings.Contains(out, "discard card project.a (goal under project): move head.json, history, mailbox, records, conversations") ||
		!strings.Contains(out, "--discard") {
		t.Fatalf("report = %d %q %q", code, out, errs)
	}
	code, out, errs = runCLI(t, vars, "repair", "--yes")
	if code != 1 || !strings.Contains(errs, "--discard") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("repair --yes without the loss consent = %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(head); string(b) != "{garbage" {
		t.Fatal("--yes alone changed the damaged card")
	}
	code, out, errs = runCLI(t, vars, "repair", "--yes", "--discard")
	if code != 0 || !strings.Contains(out, "1 card(s) discarded") {
		t.Fatalf("repair --yes --discard = %d %q %q", code, out, errs)
	}
	attics, _ := filepath.Glob(filepath.Join(filepath.Dir(cardsDir), "repair-attic", "*", "cards", "project.a"))
	if len(attics) != 1 {
		t.Fatalf("attic = %v", attics)
	}
	if b, _ := os.ReadFile(filepath.Join(attics[0], "head.json")); string(b) != "{garbage" {
		t.Errorf("the attic's head = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(attics[0], "records", "brief", "head.json")); len(b) == 0 {
		t.Error("the old records did not move to the attic")
	}
	if _, err := os.Stat(filepath.Join(cardsDir, "project.a.a", "head.json")); err != nil {
		t.Errorf("the grandchild's directory moved: %v", err)
	}
	p, err = project.Open(context.Background(), project.Options{Root: vars["SAIVAGE_ROOT"]})
	if err != nil {
		t.Fatalf("after the discard: %v", err)
	}
	c, err := p.Cards.Get(context.Background(), "project.a")
	if err != nil || c.Status != cards.Failed || c.Author != cards.RepairAuthor || c.Version != 1 || c.Type != "goal" || len(c.Children) != 0 {
		t.Fatalf("placeholder = %+v %v", c, err)
	}
	if root, _ := p.Cards.Get(context.Background(), "project"); !slices.Contains(root.Children, "project.a") {
		t.Errorf("the parent no longer lists the placeholder: %v", root.Children)
	}
	if ref, err := p.Cards.RecordRef(context.Background(), "project.a", "brief"); err != nil {
		t.Error(err)
	} else if cur, err := p.Cards.Records().Current(ref); err != nil || cur.Content == "b" {
		t.Errorf("placeholder brief = %+v %v (the old content must not come back)", cur, err)
	}
	if code, out, _ := runCLI(t, vars, "repair"); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Errorf("second repair = %d %q", code, out)
	}
}

// TestRepairTruncatesTheRestoredIndexTornTail: a session index restored
// from its previous selector makes an older segment current again; the
// report names that segment's torn tail before any effect, and --yes
// publishes the index first, then cuts exactly that tail.
func TestRepairTruncatesTheRestoredIndexTornTail(t *testing.T) {
	vars, _ := repairProject(t)
	ctx := context.Background()
	p, err := project.Open(ctx, project.Options{Root: vars["SAIVAGE_ROOT"]})
	if err != nil {
		t.Fatal(err)
	}
	analyst := p.Workflows.Analyst()
	dir := filepath.Join(p.StateDir, "agents", analyst)
	session := conversations.SessionID(analyst, "")
	row := func(id string) conversations.Row {
		return conversations.Row{ID: id, Kind: "user", Content: json.RawMessage(`"hello"`)}
	}
	// Segment 1, then a compaction (segment 2): index.prev.json selects [1].
	if err := p.Sessions.Append(dir, session, []conversations.Row{row("u1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sessions.Compact(dir, session, []conversations.Row{{ID: "s1", Kind: "summary", Content: json.RawMessage(`"earlier"`)}}); err != nil {
		t.Fatal(err)
	}
	seg1 := filepath.Join(dir, "versions", "1.jsonl")
	whole, _ := os.ReadFile(seg1)
	torn := `{"v":2,"rows":[{"id":"u2","ki`
	if err := os.WriteFile(seg1, append(slices.Clone(whole), torn...), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "index.json"), []byte("{garbage"), 0o644)

	code, out, errs := runCLI(t, vars, "repair")
	want := fmt.Sprintf("then truncate the torn tail of .saivage/agents/%s/versions/1.jsonl (%d bytes)", analyst, len(torn))
	if code != 1 || !strings.Contains(out, "restore .saivage/agents/"+analyst+"/index.json") || !strings.Contains(out, want) {
		t.Fatalf("report = %d %q %q, want %q", code, out, errs, want)
	}
	if b, _ := os.ReadFile(seg1); len(b) != len(whole)+len(torn) {
		t.Fatal("the report changed the segment")
	}
	// The tail grew between the inspection and the effect: refused, and
	// the index is not published.
	rep, err := project.InspectRepair(ctx, project.Options{Root: vars["SAIVAGE_ROOT"]})
	if err != nil || len(rep.Candidates) != 1 || rep.Candidates[0].TornTail == nil {
		t.Fatalf("inspection = %+v, %v", rep, err)
	}
	os.WriteFile(seg1, append(slices.Clone(whole), torn+"nd"...), 0o644)
	if err := project.Repair(ctx, project.Options{Root: vars["SAIVAGE_ROOT"]}, rep, false); err == nil || !strings.Contains(err.Error(), "changed since the inspection") {
		t.Fatalf("repair after the tail changed = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "index.json")); string(b) != "{garbage" {
		t.Fatal("a refused repair published the index")
	}
	os.WriteFile(seg1, append(slices.Clone(whole), torn...), 0o644)
	if code, out, errs := runCLI(t, vars, "repair", "--yes"); code != 0 || !strings.Contains(out, "repaired") {
		t.Fatalf("repair --yes = %d %q %q", code, out, errs)
	}
	if b, _ := os.ReadFile(seg1); string(b) != string(whole) {
		t.Errorf("segment 1 after repair has %d bytes, want exactly the %d complete ones", len(b), len(whole))
	}
	idx, err := p.Sessions.ReadIndex(dir, session)
	if err != nil || len(idx.Segments) != 1 {
		t.Errorf("restored index = %+v, %v", idx, err)
	}
	if code, out, _ := runCLI(t, vars, "repair"); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Errorf("second repair = %d %q", code, out)
	}
}
