package main

import (
	"encoding/json"
	"os"
	"os/exec"
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

// TestResetClassicGit: on a commissioned checkout reset refuses, before
// deleting anything, a dirty checkout (naming the paths) and a private ref
// holding source main does not have (naming the ref, in the report too);
// with --discard-source it removes the private refs, keeps main and
// recommissions the fresh root at main, which validate admits.
func TestResetClassicGit(t *testing.T) {
	dir := t.TempDir()
	gitRepo(t, dir)
	vars := map[string]string{"SAIVAGE_ROOT": dir}
	if code, _, errs := runCLI(t, vars, "init", "--template", "classic-git"); code != 0 {
		t.Fatal(errs)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	main := git("rev-parse", "main")
	// A card's checkpoint that never reached main.
	os.WriteFile(filepath.Join(dir, "work.txt"), []byte("work\n"), 0o644)
	git("add", "work.txt")
	work := git("commit-tree", "-p", main, "-m", "checkpoint", git("write-tree"))
	git("rm", "-q", "--cached", "work.txt") // work.txt stays, untracked: the checkout is dirty
	git("update-ref", "refs/saivage/cards/project.a", work)
	heads := filepath.Join(dir, ".saivage", "cards", "project", "head.json")

	code, _, errs := runCLI(t, vars, "reset", "--yes", "--discard-source")
	if code != 1 || !strings.Contains(errs, "refused before deleting anything") || !strings.Contains(errs, "work.txt") {
		t.Fatalf("reset on a dirty checkout = %d %q", code, errs)
	}
	if _, err := os.Stat(heads); err != nil {
		t.Fatalf("a refused reset deleted the cards: %v", err)
	}
	os.Remove(filepath.Join(dir, "work.txt"))

	code, out, errs := runCLI(t, vars, "reset")
	if code != 1 || !strings.Contains(out, "removes the 2 private refs under refs/saivage; the delivery branch main stays at "+main) ||
		!strings.Contains(out, "refs/saivage/cards/project.a holds source that is not on main") || !strings.Contains(errs, "--discard-source") {
		t.Fatalf("report = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, vars, "reset", "--yes"); code != 1 || !strings.Contains(errs, "refs/saivage/cards/project.a") {
		t.Fatalf("reset with an undelivered ref = %d %q", code, errs)
	}
	if got := git("rev-parse", "refs/saivage/cards/project.a"); got != work {
		t.Fatalf("a refused reset moved the ref: %s", got)
	}

	code, out, errs = runCLI(t, vars, "reset", "--yes", "--discard-source", "--json")
	var res struct {
		Done   bool
		Source struct {
			Commit    string
			Refs      []struct{ Ref string }
			Discarded []string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.Done || res.Source.Commit != main || len(res.Source.Refs) != 2 ||
		len(res.Source.Discarded) != 1 || res.Source.Discarded[0] != "refs/saivage/cards/project.a" {
		t.Fatalf("reset = %d %q %q", code, out, errs)
	}
	if got := git("for-each-ref", "--format=%(refname) %(objectname)", "refs/saivage/"); got != "refs/saivage/cards/project "+main {
		t.Errorf("private refs after the reset = %q", got)
	}
	if got := git("rev-parse", "main"); got != main {
		t.Errorf("main moved to %s", got)
	}
	if code, out, errs := runCLI(t, vars, "validate"); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("validate after the reset = %d %q %q", code, out, errs)
	}
	if code, out, _ := runCLI(t, vars, "card", "show", "project", "--json"); code != 0 || !strings.Contains(out, `"tip": "`+main) {
		t.Errorf("root facts after the reset: %d %q", code, out)
	}
}
