package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
)

func runCLI(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &env{stdout: &out, stderr: &errb, lookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	return code, out.String(), errb.String()
}

func TestInitValidateTreeInEmptyDir(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SAIVAGE_ROOT": dir}
	code, out, errs := runCLI(t, env, "init", "--objective", "Build a todo app")
	if code != 0 || !strings.Contains(out, "initialised project") {
		t.Fatalf("init: %d %q %q", code, out, errs)
	}
	code, out, errs = runCLI(t, env, "validate")
	if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "1 active") {
		t.Fatalf("validate: %d %q %q", code, out, errs)
	}
	code, out, _ = runCLI(t, env, "tree")
	if code != 0 || out != "project [project] backlog — Project\n" {
		t.Fatalf("tree: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "tree", "--json")
	var tree struct{ ID, Type, Status string }
	if code != 0 || json.Unmarshal([]byte(out), &tree) != nil || tree.ID != "project" || tree.Status != "backlog" {
		t.Fatalf("tree --json: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "record", "show", "project", "objective", "--json")
	var rec struct {
		Version int
		Content string
	}
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Version != 1 || rec.Content != "Build a todo app" {
		t.Fatalf("record show: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "record", "diff", "project", "objective")
	if code != 0 || !strings.Contains(out, "+Build a todo app") || !strings.Contains(out, "-# Objective") {
		t.Fatalf("record diff: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "record", "history", "project", "objective")
	if code != 0 || !strings.HasPrefix(out, "v1 ") || !strings.Contains(out, "runtime:bootstrap") {
		t.Fatalf("record history: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "card", "show", "project", "--json")
	if code != 0 || !strings.Contains(out, `"objective"`) {
		t.Fatalf("card show: %d %q", code, out)
	}
	code, out, _ = runCLI(t, env, "status", "--json")
	var st struct {
		Runtime string
		Lock    struct{ Status string }
		Cards   map[string]int
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Lock.Status != "missing" || st.Cards["backlog"] != 1 {
		t.Fatalf("status: %d %q", code, out)
	}
	// A second init keeps the config and only validates.
	code, out, _ = runCLI(t, env, "init")
	if code != 0 || !strings.Contains(out, "kept existing") || !strings.Contains(out, "already initialised") {
		t.Fatalf("second init: %d %q", code, out)
	}
}

func TestValidateReportsKeyPath(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SAIVAGE_ROOT": dir}
	if code, _, errs := runCLI(t, env, "init"); code != 0 {
		t.Fatal(errs)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	broken := strings.Replace(string(b), "    session: card\n    model_route: default\n    prompt: {reference: prompts/agents/executor.md}",
		"    session: card\n    model: gpt-4\n    prompt: {reference: prompts/agents/executor.md}", 1)
	if broken == string(b) {
		t.Fatal("fixture edit failed")
	}
	os.WriteFile(cfgPath, []byte(broken), 0o644)
	code, out, errs := runCLI(t, env, "validate", "--json")
	if code != 1 || !strings.Contains(errs, "agents.executor.model: unknown key (old model shape") || !strings.Contains(out, `"ok": false`) {
		t.Fatalf("validate: %d %q %q", code, out, errs)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Commands:"},
		{[]string{"help"}, 0, "saivage <command>"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"init", "--help"}, 0, "Templates:"},
		{[]string{"card", "list"}, 2, "expected: card show|reopen|cancel ID"},
		{[]string{"version", "--json"}, 0, `"version"`},
	}
	for _, tt := range tests {
		code, out, errs := runCLI(t, map[string]string{"SAIVAGE_ROOT": t.TempDir()}, tt.args...)
		if code != tt.code || !strings.Contains(out+errs, tt.want) {
			t.Errorf("%v: %d %q %q", tt.args, code, out, errs)
		}
	}
	// Uninitialised projects say what to do.
	code, _, errs := runCLI(t, map[string]string{"SAIVAGE_ROOT": t.TempDir()}, "tree")
	if code != 1 || !strings.Contains(errs, "config.yaml") {
		t.Fatalf("tree in empty dir: %d %q", code, errs)
	}
}

// TestInitEachTemplate: init --template NAME writes that template's exact
// closure, and validate compiles it.
func TestInitEachTemplate(t *testing.T) {
	for _, tc := range []struct{ name, prompt string }{
		{"classic", "prompts/nodes/goal-plan.md"},
		{"classic-typed", "prompts/nodes/typed-goal-plan.md"},
		{"paad-typed", "prompts/nodes/paad-project-plan.md"},
		{"classic-git", "prompts/nodes/git-correction.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.name == "classic-git" {
				gitRepo(t, dir)
			}
			env := map[string]string{"SAIVAGE_ROOT": dir}
			code, out, errs := runCLI(t, env, "init", "--template", tc.name, "--objective", "Ship it")
			if code != 0 || !strings.Contains(out, "(template "+tc.name+")") {
				t.Fatalf("init: %d %q %q", code, out, errs)
			}
			if _, err := os.Stat(filepath.Join(dir, ".saivage", filepath.FromSlash(tc.prompt))); err != nil {
				t.Errorf("prompt closure: %v", err)
			}
			cfg, _ := os.ReadFile(filepath.Join(dir, ".saivage", "config.yaml"))
			if !strings.Contains(string(cfg), "(template: "+tc.name+")") {
				t.Errorf("config.yaml is not %s's", tc.name)
			}
			code, out, errs = runCLI(t, env, "validate")
			if code != 0 || !strings.HasPrefix(out, "ok: ") {
				t.Fatalf("validate: %d %q %q", code, out, errs)
			}
		})
	}
	code, _, errs := runCLI(t, map[string]string{"SAIVAGE_ROOT": t.TempDir()}, "init", "--template", "paad")
	if code == 0 || !strings.Contains(errs, "classic-typed") || !strings.Contains(errs, "paad-typed") {
		t.Fatalf("unknown template: %d %q", code, errs)
	}
	var out string
	code, out, errs = runCLI(t, nil, "init", "--help")
	out += errs
	for _, tpl := range []string{"classic ", "classic-typed ", "paad-typed ", "classic-git "} {
		if code != 0 || !strings.Contains(out, "  "+tpl) {
			t.Errorf("init --help does not list %s: %q", tpl, out)
		}
	}
}

// TestInitConfigWorksAgainstStewardsGateway: the config `saivage init`
// writes names models Steward's gateway serves, so validate against a real
// gateway with Steward's built-in configuration has nothing to warn about;
// a model name the gateway does not serve is a warning naming the key, the
// name and what it serves; an unreachable endpoint is a note, not an error.
func TestInitConfigWorksAgainstStewardsGateway(t *testing.T) {
	gw, err := gateway.New(gateway.Options{Config: gateway.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	env := map[string]string{"SAIVAGE_ROOT": dir}
	if code, _, errs := runCLI(t, env, "init"); code != 0 {
		t.Fatal(errs)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	if !strings.Contains(string(b), "baseUrl: http://127.0.0.1:4000/v1") {
		t.Fatalf("the template does not point at Steward's gateway:\n%s", b)
	}
	setConfig := func(from, to string) {
		t.Helper()
		b, _ := os.ReadFile(cfgPath)
		if !strings.Contains(string(b), from) {
			t.Fatalf("config has no %q", from)
		}
		os.WriteFile(cfgPath, []byte(strings.Replace(string(b), from, to, 1)), 0o644)
	}
	setConfig("http://127.0.0.1:4000/v1", srv.URL+"/v1")

	code, out, errs := runCLI(t, env, "validate", "--json")
	var rep struct {
		OK       bool
		Warnings []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK || len(rep.Warnings) != 0 {
		t.Fatalf("validate of the template against Steward's gateway: %d %q %q", code, out, errs)
	}

	setConfig("models: [tier-5, tier-3]", "models: [tier-5, smart]")
	setConfig("[gateway/tier-5, gateway/tier-3]", "[gateway/tier-5, gateway/smart]")
	setConfig("[gateway/tier-3]", "[gateway/smart]")
	code, out, errs = runCLI(t, env, "validate")
	want := `providers.gateway.models: "smart" is not a model of ` + srv.URL + `/v1 (it serves: local-embed, tier-1, tier-2, tier-3, tier-4, tier-5, tier-6)`
	if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(errs, "warning: "+cfgPath+": "+want) || strings.Contains(errs, "tier-5\" is not") {
		t.Fatalf("validate with an unknown model: %d %q %q", code, out, errs)
	}

	srv.Close()
	code, out, errs = runCLI(t, env, "validate")
	if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(errs, "providers.gateway: model names not checked: "+srv.URL+"/v1 is not reachable") {
		t.Fatalf("validate with the gateway down: %d %q %q", code, out, errs)
	}
}

// gitRepo makes dir a Git checkout of main with one commit (Debian's git).
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "initial"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestInitClassicGit: init commissions a clean checkout (the root's private
// ref at main, .saivage/ ignored, validate ok); a dirty checkout is refused
// naming its paths, and a changed source policy fails validate.
func TestInitClassicGit(t *testing.T) {
	dir := t.TempDir()
	gitRepo(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "dirty.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SAIVAGE_ROOT": dir}
	code, _, errs := runCLI(t, env, "init", "--template", "classic-git")
	if code == 0 || !strings.Contains(errs, "dirty.txt") || !strings.Contains(errs, "commissioning refused") {
		t.Fatalf("init on a dirty checkout: %d %q", code, errs)
	}
	if err := os.Remove(filepath.Join(dir, "dirty.txt")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, env, "init", "--json")
	if code != 0 {
		t.Fatalf("init: %d %q %q", code, out, errs)
	}
	main, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
	ref, _ := exec.Command("git", "-C", dir, "rev-parse", "refs/saivage/cards/project").Output()
	if len(main) == 0 || string(main) != string(ref) || !strings.Contains(out, `"tip": "`+strings.TrimSpace(string(main))) || !strings.Contains(out, `"ref": "[private ref]"`) {
		t.Fatalf("commissioning: main %s ref %s out %s", main, ref, out)
	}
	if st, _ := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); len(st) != 0 {
		t.Errorf("checkout not clean after init: %s", st)
	}
	if code, out, errs := runCLI(t, env, "validate"); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("validate: %d %q %q", code, out, errs)
	}
	cfgPath := filepath.Join(dir, ".saivage", "config.yaml")
	cfg, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), "excluded_paths: []", "excluded_paths: [build]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, env, "validate"); code == 0 || !strings.Contains(errs, "source policy") {
		t.Fatalf("validate after a policy change: %d %q", code, errs)
	}
}
