package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/config"
)

func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultHome(t *testing.T) {
	user := t.TempDir()
	tests := []struct {
		name string
		goos string
		env  map[string]string
		want string
	}{
		{"linux default", "linux", map[string]string{}, filepath.Join(user, ".local", "share", "steward")},
		{"linux XDG", "linux", map[string]string{"XDG_DATA_HOME": filepath.Join(user, "xdg")}, filepath.Join(user, "xdg", "steward")},
		{"linux relative XDG ignored", "linux", map[string]string{"XDG_DATA_HOME": "rel"}, filepath.Join(user, ".local", "share", "steward")},
		{"macOS", "darwin", map[string]string{"XDG_DATA_HOME": "/ignored"}, filepath.Join(user, "Library", "Application Support", "Steward")},
		{"explicit", "linux", map[string]string{"STEWARD_HOME": filepath.Join(user, "mine")}, filepath.Join(user, "mine")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(config.LoadOptions{Getenv: mapEnv(tc.env), GOOS: tc.goos, UserHome: user})
			if err != nil {
				t.Fatal(err)
			}
			if c.Home != tc.want {
				t.Errorf("Home = %s, want %s", c.Home, tc.want)
			}
			info, err := os.Stat(c.Home)
			if err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("home mode = %v, %v; want 0700", info.Mode().Perm(), err)
			}
		})
	}
}

func loadWithFile(t *testing.T, env map[string]string, file string) (*config.Config, error) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, config.EnvFileName), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env["STEWARD_HOME"] = home
	return config.Load(config.LoadOptions{Getenv: mapEnv(env)})
}

func TestEnvFileAndPrecedence(t *testing.T) {
	c, err := loadWithFile(t, map[string]string{"HOST_PORT": "5000"}, `
# comment
HOST_PORT=4999
export GATEWAY_PORT=4100
DEEPSEEK_API_KEY="sk-quoted \"x\""
HOST_TIER='tier-6'   
APPROVAL_TIMEOUT_MS=60000 # one minute
GATEWAY_PROT=1
`)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Port("HOST_PORT", 4317); p != 5000 {
		t.Errorf("HOST_PORT = %d: the environment must win over config.env", p)
	}
	if p := c.Port("GATEWAY_PORT", 4000); p != 4100 {
		t.Errorf("GATEWAY_PORT = %d from config.env", p)
	}
	if v := c.String("DEEPSEEK_API_KEY", ""); v != `sk-quoted "x"` {
		t.Errorf("double-quoted value = %q", v)
	}
	if v := c.String("HOST_TIER", ""); v != "tier-6" {
		t.Errorf("single-quoted value = %q", v)
	}
	if d := c.Millis("APPROVAL_TIMEOUT_MS", 5*time.Minute, time.Second, time.Hour); d != time.Minute {
		t.Errorf("trailing comment: %v", d)
	}
	if err := c.Err(); err != nil {
		t.Errorf("unexpected errors: %v", err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "GATEWAY_PROT") || !strings.Contains(c.Warnings[0], "did you mean GATEWAY_PORT") {
		t.Errorf("warnings = %q, want one naming GATEWAY_PROT with a suggestion", c.Warnings)
	}
}

func TestMalformedEnvFile(t *testing.T) {
	for _, file := range []string{"JUST A LINE\n", "1BAD=x\n", "KEY=\"unterminated\n", "KEY=\"bad \\q escape\"\n"} {
		_, err := loadWithFile(t, map[string]string{}, file)
		if err == nil || !strings.Contains(err.Error(), "config.env:1") {
			t.Errorf("%q: err = %v, want one naming config.env:1", file, err)
		}
	}
	// A secret on a malformed line is not echoed whole.
	_, err := loadWithFile(t, map[string]string{}, "sk-live-0123456789abcdef\n")
	if err == nil || strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("err = %v", err)
	}
}

func TestTypedGettersReportVariable(t *testing.T) {
	c, err := config.Load(config.LoadOptions{Getenv: mapEnv(map[string]string{
		"STEWARD_HOME": t.TempDir(), "A": "12x", "B": "99", "C": "maybe", "D": "ftp://x", "E": "rel/path", "F": "500", "G": "200",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Int("A", 7, 0, 100); v != 7 {
		t.Errorf("bad int fell back to %d", v)
	}
	c.Int("B", 1, 0, 10)
	c.Bool("C", false)
	c.URL("D", "")
	c.Path("E", "")
	if v := c.Clamp("F", 15, 1, 60); v != 60 {
		t.Errorf("Clamp = %d, want 60", v)
	}
	if v := c.Int("G", 1, 0, 1000); v != 200 {
		t.Errorf("Int = %d", v)
	}
	err = c.Err()
	for _, name := range []string{"A=", "B=", "C=", "D=", "E="} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("errors %v do not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "F=") || len(c.Warnings) != 1 {
		t.Errorf("clamped value must warn, not fail: err=%v warnings=%v", err, c.Warnings)
	}
}

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{"DEEPSEEK_API_KEY": true, "STEWARD_AUTH_TOKEN": true, "MY_PASSWORD": true, "HOST_PORT": false} {
		if got := config.IsSecret(name); got != want {
			t.Errorf("IsSecret(%s) = %v", name, got)
		}
	}
}

// The getters run on many goroutines of serve (the scheduler's in-process
// checks, status handlers); none of the errors they record may be lost.
func TestGettersAreSafeForConcurrentUse(t *testing.T) {
	c, err := config.Load(config.LoadOptions{Getenv: mapEnv(map[string]string{"STEWARD_HOME": t.TempDir(), "BAD_NUMBER": "many"})})
	if err != nil {
		t.Fatal(err)
	}
	const workers, calls = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				c.Int("BAD_NUMBER", 1, 0, 10)
				c.Err()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(c.Err().Error(), `BAD_NUMBER="many": not a whole number`); n != workers*calls {
		t.Errorf("%d errors recorded, want %d", n, workers*calls)
	}
}
