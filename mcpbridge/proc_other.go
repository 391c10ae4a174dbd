//go:build !unix

package mcpbridge

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func terminate(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
}
