package scheduler

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Log events.
const (
	EventSchedulerStart = "scheduler-start"
	EventSchedulerStop  = "scheduler-stop"
	EventStart          = "start"
	EventEnd            = "end"
	EventSkip           = "skip"        // a tick came while the previous run was still going
	EventUnavailable    = "unavailable" // the binary has no such command
)

// Record is one line of scheduler.jsonl.
type Record struct {
	TS         time.Time          `json:"ts"`
	Event      string             `json:"event"`
	Job        string             `json:"job,omitempty"`
	Run        int64              `json:"run,omitempty"` // run number within the scheduler process
	PID        int                `json:"pid,omitempty"` // the child's (start, end) or the scheduler's
	DurationMS int64              `json:"durationMs,omitempty"`
	Exit       *int               `json:"exit,omitempty"`
	Result     string             `json:"result,omitempty"`
	Summary    map[string]float64 `json:"summary,omitempty"` // numeric fields of the job's --json report
	Error      string             `json:"error,omitempty"`
	Reason     string             `json:"reason,omitempty"` // why a tick was skipped, a job unavailable or a child needed; what an "up to date" run checked
	Next       *time.Time         `json:"next,omitempty"`
	Jobs       []string           `json:"jobs,omitempty"`
}

// DefaultMaxBytes is the size at which the log is rotated.
const DefaultMaxBytes = 5 << 20

// keepRotated is how many rotated files (scheduler.jsonl.1 …) are kept.
const keepRotated = 3

// Log appends records to a JSONL file, rotating it by size.
type Log struct {
	path     string
	maxBytes int64
	mu       sync.Mutex
}

// OpenLog prepares the log at path (its folder is created with mode 0700).
// maxBytes ≤ 0 takes DefaultMaxBytes.
func OpenLog(path string, maxBytes int64) (*Log, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the scheduler log folder: %w", err)
	}
	return &Log{path: path, maxBytes: maxBytes}, nil
}

// Path returns the log's file.
func (l *Log) Path() string { return l.path }

// Append writes r as one line, stamping it with the current time.
func (l *Log) Append(r Record) error {
	if r.TS.IsZero() {
		r.TS = time.Now().UTC()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode scheduler record: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, err := os.Stat(l.path); err == nil && st.Size()+int64(len(line)) > l.maxBytes {
		l.rotate()
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open scheduler log: %w", err)
	}
	_, werr := f.Write(line)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write scheduler log %s: %w", l.path, werr)
	}
	return nil
}

func (l *Log) rotate() {
	for i := keepRotated; i > 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", l.path, i-1), fmt.Sprintf("%s.%d", l.path, i))
	}
	os.Rename(l.path, l.path+".1")
}

// ReadRecords reads the log at path and, before it, its most recent rotated
// file, oldest first. Lines that do not parse are skipped. A missing log
// reads as empty.
func ReadRecords(path string) ([]Record, error) {
	var out []Record
	for _, p := range []string{path + ".1", path} {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read scheduler log: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r Record
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Event != "" {
				out = append(out, r)
			}
		}
		f.Close()
	}
	return out, nil
}

// JobStatus is one job as the scheduler (or its log) knows it.
type JobStatus struct {
	Name            string     `json:"name"`
	Summary         string     `json:"summary,omitempty"`
	Command         string     `json:"command,omitempty"`
	IntervalSeconds int64      `json:"intervalSeconds,omitempty"`
	TimeoutSeconds  int64      `json:"timeoutSeconds,omitempty"`
	State           string     `json:"state"` // not observed, running, idle, unavailable
	Unavailable     string     `json:"unavailable,omitempty"`
	PID             int        `json:"pid,omitempty"` // the running child
	LastStart       *time.Time `json:"lastStart,omitempty"`
	LastEnd         *time.Time `json:"lastEnd,omitempty"`
	LastResult      string     `json:"lastResult,omitempty"`
	LastError       string     `json:"lastError,omitempty"`
	// LastDetail says what an "up to date" run checked.
	LastDetail     string             `json:"lastDetail,omitempty"`
	LastSummary    map[string]float64 `json:"lastSummary,omitempty"`
	LastDurationMS int64              `json:"lastDurationMs,omitempty"`
	NextRun        *time.Time         `json:"nextRun,omitempty"`
	Runs           int64              `json:"runs"`
	Skips          int64              `json:"skips"`
	LastSkip       *time.Time         `json:"lastSkip,omitempty"`
	// Observed is true once a run ended in the scheduler process the status
	// describes; false means "not observed", never a failure.
	Observed bool `json:"observed"`
	// Earlier is the last run seen in the log before that process started,
	// shown as history, not as the current state.
	Earlier *JobStatus `json:"earlier,omitempty"`
}

// LogStatus is the scheduler as its log tells it, for `steward scheduler
// status` and a System page whose host does not run the scheduler.
type LogStatus struct {
	Log          string      `json:"log"`
	SchedulerPID int         `json:"schedulerPid,omitempty"`
	Started      *time.Time  `json:"started,omitempty"`
	Stopped      *time.Time  `json:"stopped,omitempty"`
	Jobs         []JobStatus `json:"jobs"`
}

// StatusFromLog rebuilds each job's status from the records of the last
// scheduler process in the log; what earlier processes saw goes in Earlier.
func StatusFromLog(path string, jobs []Job) (*LogStatus, error) {
	recs, err := ReadRecords(path)
	if err != nil {
		return nil, err
	}
	st := &LogStatus{Log: path}
	byName := map[string]*JobStatus{}
	fresh := func() {
		for _, j := range jobs {
			old := byName[j.Name]
			js := &JobStatus{Name: j.Name, Summary: j.Summary, IntervalSeconds: int64(j.Interval / time.Second),
				TimeoutSeconds: int64(j.Timeout / time.Second), State: StateNotObserved}
			if old != nil {
				if old.Observed {
					prev := *old
					prev.Earlier = nil
					js.Earlier = &prev
				} else {
					js.Earlier = old.Earlier
				}
			}
			byName[j.Name] = js
		}
	}
	fresh()
	for _, r := range recs {
		r := r
		if r.Event == EventSchedulerStart {
			fresh()
			st.SchedulerPID, st.Started, st.Stopped = r.PID, &r.TS, nil
			continue
		}
		if r.Event == EventSchedulerStop {
			st.Stopped = &r.TS
			continue
		}
		js := byName[r.Job]
		if js == nil {
			continue
		}
		switch r.Event {
		case EventUnavailable:
			js.State, js.Unavailable = StateUnavailable, r.Reason
		case EventStart:
			js.State, js.LastStart, js.PID, js.Runs = StateRunning, &r.TS, r.PID, max(js.Runs, r.Run)
		case EventEnd:
			js.State, js.LastEnd, js.PID = StateIdle, &r.TS, 0
			js.LastResult, js.LastError, js.LastSummary, js.LastDurationMS = r.Result, r.Error, r.Summary, r.DurationMS
			js.LastDetail = r.Reason
			js.NextRun, js.Observed = r.Next, true
		case EventSkip:
			js.Skips++
			js.LastSkip, js.NextRun = &r.TS, r.Next
		}
	}
	for _, j := range jobs {
		st.Jobs = append(st.Jobs, *byName[j.Name])
	}
	return st, nil
}
