package operator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/state"
)

// TestCollectWorkDeletionEffects drives the deletion switch of a
// collection over two stash files (a.txt older than b.txt) with faults at
// its steps: each removal is durable (the directory is fsynced), a file
// changed since the listing or an unlink refused with the file still in
// place is retained, and an unlink or directory fsync whose outcome is
// unknown reaches the fatal boundary with no completed report.
func TestCollectWorkDeletionEffects(t *testing.T) {
	tests := []struct {
		name string
		// fault is the publisher's Fault hook; dir is the stash directory.
		fault       func(dir string) func(state.Step, string) error
		wantDeleted []string
		wantKept    map[string]string // file → retained reason
		wantFatal   bool
	}{
		{name: "both removed and the directory fsynced", wantDeleted: []string{"a.txt", "b.txt"}},
		{name: "a file changed since the listing is kept", fault: func(dir string) func(state.Step, string) error {
			return func(s state.Step, p string) error {
				if s == state.StepUnlink && filepath.Base(p) == "a.txt" {
					// Someone writes b.txt between the listing and its removal.
					os.WriteFile(filepath.Join(dir, "b.txt"), []byte("rewritten, longer than before"), 0o644)
				}
				return nil
			}
		}, wantDeleted: []string{"a.txt"}, wantKept: map[string]string{"b.txt": "changed since it was listed"}},
		{name: "a refused unlink leaving the file is kept", fault: func(string) func(state.Step, string) error {
			return func(s state.Step, p string) error {
				if s == state.StepUnlink && filepath.Base(p) == "a.txt" {
					return syscall.EACCES
				}
				return nil
			}
		}, wantDeleted: []string{"b.txt"}, wantKept: map[string]string{"a.txt": "delete failed"}},
		{name: "an unlink with an unknown outcome is fatal", fault: func(string) func(state.Step, string) error {
			return func(s state.Step, p string) error {
				if s == state.StepUnlink && filepath.Base(p) == "a.txt" {
					os.Remove(p) // gone, yet unlink reports an error
					return syscall.EIO
				}
				return nil
			}
		}, wantFatal: true},
		{name: "a failed directory fsync is fatal", fault: func(string) func(state.Step, string) error {
			return func(s state.Step, _ string) error {
				if s == state.StepSyncDir {
					return syscall.EIO
				}
				return nil
			}
		}, wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			dir := filepath.Join(stateDir, "work", "stash")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			for i, name := range []string{"a.txt", "b.txt"} {
				p := filepath.Join(dir, name)
				os.WriteFile(p, []byte("scratch "+name), 0o644)
				at := old.Add(time.Duration(i) * time.Minute)
				os.Chtimes(p, at, at)
			}
			var fatals []error
			var steps []string
			opts := state.Options{Fatal: func(err error) { fatals = append(fatals, err) },
				AfterStep: func(s state.Step, p string) { steps = append(steps, string(s)+" "+filepath.Base(p)) }}
			if tt.fault != nil {
				opts.Fault = tt.fault(dir)
			}
			resp := collectWork(context.Background(), workGC{dir: stateDir, mode: "delete", pub: state.New(opts)})
			if tt.wantFatal {
				var unknown *state.OutcomeUnknownError
				if len(fatals) != 1 || !errors.As(fatals[0], &unknown) || resp.Disposition != "failed" || resp.Result != nil {
					t.Fatalf("fatals %v, response %+v: want one unknown outcome and no report", fatals, resp)
				}
				return
			}
			if len(fatals) != 0 || resp.Disposition != "completed" {
				t.Fatalf("fatals %v, response %+v", fatals, resp)
			}
			if resp.Result.Deleted.Files != len(tt.wantDeleted) {
				t.Errorf("deleted %d files, want %v", resp.Result.Deleted.Files, tt.wantDeleted)
			}
			var want []string
			for _, name := range tt.wantDeleted {
				if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s still exists (%v)", name, err)
				}
				want = append(want, "unlink "+name, "syncdir stash")
			}
			if !slices.Equal(steps, want) {
				t.Errorf("steps %v, want each unlink made durable: %v", steps, want)
			}
			for name, why := range tt.wantKept {
				found := false
				for _, r := range resp.Result.Retained {
					found = found || (strings.HasSuffix(r.Path, "/"+name) && strings.HasPrefix(r.Reason, why))
				}
				if _, err := os.Lstat(filepath.Join(dir, name)); err != nil || !found {
					t.Errorf("%s: %v, retained %+v, want kept as %q", name, err, resp.Result.Retained, why)
				}
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("the directory went away: %v", err)
			}
		})
	}
}
