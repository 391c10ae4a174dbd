// Package serviceunit writes the files that run `steward serve` as a
// service: a systemd unit (user or system) and a macOS LaunchAgent.
package serviceunit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"howett.net/plist"
)

// Name is the unit's name (steward.service) and the LaunchAgent's label.
const (
	SystemdName = "steward.service"
	LaunchdName = "org.agentstack.steward"
)

// Options describes the service.
type Options struct {
	// Binary is the absolute path of the steward executable.
	Binary string
	// Home is STEWARD_HOME, the only place the service may write besides
	// WritablePaths.
	Home string
	// WritablePaths are other folders the service writes (a wiki vault
	// outside STEWARD_HOME).
	WritablePaths []string
	// User makes a systemd user unit; otherwise a system unit running as
	// RunAs.
	User  bool
	RunAs string
	// SystemdVersion enables exponential restart back-off (RestartSteps,
	// systemd 254 and later); 0 or older versions restart every 5 s.
	SystemdVersion int
}

// quote escapes a value for a unit file (systemd's C-style quoting).
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// Systemd returns the unit file.
func Systemd(o Options) (string, error) {
	if !filepath.IsAbs(o.Binary) || !filepath.IsAbs(o.Home) {
		return "", fmt.Errorf("the unit needs absolute paths (binary %q, home %q)", o.Binary, o.Home)
	}
	var b strings.Builder
	b.WriteString("# Written by `steward install-systemd`; `steward uninstall-systemd` removes it.\n")
	b.WriteString("[Unit]\nDescription=Steward, a local-first personal agent\n")
	b.WriteString("After=network-online.target\nWants=network-online.target\n")
	b.WriteString("StartLimitIntervalSec=10min\nStartLimitBurst=20\n\n")
	b.WriteString("[Service]\nType=simple\n")
	fmt.Fprintf(&b, "ExecStart=%s serve\n", quote(o.Binary))
	b.WriteString("ExecReload=/bin/kill -HUP $MAINPID\n")
	fmt.Fprintf(&b, "Environment=%s\n", quote("STEWARD_HOME="+o.Home))
	if !o.User && o.RunAs != "" {
		fmt.Fprintf(&b, "User=%s\n", o.RunAs)
	}
	b.WriteString("Restart=on-failure\nRestartSec=5s\n")
	if o.SystemdVersion >= 254 {
		b.WriteString("RestartSteps=8\nRestartMaxDelaySec=5min\n")
	}
	b.WriteString("TimeoutStopSec=20s\n")
	b.WriteString("NoNewPrivileges=yes\nProtectSystem=strict\nPrivateTmp=yes\n")
	paths := append([]string{o.Home}, o.WritablePaths...)
	sort.Strings(paths[1:])
	for _, p := range paths {
		fmt.Fprintf(&b, "ReadWritePaths=%s\n", quote(p))
	}
	b.WriteString("\n[Install]\n")
	if o.User {
		b.WriteString("WantedBy=default.target\n")
	} else {
		b.WriteString("WantedBy=multi-user.target\n")
	}
	return b.String(), nil
}

// Launchd returns the LaunchAgent property list.
func Launchd(o Options) ([]byte, error) {
	if !filepath.IsAbs(o.Binary) || !filepath.IsAbs(o.Home) {
		return nil, fmt.Errorf("the LaunchAgent needs absolute paths (binary %q, home %q)", o.Binary, o.Home)
	}
	doc := map[string]any{
		"Label":                LaunchdName,
		"ProgramArguments":     []string{o.Binary, "serve"},
		"EnvironmentVariables": map[string]string{"STEWARD_HOME": o.Home},
		"RunAtLoad":            true,
		// Restart after a crash, not after a clean stop; launchd waits
		// ThrottleInterval seconds between starts.
		"KeepAlive":         map[string]bool{"SuccessfulExit": false},
		"ThrottleInterval":  10,
		"ProcessType":       "Interactive",
		"StandardOutPath":   filepath.Join(o.Home, "logs", "serve.log"),
		"StandardErrorPath": filepath.Join(o.Home, "logs", "serve.log"),
	}
	var buf bytes.Buffer
	enc := plist.NewEncoder(&buf)
	enc.Indent("\t")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode the LaunchAgent: %w", err)
	}
	return buf.Bytes(), nil
}
