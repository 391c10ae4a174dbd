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
