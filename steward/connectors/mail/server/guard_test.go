package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentstack/agentstack/steward/pathguard"
)

func TestNewGuardRefusesWriteOnlyDestinations(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	for _, d := range []string{"Downloads", ".vim/plugin", "Library/LaunchAgents"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	data := filepath.Join(dir, "steward")
	os.MkdirAll(data, 0o700)
	g := NewGuard(home, data)
	tests := []struct {
		path    string
		blocked bool
	}{
		{filepath.Join(home, "Downloads", "cert.pdf"), false},
		{filepath.Join(home, "report.pdf"), false},
		{filepath.Join(dir, "elsewhere.pdf"), false},
		{filepath.Join(home, ".vim", "plugin", "x.vim"), true},      // an existing hidden folder
		{filepath.Join(home, ".config", "autostart", "x"), true},    // a start-up folder that does not exist yet
		{filepath.Join(home, ".bashrc"), true},                      // a start-up file that does not exist yet
		{filepath.Join(home, "Library", "LaunchAgents", "x"), true}, // ~/Library
		{filepath.Join(home, ".ssh", "authorized_keys"), true},      // the shared policy
		{filepath.Join(data, "x.pdf"), true},                        // STEWARD_HOME
		{"/etc/cron.d/x", true},
		{"/usr/local/bin/x", true},
	}
	for _, tc := range tests {
		_, err := g.Check(tc.path)
		if got := errors.Is(err, pathguard.ErrBlocked); got != tc.blocked {
			t.Errorf("Check(%s): blocked = %v (err %v), want %v", tc.path, got, err, tc.blocked)
		}
	}
	// The system-folder extension never covers the user's own home: root's is /root.
	if _, err := NewGuard("/root", data).Check("/root/Downloads/x.pdf"); err != nil {
		t.Errorf("home under /root: %v", err)
	}
	if _, err := NewGuard("/root", data).Check("/etc/x"); !errors.Is(err, pathguard.ErrBlocked) {
		t.Errorf("/etc with home /root: err = %v", err)
	}
}
