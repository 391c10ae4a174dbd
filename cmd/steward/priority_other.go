//go:build !linux

package main

import "golang.org/x/sys/unix"

// lowerPriority makes this process background work (nice 10), so a backup
// never slows the chat turns of a running serve. Best effort.
func lowerPriority() {
	unix.Setpriority(unix.PRIO_PROCESS, 0, 10)
}
