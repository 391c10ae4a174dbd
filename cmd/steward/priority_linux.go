package main

import "golang.org/x/sys/unix"

// lowerPriority makes this process background work: nice 10 and the idle
// I/O class, so a backup never slows the chat turns of a running serve.
// Best effort: a failure leaves the normal priority.
func lowerPriority() {
	unix.Setpriority(unix.PRIO_PROCESS, 0, 10)
	const ioprioClassIdle, ioprioClassShift, ioprioWhoProcess = 3, 13, 1
	unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, ioprioClassIdle<<ioprioClassShift)
}
