package gitsource

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestVersionCheck(t *testing.T) {
	tests := []struct {
		out  string
		want bool // accepted
	}{
		{"git version 2.39.5\n", true},
		{"git version 2.38.0", true},
		{"git version 2.37.7", false},
		{"git version 1.9.1", false},
		{"git version 2.45.1.windows.1", true},
		{"git version 3.0.0", true},
	}
	for _, tc := range tests {
		err := checkVersion(tc.out)
		var ve *VersionError
		if tc.want != (err == nil) || (!tc.want && !errors.As(err, &ve)) {
			t.Errorf("%q: err = %v", tc.out, err)
		}
	}
	// A real (old) git binary on PATH is refused at Open with the versions named.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho 'git version 2.20.1'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := newCheckout(t, map[string]string{"a": "a"})
	_, err := Open(context.Background(), Options{Dir: dir, DeliveryBranch: "main", Git: filepath.Join(bin, "git"), Environ: testEnv})
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Have != "2.20.1" || !strings.Contains(err.Error(), MinGitVersion) {
		t.Fatalf("err = %v", err)
	}
}

func TestCommissioning(t *testing.T) {
	ctx := context.Background()
	t.Run("dirty checkout refuses with the paths", func(t *testing.T) {
		dir := newCheckout(t, map[string]string{"a.txt": "a", "b.txt": "b", ".gitignore": "*.log\n"})
		write(t, dir, map[string]string{"a.txt": "changed", "new.txt": "n", "ignored.log": "x", ".saivage/state.json": "{}"})
		r := openRepo(t, dir)
		_, err := r.Qualify(ctx, "root")
		var de *DirtyError
		if !errors.As(err, &de) {
			t.Fatalf("err = %v", err)
		}
		if got := de.Paths(); !slices.Equal(got, []string{"a.txt", "new.txt"}) {
			t.Fatalf("paths %v", got)
		}
		if !strings.Contains(err.Error(), "a.txt, new.txt") {
			t.Fatalf("message %q does not list the paths", err)
		}
		if got := refs(t, dir); !slices.Equal(got, []string{"refs/heads/main"}) {
			t.Fatalf("refs %v", got)
		}
	})
	t.Run("detached or other branch refuses", func(t *testing.T) {
		dir := newCheckout(t, map[string]string{"a.txt": "a"})
		gitT(t, dir, "switch", "-q", "-c", "other")
		r := openRepo(t, dir)
		if _, err := r.Qualify(ctx, "root"); err == nil || !strings.Contains(err.Error(), "not on the delivery branch") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("clean checkout creates only the root ref", func(t *testing.T) {
		dir := newCheckout(t, map[string]string{"a.txt": "a"})
		index0, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
		head0 := gitT(t, dir, "rev-parse", "HEAD")
		r, rt := commission(t, dir, func(o *Options) { o.Namespace = "refs/saivage/project1" })
		if rt.Ref != "refs/saivage/project1/cards/root" || string(rt.Commit) != head0 {
			t.Fatalf("root tuple %+v", rt)
		}
		if got := refs(t, dir); !slices.Equal(got, []string{"refs/heads/main", "refs/saivage/project1/cards/root"}) {
			t.Fatalf("refs %v", got)
		}
		index1, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if !bytes.Equal(index0, index1) || gitT(t, dir, "symbolic-ref", "HEAD") != "refs/heads/main" || porcelain(t, dir) != "" {
			t.Fatal("commissioning changed the checkout")
		}
		// Never replayed: a second qualification finds the ref.
		_, err := r.Qualify(ctx, "root")
		var re *RefExistsError
		if !errors.As(err, &re) || re.Ref != rt.Ref {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("branch moved between qualification and commission", func(t *testing.T) {
		dir := newCheckout(t, map[string]string{"a.txt": "a"})
		r := openRepo(t, dir)
		q, err := r.Qualify(ctx, "root")
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, map[string]string{"a.txt": "b"})
		gitT(t, dir, "commit", "-qam", "moved")
		if _, err := r.Commission(ctx, "root", q); err == nil || !strings.Contains(err.Error(), "moved") {
			t.Fatalf("err = %v", err)
		}
		if got := refs(t, dir); !slices.Equal(got, []string{"refs/heads/main"}) {
			t.Fatalf("refs %v", got)
		}
	})
}

func TestCheckUnsupportedState(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		feature string
	}{
		{"fsmonitor", func(t *testing.T, dir string) { gitT(t, dir, "config", "core.fsmonitor", "true") }, "fsmonitor"},
		{"sparse checkout", func(t *testing.T, dir string) { gitT(t, dir, "config", "core.sparseCheckout", "true") }, "sparse checkout"},
		{"skip-worktree entry", func(t *testing.T, dir string) { gitT(t, dir, "update-index", "--skip-worktree", "a.txt") }, "sparse checkout"},
		{"autocrlf", func(t *testing.T, dir string) { gitT(t, dir, "config", "core.autocrlf", "input") }, "line-ending transform"},
		{"filter attribute", func(t *testing.T, dir string) {
			write(t, dir, map[string]string{".git/info/attributes": "*.txt filter=lfs\n"})
		}, "transform attribute"},
		{"eol attribute", func(t *testing.T, dir string) {
			write(t, dir, map[string]string{".git/info/attributes": "a.txt eol=crlf\n"})
		}, "transform attribute"},
		{"ident attribute", func(t *testing.T, dir string) {
			write(t, dir, map[string]string{".git/info/attributes": "a.txt ident\n"})
		}, "transform attribute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCheckout(t, map[string]string{"a.txt": "a"})
			r := openRepo(t, dir)
			tc.setup(t, dir)
			main, err := r.tuple(context.Background(), "main")
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Check(context.Background(), main)
			var ue *UnsupportedError
			if !errors.As(err, &ue) || ue.Feature != tc.feature {
				t.Fatalf("err = %v, want unsupported %s", err, tc.feature)
			}
		})
	}
}

func TestCheckComparesBytesModesLinksAndIndex(t *testing.T) {
	base := map[string]string{"a.txt": "aaaa", "b.sh": "#!/bin/sh\n", "dir/c.txt": "c", ".gitignore": "*.log\n"}
	tests := []struct {
		name                        string
		mutate                      func(t *testing.T, dir string)
		index, worktree, uncaptured []string
	}{
		{"clean", func(t *testing.T, dir string) {}, nil, nil, nil},
		{"same size, same mtime, other bytes", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a.txt")
			st, _ := os.Stat(p)
			write(t, dir, map[string]string{"a.txt": "bbbb"})
			_ = os.Chtimes(p, st.ModTime(), st.ModTime())
		}, nil, []string{"a.txt"}, nil},
		{"executable bit", func(t *testing.T, dir string) { _ = os.Chmod(filepath.Join(dir, "b.sh"), 0o755) }, nil, []string{"b.sh"}, nil},
		{"symlink target", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, "link"))
			_ = os.Symlink("b.sh", filepath.Join(dir, "link"))
		}, nil, []string{"link"}, nil},
		{"file replaced by symlink to same bytes", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, "a.txt"))
			_ = os.Symlink("aaaa", filepath.Join(dir, "a.txt"))
		}, nil, []string{"a.txt"}, nil},
		{"deleted", func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, "dir/c.txt")) }, nil, []string{"dir/c.txt"}, nil},
		{"untracked, ignored, excluded, generated", func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"new.txt": "n", "x.log": "l", ".saivage/s": "s", "vendor/v": "v"})
			_ = os.MkdirAll(filepath.Join(dir, "emptydir"), 0o755)
		}, nil, nil, []string{"new.txt"}},
		{"index entry rewritten", func(t *testing.T, dir string) {
			gitT(t, dir, "update-index", "--chmod=+x", "a.txt")
		}, []string{"a.txt"}, nil, nil},
		{"index entry added", func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"staged.txt": "s"})
			gitT(t, dir, "add", "staged.txt")
		}, []string{"staged.txt"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCheckout(t, base)
			_ = os.Symlink("a.txt", filepath.Join(dir, "link"))
			gitT(t, dir, "add", "link")
			gitT(t, dir, "commit", "-qm", "link")
			r := openRepo(t, dir, func(o *Options) { o.ExcludedPaths = []string{"vendor"} })
			main, err := r.tuple(context.Background(), "main")
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(t, dir)
			indexBefore, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
			obs, err := r.Check(context.Background(), main)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(obs.IndexMismatch, tc.index) || !slices.Equal(obs.WorktreeMismatch, tc.worktree) || !slices.Equal(obs.Uncaptured, tc.uncaptured) {
				t.Fatalf("observation %+v, want index %v worktree %v uncaptured %v", obs, tc.index, tc.worktree, tc.uncaptured)
			}
			if obs.Clean() != (tc.index == nil && tc.worktree == nil && tc.uncaptured == nil) {
				t.Fatalf("Clean() = %v", obs.Clean())
			}
			indexAfter, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
			if !bytes.Equal(indexBefore, indexAfter) {
				t.Fatal("the check wrote the index")
			}
		})
	}
}

