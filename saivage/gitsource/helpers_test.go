package gitsource

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testEnv is the environment of every Git the tests run: no global or
// system configuration, a fixed identity.
func testEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com"}
}

// gitT runs git in dir and returns its trimmed stdout.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitRaw(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func gitRaw(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, testEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// write writes files (path → content) under dir.
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newCheckout makes a repository on branch main with files committed.
func newCheckout(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	gitT(t, dir, "init", "-q", "-b", "main")
	write(t, dir, files)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func openRepo(t testing.TB, dir string, mod ...func(*Options)) *Repo {
	t.Helper()
	// The production deadline is QueryDeadline (5 s); the tests give their
	// checks a minute so that a loaded machine does not fail them.
	opts := Options{Dir: dir, DeliveryBranch: "main", Environ: testEnv, Identity: Identity{Name: "Saivage", Email: "saivage@example.com"},
		QueryDeadline: time.Minute}
	for _, m := range mod {
		m(&opts)
	}
	r, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// commission opens dir and commissions card root.
func commission(t testing.TB, dir string, mod ...func(*Options)) (*Repo, Tuple) {
	t.Helper()
	r := openRepo(t, dir, mod...)
	ctx := context.Background()
	q, err := r.Qualify(ctx, "root")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := r.Commission(ctx, "root", q)
	if err != nil {
		t.Fatal(err)
	}
	return r, rt
}

// treeFiles lists rev's tree as "mode path" → blob content.
func treeFiles(t testing.TB, dir, rev string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(gitT(t, dir, "ls-tree", "-r", rev), "\n") {
		if line == "" {
			continue
		}
		meta, p, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		out[p] = f[0] + " " + gitT(t, dir, "cat-file", "-p", f[2])
	}
	return out
}

// subjects lists the first-parent subjects of rev, newest first.
func subjects(t testing.TB, dir, rev string) []string {
	t.Helper()
	return strings.Split(gitT(t, dir, "log", "--first-parent", "--format=%s", rev), "\n")
}

// porcelain is git status as a third-party reader sees the checkout.
func porcelain(t testing.TB, dir string) string {
	t.Helper()
	return gitT(t, dir, "status", "--porcelain=v1", "--untracked-files=all")
}

func refs(t testing.TB, dir string) []string {
	t.Helper()
	l := strings.Split(gitT(t, dir, "for-each-ref", "--format=%(refname)"), "\n")
	slices.Sort(l)
	return l
}
