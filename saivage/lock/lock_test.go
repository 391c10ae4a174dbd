package lock_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentstack/agentstack/saivage/lock"
	"github.com/agentstack/agentstack/saivage/state"
)

func writeOwner(t *testing.T, stateDir string, data []byte) {
	t.Helper()
	dir := lock.Dir(stateDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if err := os.WriteFile(filepath.Join(dir, "owner.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ownerJSON(t *testing.T, mutate func(*lock.Owner)) []byte {
	t.Helper()
	o := lock.CurrentOwner(time.Now())
	mutate(&o)
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reapedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return cmd.Process.Pid
}

func TestLockStates(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, stateDir string)
		want  lock.Status
	}{
		{"missing", func(t *testing.T, d string) {}, lock.Missing},
		{"live", func(t *testing.T, d string) {
			writeOwner(t, d, ownerJSON(t, func(o *lock.Owner) {}))
		}, lock.Live},
		{"dead: pid reused by another process", func(t *testing.T, d string) {
			writeOwner(t, d, ownerJSON(t, func(o *lock.Owner) { o.StartTicks++ }))
		}, lock.Dead},
		{"dead: pid gone", func(t *testing.T, d string) {
			pid := reapedPID(t)
			writeOwner(t, d, ownerJSON(t, func(o *lock.Owner) { o.PID = pid }))
		}, lock.Dead},
		{"dead: earlier boot", func(t *testing.T, d string) {
			writeOwner(t, d, ownerJSON(t, func(o *lock.Owner) { o.BootID = "00000000-0000-0000-0000-000000000000" }))
		}, lock.Dead},
		{"indeterminate: other host", func(t *testing.T, d string) {
			writeOwner(t, d, ownerJSON(t, func(o *lock.Owner) { o.Hostname = "elsewhere.invalid" }))
		}, lock.Indeterminate},
		{"indeterminate: no owner record", func(t *testing.T, d string) { writeOwner(t, d, nil) }, lock.Indeterminate},
		{"malformed: garbage", func(t *testing.T, d string) { writeOwner(t, d, []byte("{pid: 1")) }, lock.Malformed},
		{"malformed: unknown field", func(t *testing.T, d string) {
			writeOwner(t, d, []byte(`{"format":1,"pid":1,"hostname":"h","started_at":"2024-01-01T00:00:00Z","x":1}`))
		}, lock.Malformed},
		{"malformed: lock is a file", func(t *testing.T, d string) {
			if err := os.MkdirAll(filepath.Join(d, "locks"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(lock.Dir(d), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, lock.Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			tt.setup(t, stateDir)
			obs := lock.Inspect(stateDir)
			if obs.Status != tt.want {
				t.Fatalf("status = %s (%s), want %s", obs.Status, obs.Reason, tt.want)
			}
			before, _ := os.ReadFile(filepath.Join(lock.Dir(stateDir), "owner.json"))
			l, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: state.New(state.Options{})})
			if tt.want == lock.Missing {
				if err != nil {
					t.Fatal(err)
				}
				if got := lock.Inspect(stateDir).Status; got != lock.Live {
					t.Fatalf("after acquire: %s", got)
				}
				if err := l.Release(); err != nil {
					t.Fatal(err)
				}
				if got := lock.Inspect(stateDir).Status; got != lock.Missing {
					t.Fatalf("after release: %s", got)
				}
				return
			}
			var held *lock.HeldError
			if !errors.As(err, &held) || held.Observation.Status != tt.want {
				t.Fatalf("acquire over a %s lock: %v", tt.want, err)
			}
			after, _ := os.ReadFile(filepath.Join(lock.Dir(stateDir), "owner.json"))
			if string(before) != string(after) {
				t.Fatal("refused acquisition modified the existing lock")
			}
		})
	}
}

func TestEndpointPublishedForLiveOwner(t *testing.T) {
	stateDir := t.TempDir()
	l, err := lock.Acquire(lock.Options{StateDir: stateDir, Publisher: state.New(state.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	if err := l.PublishEndpoint("http://127.0.0.1:4318"); err != nil {
		t.Fatal(err)
	}
	obs := lock.Inspect(stateDir)
	if obs.Status != lock.Live || obs.Endpoint != "http://127.0.0.1:4318" || obs.Owner.PID != os.Getpid() {
		t.Fatalf("obs = %+v", obs)
	}
}
