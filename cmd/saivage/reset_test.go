package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/state"
)

// TestReset: the report comes first and changes nothing; a lock refuses;
// --yes removes exactly cards/agents/logs/work and publishes a fresh
// project while the config, prompts, tokens, other .saivage files and the
// source stay; an interrupted reset is refused by validate and finished by
// a second reset; a config that does not compile refuses before any effect.
func TestReset(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"SAIVAGE_ROOT": dir}
	if code, _, errs := runCLI(t, vars, "init", "--objective", "Old objective"); code != 0 {
		t.Fatal(errs)
	}
	sd := filepath.Join(dir, ".saivage")
	keep := map[string]string{
		filepath.Join(dir, "main.go"):                          "package main\n",
		filepath.Join(sd, "auth-token"):                        "tok\n",
		filepath.Join(sd, "skills", "deploy", "SKILL.md"):      "# Deploy\n",
		filepath.Join(sd, "prompts", "agents", "analyst.md"):   "Custom analyst prompt.\n",
		filepath.Join(sd, "repair-attic", "old", "cards.json"): "{}",
	}
	for p, c := range keep {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(c), 0o600)
	}
	scratch := filepath.Join(sd, "work", "scratch.txt")
	os.WriteFile(scratch, []byte("scratch"), 0o644)

	code, out, _ := runCLI(t, vars, "reset")
	if code != 1 || !strings.Contains(out, "cards/") || !strings.Contains(out, "work/") || !strings.Contains(out, "nothing changed") ||
		!strings.Contains(out, "skills") || !strings.Contains(out, "repair-attic") {
		t.Fatalf("report = %d %q", code, out)
	}
	if _, err := os.Stat(scratch); err != nil {
		t.Fatal("the report removed work")
	}

	lk, err := lock.Acquire(lock.Options{StateDir: sd, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, vars, "reset", "--yes"); code != 1 || !strings.Contains(errs, "reset refused") {
		t.Fatalf("reset under a lock = %d %q", code, errs)
	}
	lk.Release()

	code, out, errs := runCLI(t, vars, "reset", "--yes", "--objective", "New objective")
	if code != 0 || !strings.Contains(out, "fresh project") {
		t.Fatalf("reset = %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(scratch); err == nil {
		t.Error("work survived the reset")
	}
	for p, c := range keep {
		if b, err := os.ReadFile(p); err != nil || string(b) != c {
			t.Errorf("%s = %q %v", p, b, err)
		}
	}
	if code, out, _ := runCLI(t, vars, "record", "show", "project", "objective"); code != 0 || out != "New objective\n" {
		t.Errorf("objective = %d %q", code, out)
	}
	if code, out, _ := runCLI(t, vars, "record", "history", "project", "objective"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("history after reset = %q", out)
	}

	// An interrupted reset (cards removed, the rest not yet) is refused
	// clearly and finished by a second reset.
	os.RemoveAll(filepath.Join(sd, "cards"))
	if code, _, errs := runCLI(t, vars, "validate"); code != 1 || !strings.Contains(errs, "run saivage reset --yes again") {
		t.Fatalf("validate after an interrupted reset = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, vars, "reset", "--yes"); code != 0 {
		t.Fatalf("finishing reset = %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, vars, "tree"); code != 0 || out != "project [project] backlog — Project\n" {
		t.Errorf("tree = %d %q", code, out)
	}

	// A configuration that does not compile refuses before any effect.
	cfg := filepath.Join(sd, "config.yaml")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("bogus_key: 1\n")...), 0o644)
	os.WriteFile(scratch, []byte("scratch"), 0o644)
	if code, _, errs := runCLI(t, vars, "reset", "--yes"); code != 1 || !strings.Contains(errs, "does not compile") {
		t.Fatalf("reset with a broken config = %d %q", code, errs)
	}
	if _, err := os.Stat(scratch); err != nil {
		t.Error("a refused reset removed work")
	}
}
