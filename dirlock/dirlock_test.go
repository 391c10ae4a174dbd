package dirlock_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/dirlock"
)

func TestAcquireIsExclusiveAndReleasable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file, so a second Acquire in the same
	// process is refused just as another process would be.
	_, err = dirlock.Acquire(dir)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second acquire: %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	l2.Release()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode = %v, %v; want 0700", fi.Mode(), err)
	}
}
