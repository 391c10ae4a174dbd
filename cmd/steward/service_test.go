package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"howett.net/plist"
)

// TestServiceUnits installs, checks and removes the systemd unit and the
// LaunchAgent with the real binary; systemd's own verifier reads the unit
// when it is installed.
func TestServiceUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildSteward(t)
	home := filepath.Join(t.TempDir(), "home")
	vault := filepath.Join(t.TempDir(), "My Vault")
	unitDir, agentDir := t.TempDir(), t.TempDir()
	steward := func(home string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "STEWARD_HOME="+home, "STEWARD_WIKI_DIR="+vault)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := steward(home, "install-systemd", "--user", "--dir", unitDir)
	if err != nil || !strings.Contains(out, "systemctl --user enable --now steward.service") {
		t.Fatalf("install-systemd: %v\n%s", err, out)
	}
	path := filepath.Join(unitDir, "steward.service")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ExecStart=" + bin + " serve\n", "Environment=STEWARD_HOME=" + home + "\n",
		"Restart=on-failure\n", "NoNewPrivileges=yes\n", "ProtectSystem=strict\n", "PrivateTmp=yes\n",
		"ReadWritePaths=" + home + "\n", `ReadWritePaths="` + vault + `"` + "\n",
		"ExecReload=/bin/kill -HUP $MAINPID\n", "WantedBy=default.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(unit, "User=") {
		t.Error("a user unit names a User=")
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o644 {
		t.Errorf("unit mode %v", info.Mode().Perm())
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(sa, "verify", path).CombinedOutput()
		if err != nil || strings.Contains(string(out), "steward.service") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed; the unit was checked as text only")
	}
	// The same unit again is fine; a different one needs --force.
	if out, err := steward(home, "install-systemd", "--user", "--dir", unitDir); err != nil {
		t.Errorf("reinstall: %v\n%s", err, out)
	}
	if out, err := steward(home+"-other", "install-systemd", "--user", "--dir", unitDir); err == nil || !strings.Contains(out, "--force") {
		t.Errorf("replacing a different unit without --force: %v\n%s", err, out)
	}
	// A system unit runs as the installing user.
	if out, err := steward(home, "install-systemd", "--print"); err != nil || !strings.Contains(out, "\nUser=") || !strings.Contains(out, "WantedBy=multi-user.target") {
		t.Errorf("system unit: %v\n%s", err, out)
	}
	if out, err := steward(home, "uninstall-systemd", "--user", "--dir", unitDir); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the unit is still there")
	}
	if out, err := steward(home, "uninstall-systemd", "--user", "--dir", unitDir); err == nil || !strings.Contains(out, "no unit") {
		t.Errorf("uninstall twice: %v\n%s", err, out)
	}

	if out, err := steward(home, "install-launchd", "--dir", agentDir); err != nil || !strings.Contains(out, "launchctl bootstrap") {
		t.Fatalf("install-launchd: %v\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(agentDir, "org.agentstack.steward.plist"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var agent struct {
		Label                string
		ProgramArguments     []string
		EnvironmentVariables map[string]string
		RunAtLoad            bool
		KeepAlive            map[string]bool
		ThrottleInterval     int
		StandardErrorPath    string
	}
	if err := plist.NewDecoder(f).Decode(&agent); err != nil {
		t.Fatal(err)
	}
	if keep, ok := agent.KeepAlive["SuccessfulExit"]; !ok || keep {
		t.Errorf("KeepAlive = %v, want a restart only after a crash", agent.KeepAlive)
	}
	if agent.Label != "org.agentstack.steward" || strings.Join(agent.ProgramArguments, " ") != bin+" serve" ||
		agent.EnvironmentVariables["STEWARD_HOME"] != home || !agent.RunAtLoad ||
		agent.ThrottleInterval != 10 || agent.StandardErrorPath != filepath.Join(home, "logs", "serve.log") {
		t.Errorf("LaunchAgent = %+v", agent)
	}
}
