package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentstack/agentstack/steward/serviceunit"
)

func init() {
	register(&command{Name: "install-systemd", Summary: "run steward serve as a systemd service (Linux)", Run: installSystemd})
	register(&command{Name: "uninstall-systemd", Summary: "remove the systemd unit install-systemd wrote", Run: uninstallSystemd})
	register(&command{Name: "install-launchd", Summary: "run steward serve as a LaunchAgent (macOS)", Run: installLaunchd})
}

// serviceBinary is this executable's resolved path: what the service runs.
func serviceBinary() (string, error) {
	bin, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the steward executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(bin); err == nil {
		bin = r
	}
	return bin, nil
}

func systemdUnitDir(userUnit bool) string {
	if !userUnit {
		return "/etc/systemd/system"
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "systemd", "user")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "systemd", "user")
}

// systemdVersion returns the local systemd's major version, 0 if unknown.
func systemdVersion() int {
	out, err := exec.Command("systemctl", "--version").Output()
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`^systemd (\d+)`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

func installSystemd(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "install-systemd", "[--user] [--dir DIR] [--print] [--force]", `
Writes a systemd unit that runs 'steward serve' for this STEWARD_HOME: restarted after a failure
(with growing delays on systemd 254 and later), SIGHUP on 'systemctl reload' (re-reads policy.yaml
and gateway.yaml), and hardened: NoNewPrivileges, a private /tmp, and the whole file system
read-only except STEWARD_HOME and the wiki vault (ProtectSystem=strict with ReadWritePaths).
--user writes a user unit (~/.config/systemd/user), otherwise a system unit running as you
(/etc/systemd/system, needs root). It prints the commands that enable it.`)
	userUnit := fs.Bool("user", false, "write a user unit instead of a system unit")
	dir := fs.String("dir", "", "write the unit into DIR instead of the standard folder")
	printOnly := fs.Bool("print", false, "print the unit instead of writing it")
	force := fs.Bool("force", false, "replace a different existing unit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o, err := serviceOptions(env)
	if err != nil {
		return err
	}
	o.User, o.SystemdVersion = *userUnit, systemdVersion()
	if !o.User {
		if u, err := user.Current(); err == nil {
			o.RunAs = u.Username
		}
	}
	unit, err := serviceunit.Systemd(o)
	if err != nil {
		return err
	}
	if *printOnly {
		fmt.Fprint(env.Stdout, unit)
		return nil
	}
	if *dir == "" {
		*dir = systemdUnitDir(o.User)
	}
	path := filepath.Join(*dir, serviceunit.SystemdName)
	if err := writeServiceFile(path, []byte(unit), *force); err != nil {
		return err
	}
	ctl := "systemctl"
	if o.User {
		ctl = "systemctl --user"
	}
	fmt.Fprintf(env.Stdout, "wrote %s\nenable and start it with:\n  %s daemon-reload\n  %s enable --now %s\n", path, ctl, ctl, serviceunit.SystemdName)
	if o.User {
		fmt.Fprintln(env.Stdout, "to keep it running while you are logged out:\n  loginctl enable-linger "+os.Getenv("USER"))
	}
	fmt.Fprintf(env.Stdout, "logs: journalctl %s-u %s -f\n", map[bool]string{true: "--user ", false: ""}[o.User], serviceunit.SystemdName)
	return nil
}

func uninstallSystemd(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "uninstall-systemd", "[--user] [--dir DIR]", `
Removes the unit install-systemd wrote. Stop it first: systemctl [--user] disable --now steward.service.
Your data in STEWARD_HOME is not touched.`)
	userUnit := fs.Bool("user", false, "remove the user unit")
	dir := fs.String("dir", "", "the folder the unit was written to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		*dir = systemdUnitDir(*userUnit)
	}
	path := filepath.Join(*dir, serviceunit.SystemdName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no unit at %s (was it installed with%s --user?)", path, map[bool]string{true: "out", false: ""}[*userUnit])
	}
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "steward install-systemd") {
		return fmt.Errorf("%s was not written by steward install-systemd; remove it yourself", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	fmt.Fprintf(env.Stdout, "removed %s\nthen run: systemctl%s daemon-reload\n", path, map[bool]string{true: " --user", false: ""}[*userUnit])
	return nil
}

func installLaunchd(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "install-launchd", "[--dir DIR] [--print] [--force]", `
Writes a LaunchAgent (~/Library/LaunchAgents/org.agentstack.steward.plist) that starts
'steward serve' for this STEWARD_HOME at login and restarts it after a crash (10 s apart); its
output goes to STEWARD_HOME/logs/serve.log. It prints the launchctl command that loads it.`)
	dir := fs.String("dir", "", "write the property list into DIR instead of ~/Library/LaunchAgents")
	printOnly := fs.Bool("print", false, "print the property list instead of writing it")
	force := fs.Bool("force", false, "replace a different existing property list")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o, err := serviceOptions(env)
	if err != nil {
		return err
	}
	doc, err := serviceunit.Launchd(o)
	if err != nil {
		return err
	}
	if *printOnly {
		_, err := env.Stdout.Write(doc)
		return err
	}
	if *dir == "" {
		home, _ := os.UserHomeDir()
		*dir = filepath.Join(home, "Library", "LaunchAgents")
	}
	path := filepath.Join(*dir, serviceunit.LaunchdName+".plist")
	if err := writeServiceFile(path, doc, *force); err != nil {
		return err
	}
	os.MkdirAll(filepath.Join(o.Home, "logs"), 0o700)
	fmt.Fprintf(env.Stdout, "wrote %s\nload it with:\n  launchctl bootstrap gui/$(id -u) %s\nstop and remove it with:\n  launchctl bootout gui/$(id -u) %s && rm %s\n", path, path, path, path)
	return nil
}

// serviceOptions is what both service files need from the configuration.
func serviceOptions(env *cliEnv) (serviceunit.Options, error) {
	cfg, err := env.Config()
	if err != nil {
		return serviceunit.Options{}, err
	}
	bin, err := serviceBinary()
	if err != nil {
		return serviceunit.Options{}, err
	}
	o := serviceunit.Options{Binary: bin, Home: cfg.Home}
	if wiki := cfg.Path("STEWARD_WIKI_DIR", ""); wiki != "" && !within(wiki, cfg.Home) {
		o.WritablePaths = append(o.WritablePaths, wiki)
	}
	return o, cfg.Err()
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writeServiceFile writes a unit or property list (0644: not secret),
// refusing to replace a different file unless force.
func writeServiceFile(path string, data []byte, force bool) error {
	if old, err := os.ReadFile(path); err == nil && string(old) != string(data) && !force {
		return fmt.Errorf("%s exists and differs; pass --force to replace it", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
