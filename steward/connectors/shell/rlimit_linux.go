package shell

import "golang.org/x/sys/unix"

// limitMemory caps a started child's address space. It is applied right
// after start, so a child could allocate before it lands; it bounds the
// rest of the run.
func limitMemory(pid int, bytes uint64) {
	lim := unix.Rlimit{Cur: bytes, Max: bytes}
	_ = unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil)
}
