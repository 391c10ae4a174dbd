package pathguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture builds a fake home with secrets, a data directory and innocent
// files, plus symlinks that try to escape into the secrets.
func fixture(t *testing.T) (home, data string, g *Guard) {
	t.Helper()
	root := t.TempDir()
	home = filepath.Join(root, "home")
	data = filepath.Join(root, "steward-data")
	mk := func(rel string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		"home/.ssh/id_ed25519", "home/.ssh/config", "home/Documents/report.pdf", "home/Documents/notes.txt",
		"home/.aws/credentials", "home/project/.env", "home/project/main.go", "steward-data/token",
		"home/Library/Keychains/login.keychain-db", "home/.config/google-chrome/Default/Cookies",
		"home/Documents/Sub/ok.md",
	} {
		mk(f)
	}
	links := map[string]string{
		"home/Documents/innocent.txt": "../.ssh/id_ed25519",
		"home/Documents/sshdir":       filepath.Join(home, ".ssh"),
		"home/Documents/datalink":     data,
		"home/Documents/goodlink.txt": "notes.txt",
		"home/Documents/dangling":     "nowhere",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	return home, data, New(Options{Home: home, DataDir: data})
}

func TestCheck(t *testing.T) {
	home, data, g := fixture(t)
	canonHome, err := filepath.EvalSymlinks(home)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		path      string
		blocked   bool   // a *BlockedError
		errSubstr string // any other error
		want      string // canonical result, relative to the canonical home
	}{
		{name: "plain document", path: home + "/Documents/report.pdf", want: "Documents/report.pdf"},
		{name: "nested ok", path: home + "/Documents/Sub/ok.md", want: "Documents/Sub/ok.md"},
		{name: "symlink to ok file", path: home + "/Documents/goodlink.txt", want: "Documents/notes.txt"},
		{name: "dotdot staying inside", path: home + "/Documents/Sub/../notes.txt", want: "Documents/notes.txt"},
		{name: "missing write target", path: home + "/Documents/new.txt", want: "Documents/new.txt"},
		{name: "ssh key", path: home + "/.ssh/id_ed25519", blocked: true},
		{name: "ssh dir", path: home + "/.ssh", blocked: true},
		{name: "ssh case folded", path: home + "/.SSH/config", blocked: true},
		{name: "dotdot into ssh", path: home + "/Documents/../.ssh/config", blocked: true},
		{name: "symlink file into ssh", path: home + "/Documents/innocent.txt", blocked: true},
		{name: "symlink dir into ssh", path: home + "/Documents/sshdir/config", blocked: true},
		{name: "symlink into data dir", path: home + "/Documents/datalink/token", blocked: true},
		{name: "data dir token", path: data + "/token", blocked: true},
		{name: "data dir itself", path: data, blocked: true},
		{name: "env file", path: home + "/project/.env", blocked: true},
		{name: "env variant", path: home + "/project/.env.production", blocked: true},
		{name: "aws credentials", path: home + "/.aws/credentials", blocked: true},
		{name: "keychain", path: home + "/Library/Keychains/login.keychain-db", blocked: true},
		{name: "browser profile", path: home + "/.config/google-chrome/Default/Cookies", blocked: true},
		{name: "pem anywhere", path: home + "/Documents/server.pem", blocked: true},
		{name: "id_rsa anywhere", path: "/mnt/backup/id_rsa", blocked: true},
		{name: "proc environ", path: "/proc/self/environ", blocked: true},
		{name: "shadow", path: "/etc/shadow", blocked: true},
		{name: "relative", path: "Documents/report.pdf", errSubstr: "must be absolute"},
		{name: "empty", path: "", errSubstr: "empty"},
		{name: "nul byte", path: home + "/a\x00b", errSubstr: "NUL"},
		{name: "dangling link", path: home + "/Documents/dangling", errSubstr: "dangling"},
		{name: "missing with dotdot", path: home + "/Documents/nope/../x", errSubstr: "contains"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.Check(tc.path)
			switch {
			case tc.blocked:
				var be *BlockedError
				if !errors.As(err, &be) || !errors.Is(err, ErrBlocked) {
					t.Fatalf("Check(%q) = %q, %v; want a BlockedError", tc.path, got, err)
				}
				if be.Reason == "" || !strings.Contains(err.Error(), "is blocked") {
					t.Fatalf("blocked error lacks a reason: %v", err)
				}
			case tc.errSubstr != "":
				if err == nil || !strings.Contains(err.Error(), tc.errSubstr) || errors.Is(err, ErrBlocked) {
					t.Fatalf("Check(%q) = %q, %v; want error containing %q", tc.path, got, err, tc.errSubstr)
				}
			default:
				if err != nil {
					t.Fatalf("Check(%q): %v", tc.path, err)
				}
				if want := filepath.Join(canonHome, tc.want); got != want {
					t.Fatalf("Check(%q) = %q, want %q", tc.path, got, want)
				}
			}
		})
	}
}

func TestMatchIsLexical(t *testing.T) {
	g := New(Options{})
	if err := g.Match("/home/u/docs/a.txt"); err != nil {
		t.Fatalf("innocent path blocked: %v", err)
	}
	if err := g.Match("/home/u/.gnupg/pubring.kbx"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("gnupg not blocked: %v", err)
	}
	// A non-existent data dir is still anchored lexically.
	g = New(Options{DataDir: "/nonexistent/steward"})
	if err := g.Match("/nonexistent/steward/config.env"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("data dir not blocked: %v", err)
	}
	if err := g.Match("/nonexistent/stewardship/x"); err != nil {
		t.Fatalf("sibling with common prefix blocked: %v", err)
	}
}

func ExampleGuard_Check() {
	g := New(Options{Home: "/home/ann", DataDir: "/home/ann/.local/share/steward"})
	_, err := g.Check("/home/ann/.ssh/id_ed25519")
	fmt.Println(err)
	// Output: access to /home/ann/.ssh/id_ed25519 is blocked: SSH keys and configuration (.ssh)
}