func TestCheckMissingObjectAndDeadline(t *testing.T) {
	dir := newCheckout(t, map[string]string{"a.txt": "a"})
	r := openRepo(t, dir)
	_, err := r.Check(context.Background(), Tuple{Commit: "1111111111111111111111111111111111111111", Tree: "1111111111111111111111111111111111111111"})
	var me *MissingObjectError
	if !errors.As(err, &me) || me.OID != "1111111111111111111111111111111111111111" {
		t.Fatalf("err = %v", err)
	}
	// The deadline is shared by the check's queries: an exhausted one fails
	// the check with a killed command, not a partial observation.
	if d := openRepo(t, dir, func(o *Options) { o.QueryDeadline = 0 }).opts.QueryDeadline; d != QueryDeadline {
		t.Fatalf("default deadline %v", d)
	}
	r2 := openRepo(t, dir)
	r2.opts.QueryDeadline = time.Nanosecond
	main, _ := r.tuple(context.Background(), "main")
	_, err = r2.Check(context.Background(), main)
	var ce *CommandError
	if !errors.As(err, &ce) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestCapture(t *testing.T) {
	base := map[string]string{"keep.txt": "k", "mod.txt": "m", "del.txt": "d", "tool.sh": "#!/bin/sh\n",
		"gen/old.txt": "g", "vendor/lib.txt": "v", "became-dir": "f", ".gitignore": "*.log\ngen/\n"}
	ctx := context.Background()
	dir := newCheckout(t, base)
	gitT(t, dir, "add", "-f", "gen/old.txt")
	gitT(t, dir, "commit", "-qm", "tracked before it was ignored")
	r, root := commission(t, dir, func(o *Options) { o.ExcludedPaths = []string{"vendor"} })
	if _, err := r.Enter(ctx, EnterOptions{Card: "c1", Parent: "root"}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"mod.txt": "m2", "new/deep/file.txt": "n", "x.log": "ignored", "gen/old.txt": "tracked-now-ignored",
		"gen/new.txt": "ignored", "vendor/lib.txt": "excluded edit", "vendor/added.txt": "excluded", ".saivage/state": "s"})
	_ = os.Remove(filepath.Join(dir, "del.txt"))
	_ = os.Chmod(filepath.Join(dir, "tool.sh"), 0o755)
	_ = os.Symlink("keep.txt", filepath.Join(dir, "link"))
	_ = os.MkdirAll(filepath.Join(dir, "empty/dir"), 0o755)
	_ = os.Remove(filepath.Join(dir, "became-dir"))
	write(t, dir, map[string]string{"became-dir/inner.txt": "i"})
	indexBefore, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	c, err := r.Capture(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Base.Commit != root.Commit {
		t.Fatalf("capture started from %s, not the parent's exact tuple %s", c.Base.Commit, root.Commit)
	}
	got := treeFiles(t, dir, string(c.Tree))
	want := map[string]string{"keep.txt": "100644 k", "mod.txt": "100644 m2", "tool.sh": "100755 #!/bin/sh", "gen/old.txt": "100644 tracked-now-ignored",
		"vendor/lib.txt": "100644 v", "became-dir/inner.txt": "100644 i", ".gitignore": "100644 *.log\ngen/", "new/deep/file.txt": "100644 n",
		"link": "120000 keep.txt"}
	if len(got) != len(want) {
		t.Errorf("tree has %d entries, want %d: %v", len(got), len(want), got)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
	wantChanged := []string{"became-dir", "became-dir/inner.txt", "del.txt", "gen/old.txt", "link", "mod.txt", "new/deep/file.txt", "tool.sh"}
	if !slices.Equal(c.Changed, wantChanged) {
		t.Errorf("changed %v, want %v", c.Changed, wantChanged)
	}
	indexAfter, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if !bytes.Equal(indexBefore, indexAfter) {
		t.Fatal("capture wrote the real index")
	}
	if tip, _ := r.Lookup(ctx, "c1"); tip.Commit != root.Commit {
		t.Fatal("capture moved the card ref")
	}
}

// FuzzCheckVersion holds the version gate to its definition for any
// `git version` output: accepted exactly when not older than MinGitVersion,
// and never a panic.
func FuzzCheckVersion(f *testing.F) {
	for _, s := range []string{"git version 2.39.5", "git version 2.38.0", "git version 2.37.99", "git version 2.45.1.windows.1", "", "git version ", "git version 10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		err := checkVersion(out)
		have := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "git version "))
		if (err == nil) == versionLess(have, MinGitVersion) {
			t.Fatalf("%q: err %v", out, err)
		}
	})
}
