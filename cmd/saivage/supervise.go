package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/saivage/operator"
)

// superviseStart runs "saivage start" (args without --supervise) as a child
// process and starts it again each time it exits with the restart status
// 75; any other exit ends the supervisor with the child's status. An
// interrupt is forwarded to the child as SIGTERM.
func superviseStart(ctx context.Context, e *env, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("supervise: find this program: %w", err)
	}
	var child []string
	for _, a := range args {
		if a != "--supervise" && a != "-supervise" && !strings.HasPrefix(a, "--supervise=") && !strings.HasPrefix(a, "-supervise=") {
			child = append(child, a)
		}
	}
	for starts := 1; ; starts++ {
		cmd := exec.CommandContext(ctx, exe, child...)
		cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 60 * time.Second
		err := cmd.Run()
		var xe *exec.ExitError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &xe) && xe.ExitCode() == operator.RestartExitCode:
			fmt.Fprintf(e.stderr, "saivage supervisor: the server exited %d (confirmed restart); starting it again (start %d)\n", operator.RestartExitCode, starts+1)
		case errors.As(err, &xe) && xe.ExitCode() > 0:
			return exitCode(xe.ExitCode())
		default:
			return fmt.Errorf("supervise: %w", err)
		}
	}
}

func restartCommand() *command {
	var pf projectFlags
	return &command{
		name: "restart", summary: "restart the live server (exit 75; a supervisor starts it again)",
		usage: "[--root DIR] [--json]",
		help: `Asks the live server to restart (POST /api/runtime/restart-server with the
exact confirmation). The server answers, halts any Run, contains its
processes, releases the lock and exits with status 75; saivage start
--supervise (or systemd with RestartForceExitStatus=75) starts it again
with the same project. Without a supervisor the server simply stops.`,
		flags: pf.register,
		run: func(ctx context.Context, e *env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError{"restart takes no arguments"}
			}
			srv, _, err := pf.live(e)
			if err != nil {
				return err
			}
			var out struct {
				Scheduled bool `json:"scheduled"`
				ExitCode  int  `json:"exit_code"`
			}
			if err := srv.call(ctx, http.MethodPost, "/api/runtime/restart-server", map[string]string{"confirm": operator.RestartConfirmation}, &out); err != nil {
				return err
			}
			if pf.json {
				return writeJSON(e.stdout, out)
			}
			fmt.Fprintf(e.stdout, "restart scheduled: the server exits %d once it has stopped\n", out.ExitCode)
			return nil
		},
	}
}

// printSystemdUnit prints a systemd user unit that serves the selected
// project and is started again after a confirmed restart (exit 75).
func printSystemdUnit(e *env, pf *projectFlags) error {
	opts, _, err := pf.options(e)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	fmt.Fprintf(e.stdout, `# Save as ~/.config/systemd/user/saivage-%s.service, then:
#   systemctl --user daemon-reload && systemctl --user enable --now saivage-%[1]s
[Unit]
Description=Saivage server for %[2]s

[Service]
ExecStart=%[3]s start --root %[2]s --config %[4]s
WorkingDirectory=%[2]s
# saivage restart makes the server exit 75; other failures restart too.
Restart=on-failure
RestartForceExitStatus=75
SuccessExitStatus=75

[Install]
WantedBy=default.target
`, filepath.Base(opts.Root), opts.Root, exe, opts.ConfigPath)
	return nil
}
