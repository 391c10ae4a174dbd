// Package lock provides the one-live-server-per-project exclusion of a
// Saivage project. A lock is a directory created exclusively under
// .saivage/locks holding the owner's process identity. Inspection classifies
// an existing lock as missing, live, dead, indeterminate or malformed; no
// classification authorises removing or taking over someone else's lock.
package lock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentstack/agentstack/saivage/state"
)

// Status classifies a lock.
type Status string

// Lock classifications.
const (
	Missing       Status = "missing"
	Live          Status = "live"
	Dead          Status = "dead"
	Indeterminate Status = "indeterminate"
	Malformed     Status = "malformed"
)

// Owner identifies the process holding a lock.
type Owner struct {
	Format    int       `json:"format"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// StartTicks is the kernel's process start time (Linux /proc), which
	// tells a live owner from a reused PID.
	StartTicks uint64 `json:"start_ticks,omitempty"`
	BootID     string `json:"boot_id,omitempty"`
	Hostname   string `json:"hostname"`
}

// Observation is the result of inspecting a lock.
type Observation struct {
	Status Status `json:"status"`
	Owner  *Owner `json:"owner,omitempty"`
	Reason string `json:"reason"`
	// Endpoint is the published control endpoint of a live owner, if any.
	Endpoint string `json:"endpoint,omitempty"`
}

// Dir returns the server lock directory of a .saivage directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, "locks", "server") }

const ownerFile = "owner.json"
const endpointFile = "endpoint.json"

// Inspect classifies the server lock of stateDir. It never modifies it.
func Inspect(stateDir string) Observation {
	dir := Dir(stateDir)
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Observation{Status: Missing, Reason: "no lock"}
	}
	if err != nil {
		return Observation{Status: Indeterminate, Reason: err.Error()}
	}
	if !st.IsDir() {
		return Observation{Status: Malformed, Reason: dir + " is not a directory"}
	}
	data, err := state.ReadFile(filepath.Join(dir, ownerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Observation{Status: Indeterminate, Reason: "lock directory has no owner record (acquisition in progress or interrupted)"}
	}
	if err != nil {
		return Observation{Status: Indeterminate, Reason: err.Error()}
	}
	var o Owner
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.Format != 1 || o.PID <= 0 || o.Hostname == "" || o.StartedAt.IsZero() {
		return Observation{Status: Malformed, Reason: "owner record is not a valid format-1 lock owner"}
	}
	obs := Observation{Owner: &o}
	obs.Status, obs.Reason = classify(o)
	if obs.Status == Live {
		if ep, err := state.ReadFile(filepath.Join(dir, endpointFile)); err == nil {
			var e struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(ep, &e) == nil {
				obs.Endpoint = e.URL
			}
		}
	}
	return obs
}

func classify(o Owner) (Status, string) {
	host, _ := os.Hostname()
	if o.Hostname != host {
		return Indeterminate, fmt.Sprintf("held by pid %d on another host (%s)", o.PID, o.Hostname)
	}
	if boot := bootID(); boot != "" && o.BootID != "" && boot != o.BootID {
		return Dead, fmt.Sprintf("pid %d belonged to an earlier boot", o.PID)
	}
	if o.StartTicks != 0 {
		ticks, err := startTicks(o.PID)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Dead, fmt.Sprintf("pid %d is not running", o.PID)
		case err != nil:
			return Indeterminate, fmt.Sprintf("cannot read pid %d: %v", o.PID, err)
		case ticks == o.StartTicks:
			return Live, fmt.Sprintf("held by running pid %d", o.PID)
		default:
			return Dead, fmt.Sprintf("pid %d now belongs to another process", o.PID)
		}
	}
	switch err := syscall.Kill(o.PID, 0); {
	case errors.Is(err, syscall.ESRCH):
		return Dead, fmt.Sprintf("pid %d is not running", o.PID)
	default:
		return Indeterminate, fmt.Sprintf("pid %d exists but its identity cannot be verified", o.PID)
	}
}

// CurrentOwner returns this process's owner identity.
func CurrentOwner(now time.Time) Owner {
	host, _ := os.Hostname()
	ticks, _ := startTicks(os.Getpid())
	return Owner{Format: 1, PID: os.Getpid(), StartedAt: now.UTC(), StartTicks: ticks, BootID: bootID(), Hostname: host}
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// startTicks reads field 22 of /proc/PID/stat.
func startTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat format")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("unexpected /proc stat format")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// HeldError reports that a lock already exists.
type HeldError struct{ Observation Observation }

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("project lock is %s: %s", e.Observation.Status, e.Observation.Reason)
	switch e.Observation.Status {
	case Dead:
		msg += "; the previous server ended without releasing it — inspect the project and remove .saivage/locks/server by hand once you are sure"
	case Malformed, Indeterminate:
		msg += "; remove .saivage/locks/server by hand only after confirming no server is running"
	}
	return msg
}

// Lock is a held server lock.
type Lock struct {
	dir   string
	pub   *state.Publisher
	owner Owner
}

// Options configures Acquire.
type Options struct {
	// StateDir is the project's .saivage directory (must exist).
	StateDir string
	// Publisher writes the owner record; an unknown outcome is fatal.
	Publisher *state.Publisher
	// Now supplies the start time; time.Now when nil.
	Now func() time.Time
}

// Acquire creates the server lock exclusively. Any existing lock, whatever
// its classification, is refused with a *HeldError.
func Acquire(opts Options) (*Lock, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	if _, err := os.Stat(opts.StateDir); err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	if err := opts.Publisher.Mkdir(filepath.Join(opts.StateDir, "locks"), false); err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	dir := Dir(opts.StateDir)
	if err := opts.Publisher.Mkdir(dir, true); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, &HeldError{Observation: Inspect(opts.StateDir)}
		}
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	owner := CurrentOwner(now())
	data, _ := json.Marshal(owner)
	if err := opts.Publisher.CreateNew(filepath.Join(dir, ownerFile), data); err != nil {
		// The directory is ours; release it so a plain failure leaves no lock.
		os.Remove(dir)
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	return &Lock{dir: dir, pub: opts.Publisher, owner: owner}, nil
}

// Owner returns the held lock's immutable owner identity.
func (l *Lock) Owner() Owner { return l.owner }

// PublishEndpoint records the live control endpoint for CLI delegation.
func (l *Lock) PublishEndpoint(url string) error {
	data, _ := json.Marshal(struct {
		URL string `json:"url"`
	}{url})
	return l.pub.Replace(filepath.Join(l.dir, endpointFile), data)
}

// Release removes the lock this process holds. After an unknown publication
// outcome it refuses, so the lock stays.
func (l *Lock) Release() error {
	if l.pub.Stopped() {
		return state.ErrStopped
	}
	for _, name := range []string{endpointFile, ownerFile} {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("release lock: %w", err)
		}
	}
	if err := os.Remove(l.dir); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return state.SyncDir(filepath.Dir(l.dir))
}
