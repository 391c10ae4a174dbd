package project_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/project"
	"github.com/agentstack/agentstack/saivage/state"
)

// TestRetainedRootMatchesTheSourcePolicy: a project opened again keeps the
// root it was commissioned with — its private ref and root facts do not move
// even when the delivery branch has moved meanwhile (commissioning never
// replays) — and a configuration whose compiled source policy differs from
// the commissioned one (another policy, Git turned off, Git turned on for a
// project initialised without it) is refused with what to do.
func TestRetainedRootMatchesTheSourcePolicy(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (apt-get install git)")
	}
	ctx := context.Background()
	newRepo := func(t *testing.T) string {
		dir := t.TempDir()
		gitIn(t, dir, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", "initial")
		return dir
	}
	options := func(dir string) project.Options {
		return project.Options{Root: dir, LookupEnv: func(string) (string, bool) { return "", false },
			Publisher: state.New(state.Options{Fatal: func(err error) { t.Fatalf("fatal: %v", err) }})}
	}
	editConfig := func(t *testing.T, dir, old, new string) {
		t.Helper()
		path := filepath.Join(dir, ".saivage", "config.yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("config.yaml has no %q", old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	readConfig := func(t *testing.T, dir string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, ".saivage", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// The plain classic project is initialised without Git.
	plainDir := newRepo(t)
	if _, _, err := project.Init(ctx, project.InitOptions{Options: options(plainDir), Template: "classic"}); err != nil {
		t.Fatal(err)
	}
	plain := readConfig(t, plainDir)
	// copyPrompts gives to the prompt files of from it lacks, so that each
	// project can load the other's configuration.
	copyPrompts := func(t *testing.T, from, to string) {
		t.Helper()
		root := filepath.Join(from, ".saivage", "prompts")
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			dst := filepath.Join(to, ".saivage", "prompts", strings.TrimPrefix(path, root))
			if _, err := os.Stat(dst); err == nil {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	dir := newRepo(t)
	p, _, err := project.Init(ctx, project.InitOptions{Options: options(dir), Template: "classic-git"})
	if err != nil {
		t.Fatal(err)
	}
	commissioned := gitIn(t, dir, "rev-parse", "refs/saivage/cards/project")

	// The delivery branch moves outside Saivage; reopening does not
	// recommission: the ref and the root facts stay where commissioning
	// put them.
	if err := os.WriteFile(filepath.Join(dir, "later.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "later.txt")
	gitIn(t, dir, "commit", "-q", "-m", "later")
	p, err = project.Open(ctx, options(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckSourcePolicy(ctx); err != nil {
		t.Fatalf("the unchanged policy is refused: %v", err)
	}
	root, err := p.Cards.Get(ctx, cards.RootID)
	if err != nil || root.Git == nil || root.Git.Tip != commissioned {
		t.Fatalf("root facts after reopening = %+v, %v (commissioned at %s)", root.Git, err, commissioned)
	}
	if got := gitIn(t, dir, "rev-parse", "refs/saivage/cards/project"); got != commissioned {
		t.Errorf("reopening moved the private ref: %s, commissioned at %s", got, commissioned)
	}

	withGit := readConfig(t, dir)
	copyPrompts(t, plainDir, dir)
	copyPrompts(t, dir, plainDir)
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"another source policy", "excluded_paths: []", `excluded_paths: ["build/"]`, "differs from the one the project was commissioned with"},
		{"git turned off (the classic configuration)", withGit, plain, "commissioned for the native Git workflow (delivery branch main) but git_workflow is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			editConfig(t, dir, tc.old, tc.new)
			t.Cleanup(func() { editConfig(t, dir, tc.new, tc.old) })
			p, err := project.Open(ctx, options(dir))
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckSourcePolicy(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSourcePolicy = %v, want %q", err, tc.want)
			}
			if got := gitIn(t, dir, "rev-parse", "refs/saivage/cards/project"); got != commissioned {
				t.Errorf("a refused policy moved the private ref: %s", got)
			}
		})
	}

	t.Run("git turned on for a project initialised without it", func(t *testing.T) {
		editConfig(t, plainDir, plain, withGit)
		p, err := project.Open(ctx, options(plainDir))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckSourcePolicy(ctx); err == nil || !strings.Contains(err.Error(), "initialized without it") {
			t.Fatalf("CheckSourcePolicy = %v", err)
		}
		if out, _ := exec.Command("git", "-C", plainDir, "for-each-ref", "refs/saivage").Output(); len(out) != 0 {
			t.Errorf("a refused project was commissioned: %s", out)
		}
	})
}
