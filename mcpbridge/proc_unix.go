//go:build unix

package mcpbridge

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the server in its own process group, so whatever it
// spawns (npx → node, shell wrappers) can be ended with it, and a Ctrl-C
// meant for the host does not reach it before the host can shut it down.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup ends anything left in the server's process group after
// the server itself has exited or been stopped: no orphans.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// terminate asks the server itself to stop.
func terminate(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
}
