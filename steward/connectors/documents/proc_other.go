//go:build !linux

package documents

import "os/exec"

// setChildAttrs has no parent-death signal outside Linux; the extraction
// time-out still kills the external extractor through its context.
func setChildAttrs(cmd *exec.Cmd) {}
