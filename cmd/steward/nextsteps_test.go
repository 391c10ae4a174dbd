package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/steward/host"
)

// TestStartupGuidanceGolden pins the wording serve prints once at start-up:
// the no-model block and what to do next, with an unreadable source.
func TestStartupGuidanceGolden(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("macOS discovers Apple Mail, Calendar and Contacts without files")
	}
	env, _, _ := testEnv(t, map[string]string{})
	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	// calendar.yaml that cannot be read (a directory), mail and contacts absent.
	if err := os.Mkdir(filepath.Join(cfg.Home, "calendar.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	sc, err := readServeConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Config: gateway.DefaultConfig(), LookupEnv: cfg.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printNoModel(&out, g.Ready(sc.hostTier), sc, "http://127.0.0.1:4317")
	states := sourceStates(cfg)
	printNextSteps(&out, "http://127.0.0.1:4317", cfg.Home, states)
	got := strings.ReplaceAll(out.String(), cfg.Home, "$STEWARD_HOME")
	golden := filepath.Join("testdata", "startup-guidance.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("start-up guidance changed:\n%s\nwant:\n%s", got, want)
	}

	// The System page says the same: not configured / warning, not ok.
	info := host.SystemInfo{Services: []host.ServiceStatus{{Name: "mcp:mail", State: host.StateOK}, {Name: "mcp:calendar", State: host.StateOK}}}
	applySourceStates(&info, states)
	if s := info.Services[0]; s.State != stateNotConfigured || !strings.Contains(s.Detail, "steward mail backfill") {
		t.Errorf("mail on the System page: %+v", s)
	}
	if s := info.Services[1]; s.State != host.StateWarning || !strings.Contains(s.Detail, "is a directory") {
		t.Errorf("calendar on the System page: %+v", s)
	}
}

func TestNoArgumentsPrintsHelpOnceAndExits2(t *testing.T) {
	env, out, errb := testEnv(t, map[string]string{})
	if code := run(t.Context(), nil, env); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if out.Len() != 0 || strings.Count(errb.String(), "Usage: steward COMMAND") != 1 {
		t.Errorf("stdout %q; stderr:\n%s", out, errb)
	}
}

func TestLogLevelFromConfigEnv(t *testing.T) {
	for _, tc := range []struct {
		level   string
		wantErr bool
		debug   bool
	}{{"debug", false, true}, {"warn", false, false}, {"loud", true, false}} {
		env, _, _ := testEnv(t, map[string]string{})
		home := filepath.Join(t.TempDir(), "h")
		env.loadOpts.Getenv = func(k string) (string, bool) {
			if k == "STEWARD_HOME" {
				return home, true
			}
			return "", false
		}
		os.MkdirAll(home, 0o700)
		os.WriteFile(filepath.Join(home, "config.env"), []byte("STEWARD_LOG_LEVEL="+tc.level+"\n"), 0o600)
		_, err := env.Config()
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err %v", tc.level, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "debug, info, warn or error") {
				t.Errorf("error %q does not list the levels", err)
			}
			continue
		}
		if got := env.Log.Enabled(t.Context(), -4); got != tc.debug {
			t.Errorf("%s: debug enabled = %v", tc.level, got)
		}
	}
}
