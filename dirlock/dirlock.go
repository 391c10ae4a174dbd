// Package dirlock gives one process at a time a data directory: an exclusive
// advisory lock (flock) on a file inside it, released by the kernel when the
// process exits however it exits, so a crash never leaves a stale lock.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file created inside the locked directory.
const FileName = ".lock"

// ErrLocked reports a directory another process holds.
var ErrLocked = errors.New("data directory is in use by another process")

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// Acquire takes dir (creating it with mode 0700) for this process and writes
// the process id into the lock file, so that a refused second process can say
// which one holds it. It never waits: a held directory is ErrLocked at once.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w%s: %s", ErrLocked, holder, dir)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the directory up.
func (l *Lock) Release() error {
	if err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN); err != nil {
		l.f.Close()
		return fmt.Errorf("unlock data directory: %w", err)
	}
	return l.f.Close()
}
