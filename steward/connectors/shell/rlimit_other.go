//go:build !linux

package shell

// limitMemory is a no-op where a running child's limits cannot be set from
// outside (macOS); output and time bounds still apply.
func limitMemory(pid int, bytes uint64) {}
