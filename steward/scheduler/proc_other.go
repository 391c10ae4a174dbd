//go:build !unix

package scheduler

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func terminateGroup(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }

func killGroup(*exec.Cmd) {}
