package ekbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/ekbridge"
)

// launcher plays the Swift side of the protocol on real files: it claims a
// request by moving it into processing/ and publishes a response through a
// temporary file and a rename.
type launcher struct {
	t      *testing.T
	dir    string
	answer func(req ekbridge.Request, info os.FileInfo) *ekbridge.Response // nil: claim and never answer
	mu     sync.Mutex
	seen   []ekbridge.Request
	stop   chan struct{}
	done   chan struct{}
}

func startLauncher(t *testing.T, dir string, answer func(ekbridge.Request, os.FileInfo) *ekbridge.Response) *launcher {
	l := &launcher{t: t, dir: dir, answer: answer, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

func (l *launcher) run() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		entries, _ := os.ReadDir(filepath.Join(l.dir, ekbridge.Requests))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			src := filepath.Join(l.dir, ekbridge.Requests, e.Name())
			info, err := os.Stat(src)
			if err != nil {
				continue
			}
			claimed := filepath.Join(l.dir, ekbridge.Processing, e.Name())
			if os.Rename(src, claimed) != nil {
				continue
			}
			data, _ := os.ReadFile(claimed)
			var req ekbridge.Request
			json.Unmarshal(data, &req)
			l.mu.Lock()
			l.seen = append(l.seen, req)
			l.mu.Unlock()
			resp := l.answer(req, info)
			if resp == nil {
				continue
			}
			out, _ := json.Marshal(resp)
			tmp := filepath.Join(l.dir, ekbridge.Responses, "."+e.Name()+".tmp")
			os.WriteFile(tmp, out, 0o600)
			os.Rename(tmp, filepath.Join(l.dir, ekbridge.Responses, e.Name()))
			os.Remove(claimed)
		}
	}
}

var uuidName = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.json$`)

func TestRequestResponse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "calendar-bridge")
	infos := make(chan os.FileInfo, 1)
	startLauncher(t, dir, func(req ekbridge.Request, info os.FileInfo) *ekbridge.Response {
		infos <- info
		return &ekbridge.Response{ID: req.ID, OK: true, Result: json.RawMessage(`{"uid":"EK-1"}`)}
	})
	c := &ekbridge.Client{Dir: dir, Timeout: 20 * time.Second}
	resp, err := c.Do(context.Background(), "create", map[string]string{"calendarId": "CAL-1", "title": "Lunch"})
	if err != nil || !resp.OK || string(resp.Result) != `{"uid":"EK-1"}` {
		t.Fatalf("Do = %+v, %v", resp, err)
	}
	info := <-infos
	if mode, name := info.Mode().Perm(), info.Name(); mode != 0o600 || !uuidName.MatchString(name) {
		t.Errorf("request file %q has mode %v; want a UUID name and 0600", name, mode)
	}
	for _, sub := range []string{"", ekbridge.Requests, ekbridge.Processing, ekbridge.Responses} {
		st, err := os.Stat(filepath.Join(dir, sub))
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s/%s: %v %v; want mode 0700", dir, sub, st.Mode().Perm(), err)
		}
	}
	left, _ := os.ReadDir(filepath.Join(dir, ekbridge.Responses))
	if len(left) != 0 {
		t.Errorf("the response was not consumed: %v", left)
	}
}

func TestRequestCarriesExpiry(t *testing.T) {
	dir := t.TempDir()
	reqs := make(chan ekbridge.Request, 1)
	startLauncher(t, dir, func(req ekbridge.Request, _ os.FileInfo) *ekbridge.Response {
		reqs <- req
		return &ekbridge.Response{ID: req.ID, OK: false, Error: &ekbridge.ResponseError{Code: "CALENDAR_FULL_ACCESS_REQUIRED", Message: "grant Full Access", NotExecuted: true}}
	})
	now := time.UnixMilli(1_800_000_000_000)
	c := &ekbridge.Client{Dir: dir, Timeout: 20 * time.Second, Now: func() time.Time { return now }}
	resp, err := c.Do(context.Background(), "update", map[string]string{"uid": "X"})
	if err != nil || resp.OK || resp.Error.Code != "CALENDAR_FULL_ACCESS_REQUIRED" || !resp.Error.NotExecuted {
		t.Fatalf("Do = %+v, %v", resp, err)
	}
	got := <-reqs
	if got.ExpiresAtMs != now.Add(20*time.Second).UnixMilli() || got.Version != ekbridge.Version || got.Operation != "update" ||
		string(got.Payload) != `{"uid":"X"}` {
		t.Errorf("request = %+v", got)
	}
}

// Without a launcher the request is withdrawn: it certainly did not run.
func TestUnclaimedRequestIsWithdrawn(t *testing.T) {
	dir := t.TempDir()
	c := &ekbridge.Client{Dir: dir, Timeout: 300 * time.Millisecond}
	_, err := c.Do(context.Background(), "delete", map[string]string{"uid": "X"})
	if !errors.Is(err, ekbridge.ErrNotExecuted) || !strings.Contains(err.Error(), "withdrawn") {
		t.Fatalf("err = %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, ekbridge.Requests)); len(left) != 0 {
		t.Errorf("the request stayed queued: %v", left)
	}
}

// A claimed request that gets no answer is uncertain, never "not done".
func TestClaimedRequestWithoutAnswerIsUncertain(t *testing.T) {
	dir := t.TempDir()
	startLauncher(t, dir, func(ekbridge.Request, os.FileInfo) *ekbridge.Response { return nil })
	c := &ekbridge.Client{Dir: dir, Timeout: 500 * time.Millisecond}
	_, err := c.Do(context.Background(), "create", map[string]string{})
	if !errors.Is(err, ekbridge.ErrUncertain) || errors.Is(err, ekbridge.ErrNotExecuted) {
		t.Fatalf("err = %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, ekbridge.Processing)); len(left) != 1 {
		t.Errorf("processing/ holds %d requests", len(left))
	}
}

// After a launcher restart a request found in processing/ is answered
// outcomeUnknown, never replayed.
func TestOutcomeUnknownAfterRestart(t *testing.T) {
	dir := t.TempDir()
	startLauncher(t, dir, func(req ekbridge.Request, _ os.FileInfo) *ekbridge.Response {
		return &ekbridge.Response{ID: req.ID, OutcomeUnknown: true}
	})
	resp, err := (&ekbridge.Client{Dir: dir, Timeout: 20 * time.Second}).Do(context.Background(), "create", nil)
	if err != nil || !resp.OutcomeUnknown || resp.OK {
		t.Fatalf("Do = %+v, %v", resp, err)
	}
}
