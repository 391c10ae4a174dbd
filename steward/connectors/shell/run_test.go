package shell

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/pathguard"
)

func testRunner(t *testing.T, mod func(*Options)) (*Runner, string) {
	t.Helper()
	home := t.TempDir()
	opts := Options{Guard: pathguard.New(pathguard.Options{Home: home, DataDir: filepath.Join(home, "steward")}), Home: home, WriteRoots: []string{home}}
	if mod != nil {
		mod(&opts)
	}
	return NewRunner(opts), home
}

func TestRunPipeline(t *testing.T) {
	r, home := testRunner(t, nil)
	os.WriteFile(filepath.Join(home, "fruit.txt"), []byte("pear\napple\npear\nfig\npear\napple\n"), 0o600)
	ctx := context.Background()
	res, err := r.RunReadOnly(ctx, "cat fruit.txt | sort | uniq -c | sort -rn | head -n 1", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(res.Stdout) != "3 pear" || res.ExitCode != 0 || len(res.Stages) != 5 || res.Directory == "" {
		t.Fatalf("pipeline result %+v", res)
	}
	res, err = r.RunReadOnly(ctx, "grep kiwi fruit.txt", home)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || res.Stdout != "" {
		t.Fatalf("no-match grep: %+v", res)
	}
	res, err = r.RunReadOnly(ctx, "wc -l '"+filepath.Join(home, "fruit.txt")+"'", "/")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(res.Stdout), "6") {
		t.Fatalf("absolute path with quotes: %+v %v", res, err)
	}
	if _, err := r.RunReadOnly(ctx, "ls", "relative/dir"); err == nil {
		t.Fatal("relative working directory accepted")
	}
	if _, err := r.RunReadOnly(ctx, "ls", filepath.Join(home, ".ssh")); !errors.As(err, new(*RefusedError)) {
		t.Fatalf("protected working directory: %v", err)
	}
}

func TestRunBounds(t *testing.T) {
	r, _ := testRunner(t, func(o *Options) { o.MaxOutput = 100 })
	res, err := r.RunReadOnly(context.Background(), "seq 1 10000", "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Stdout) != 100 || !strings.HasPrefix(res.Stdout, "1\n2\n3\n") {
		t.Fatalf("truncation: truncated=%v len=%d", res.Truncated, len(res.Stdout))
	}
	r, _ = testRunner(t, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	start := time.Now()
	res, err = r.RunReadOnly(context.Background(), "seq 1 1000000000000 | tail -n 1", "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("timeout not reported: %+v", res)
	}
	if time.Since(start) > 30*time.Second { // hang guard only
		t.Fatal("timed-out pipeline was not stopped")
	}
}

func TestMemoryLimitApplied(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("address-space limits are set from outside only on Linux")
	}
	cmd := exec.Command("seq", "1", "1000000000000")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	limitMemory(cmd.Process.Pid, 123<<20)
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/limits")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(l, "Max address space") {
			if !strings.Contains(l, strconv.Itoa(123<<20)) {
				t.Fatalf("limit not applied: %s", l)
			}
			return
		}
	}
	t.Fatal("no address-space line")
}

func TestChildEnvironmentHasNoSecrets(t *testing.T) {
	t.Setenv("GATEWAY_API_KEY", "sk-secret")
	r, home := testRunner(t, nil)
	env := strings.Join(r.childEnv(), "\n")
	if strings.Contains(env, "sk-secret") || !strings.Contains(env, "HOME="+home) || !strings.Contains(env, "PATH=/") {
		t.Fatalf("child env: %s", env)
	}
}

func TestRunWrite(t *testing.T) {
	r, home := testRunner(t, nil)
	ctx := context.Background()
	os.WriteFile(filepath.Join(home, "a.txt"), []byte("a"), 0o600)
	proj := filepath.Join(home, "proj")
	os.MkdirAll(proj, 0o755)
	os.WriteFile(filepath.Join(proj, ".env"), []byte("SECRET=1"), 0o600)

	res, err := r.RunWrite(ctx, "mkdir -p out/sub", home)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir: %+v %v", res, err)
	}
	if info, err := os.Stat(filepath.Join(home, "out", "sub")); err != nil || !info.IsDir() {
		t.Fatal("mkdir did not create the directory")
	}
	if res, err := r.RunWrite(ctx, "cp a.txt out/b.txt", home); err != nil || res.ExitCode != 0 {
		t.Fatalf("cp: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "out", "b.txt")); string(b) != "a" {
		t.Fatal("cp did not copy")
	}
	if res, err := r.RunWrite(ctx, "echo hello | tee out/c.txt", home); err != nil || res.Stdout != "hello\n" {
		t.Fatalf("tee: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "out", "c.txt")); string(b) != "hello\n" {
		t.Fatal("tee did not write")
	}
	for _, tc := range []struct{ line, refuse string }{
		{"touch /etc/steward-test", "outside"},
		{"rm -r " + home, "outside"},
		{"rm -rf proj", "contains a protected path"},
		{"mv proj moved", "contains a protected path"},
		{"cp a.txt .ssh/x", "protected location"},
		{"cp a.txt ~/.gnupg/x", "protected location"},
		{"rm proj/.env", "protected location"},
		{"chmod 4755 a.txt", "setuid"},
		{"chmod u+s a.txt", "setuid"},
		{"cat a.txt", "use run_readonly"},
		{"rm a.txt; ls", "with ;"},
		{"rm $(ls)", "command substitution"},
		{"mkdir", "at least one path"},
	} {
		if _, err := r.RunWrite(ctx, tc.line, home); err == nil || !strings.Contains(err.Error(), tc.refuse) {
			t.Errorf("RunWrite(%q) = %v, want refusal containing %q", tc.line, err, tc.refuse)
		}
	}
	if _, err := os.Stat(filepath.Join(proj, ".env")); err != nil {
		t.Fatal("protected file was touched")
	}
	if res, err := r.RunWrite(ctx, "rm out/b.txt", home); err != nil || res.ExitCode != 0 {
		t.Fatalf("rm: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(home, "out", "b.txt")); !os.IsNotExist(err) {
		t.Fatal("rm did not remove")
	}
}
