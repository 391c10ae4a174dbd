package documents

import (
	"os/exec"
	"syscall"
)

// setChildAttrs runs an external extractor in its own process group, which
// the extraction deadline kills whole, and makes the kernel kill it when
// the process that started it dies, so a worker killed at the time-out does
// not leave pdftotext running.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
