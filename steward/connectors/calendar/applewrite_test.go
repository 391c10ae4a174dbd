package calendar

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/connectors/calendar/ekbridge"
	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// scriptRecorder stands in for osascript: it records every script and
// answers with out or err.
type scriptRecorder struct {
	mu      sync.Mutex
	scripts []string
	out     string
	err     error
}

func (r *scriptRecorder) Run(_ context.Context, script string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts = append(r.scripts, script)
	return r.out, r.err
}

func (r *scriptRecorder) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.scripts...)
}

// appleWriteEnv is an indexed Apple Calendar store (two calendars titled
// Home in different accounts, one Work) and a Writer as on macOS.
type appleWriteEnv struct {
	*writeEnv
	apple  *appleDB
	script *scriptRecorder
	lunch  string // a single event's UID in Work
	weekly string // a recurring event's UID in Work
}

func newAppleWriteEnv(t *testing.T, bridge *ekbridge.Client) *appleWriteEnv {
	e := newWriteEnv(t)
	a := newAppleDB(t)
	a.exec(`INSERT INTO Calendar (ROWID, store_id, title, UUID) VALUES (3, 2, 'Home', 'CAL-HOME-2')`)
	start := time.Date(2026, 5, 4, 7, 0, 0, 0, time.UTC)
	a.event(appleEvent{Summary: "Lunch", UID: "LUNCH-1", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 2})
	a.event(appleEvent{Summary: "Home chores", UID: "HOME-1", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 1})
	a.event(appleEvent{Summary: "Home 2", UID: "HOME-2", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 3})
	w := a.event(appleEvent{Summary: "Weekly", UID: "WEEKLY-1", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 2})
	a.recurrence(w, 2, 1, 0, time.Time{}, "")
	e.cfg = &Config{Timezone: "Europe/Rome", Sources: []SourceConfig{{Name: "apple", Kind: KindApple, Path: a.Path, Account: "apple"}}}
	e.sync()
	rec := &scriptRecorder{out: "NEW-EVENT-UID"}
	e.w = NewWriter(WriterOptions{
		Config:  func(context.Context) (*Config, error) { return e.cfg, nil },
		Index:   func(context.Context) (*Index, error) { return e.idx, nil },
		Journal: e.journal, GOOS: "darwin",
		Apple: NewAppleWriter(AppleOptions{Bridge: bridge, Script: rec, Local: rome}),
	})
	return &appleWriteEnv{writeEnv: e, apple: a, script: rec, lunch: "LUNCH-1", weekly: "WEEKLY-1"}
}

func (e *appleWriteEnv) op(id string) writeops.Operation {
	op, err := e.journal.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// The AppleScript path: Calendar.app is told exactly what to do, every value
// quoted, and Calendar's UID comes back into the journal.
func TestAppleScriptCreate(t *testing.T) {
	e := newAppleWriteEnv(t, nil)
	res, err := e.w.CreateEvent(context.Background(), CreateEventParams{CalendarID: "CAL-WORK", Title: `Review "Q2" \ plan`,
		Start: "2026-05-06T14:00:00+02:00", End: "2026-05-06T15:30:00+02:00", Notes: "line 1\nline 2", Alarms: []int{15}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != BackendAppleScript || res.State != string(writeops.StateReturned) || res.UID != "NEW-EVENT-UID" {
		t.Fatalf("result %+v", res)
	}
	scripts := e.script.ran()
	if len(scripts) != 1 {
		t.Fatalf("%d scripts ran", len(scripts))
	}
	want := `tell application "Calendar"
if (count of (calendars whose name is "Work")) is not 1 then error "calendar Work is missing or its title is not unique; nothing was changed" number 7001
set theCal to first calendar whose name is "Work"
set sd to current date
set day of sd to 1
set year of sd to 2026
set month of sd to 5
set day of sd to 6
set time of sd to 50400
set ed to current date
set day of ed to 1
set year of ed to 2026
set month of ed to 5
set day of ed to 6
set time of ed to 55800
set theEvent to make new event at end of events of theCal with properties {summary:"Review \"Q2\" \\ plan", start date:sd, end date:ed, allday event:false, description:"line 1\nline 2"}
delete every display alarm of theEvent
make new display alarm at end of display alarms of theEvent with properties {trigger interval:-15}
return uid of theEvent
end tell
`
	if scripts[0] != want {
		t.Errorf("script:\n%s\nwant:\n%s", scripts[0], want)
	}
	var exp Expected
	op := e.op(res.OperationID)
	json.Unmarshal(op.Expected, &exp)
	var out Outcome
	json.Unmarshal(op.Result, &out)
	if exp.UID != "" || out.UID != "NEW-EVENT-UID" || exp.CalendarID != "CAL-WORK" {
		t.Errorf("expected %s, result %s", op.Expected, op.Result)
	}
}

func TestAppleScriptUpdateAndDelete(t *testing.T) {
	e := newAppleWriteEnv(t, nil)
	ctx := context.Background()
	if _, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: e.lunch, End: ptr("2026-05-04T10:30:00+02:00"), Title: ptr("Lunch & talk")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: e.lunch}); err != nil {
		t.Fatal(err)
	}
	s := e.script.ran()
	if len(s) != 2 {
		t.Fatalf("%d scripts", len(s))
	}
	for _, want := range []string{
		`set theEvent to first event of theCal whose uid is "LUNCH-1"`,
		"set time of ed to 37800\n",
		// A one-sided change is checked against the live start, which it leaves alone.
		`if ed ≤ (start date of theEvent) then error "the event would end before it starts; nothing was changed" number 7001`,
		"set end date of theEvent to ed\n",
		`set summary of theEvent to "Lunch & talk"`,
	} {
		if !strings.Contains(s[0], want) {
			t.Errorf("update script lacks %q:\n%s", want, s[0])
		}
	}
	if strings.Contains(s[0], "set start date") {
		t.Errorf("a one-sided end change sets the start:\n%s", s[0])
	}
	if !strings.Contains(s[1], "delete theEvent\n") || strings.Contains(s[1], "set summary") {
		t.Errorf("delete script:\n%s", s[1])
	}
}

// The compatibility path's limits are enforced before anything is
// journaled, with the spec's code.
func TestAppleScriptLimits(t *testing.T) {
	e := newAppleWriteEnv(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"create in a duplicated title", func() error {
			_, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "CAL-HOME", Title: "x", Start: "2026-05-06T14:00:00+02:00", End: "2026-05-06T15:00:00+02:00"})
			return err
		}},
		{"recurring update", func() error {
			_, err := e.w.UpdateEvent(ctx, UpdateEventParams{UID: e.weekly, OccurrenceStart: "2026-05-11T09:00:00+02:00", Title: ptr("x")})
			return err
		}},
		{"future-scope delete", func() error {
			_, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: e.weekly, OccurrenceStart: "2026-05-11T09:00:00+02:00", Scope: ScopeFutureEvents})
			return err
		}},
	} {
		err := tc.call()
		if CodeOf(err) != CodeEventKitUnavailable {
			t.Errorf("%s: err = %v, want %s", tc.name, err, CodeEventKitUnavailable)
		}
	}
	if n := len(e.script.ran()); n != 0 {
		t.Errorf("%d scripts ran", n)
	}
	if ops, _ := e.journal.List(ctx, writeops.Filter{}); len(ops) != 0 {
		t.Errorf("refused writes were journaled: %d", len(ops))
	}
}

// A script's own refusal (error 7001) is a failed write; any other error
// leaves the outcome unknown.
func TestAppleScriptErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want writeops.State
	}{
		{&osascript.Error{Message: "event LUNCH-1 is not in calendar Work; nothing was changed", Number: 7001}, writeops.StateFailed},
		{&osascript.Error{Message: "Calendar got an error: AppleEvent timed out.", Number: -1712}, writeops.StateUnknown},
	} {
		e := newAppleWriteEnv(t, nil)
		e.script.err = tc.err
		res, err := e.w.DeleteEvent(context.Background(), DeleteEventParams{UID: e.lunch})
		if err != nil || res.State != string(tc.want) || !strings.Contains(e.op(res.OperationID).Error, tc.err.(*osascript.Error).Message) {
			t.Errorf("%v: %+v, %v", tc.err, res, err)
		}
	}
}

// With the launcher's bridge, writes go to EventKit by calendar id (a
// duplicated title is no obstacle) and never fall back to AppleScript.
func TestEventKitBridge(t *testing.T) {
	dir := t.TempDir()
	type seen struct {
		op      string
		payload EventKitPayload
	}
	got := make(chan seen, 10)
	answer := make(chan *ekbridge.Response, 10)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() { // the launcher's side, on the real folders
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			entries, _ := os.ReadDir(filepath.Join(dir, ekbridge.Requests))
			for _, en := range entries {
				if strings.HasPrefix(en.Name(), ".") {
					continue
				}
				claimed := filepath.Join(dir, ekbridge.Processing, en.Name())
				if os.Rename(filepath.Join(dir, ekbridge.Requests, en.Name()), claimed) != nil {
					continue
				}
				data, _ := os.ReadFile(claimed)
				var req ekbridge.Request
				json.Unmarshal(data, &req)
				var p EventKitPayload
				json.Unmarshal(req.Payload, &p)
				got <- seen{req.Operation, p}
				resp := <-answer
				if resp == nil {
					continue // claimed, never answered
				}
				resp.ID = req.ID
				b, _ := json.Marshal(resp)
				os.WriteFile(filepath.Join(dir, ekbridge.Responses, "."+en.Name()), b, 0o600)
				os.Rename(filepath.Join(dir, ekbridge.Responses, "."+en.Name()), filepath.Join(dir, ekbridge.Responses, en.Name()))
			}
		}
	}()
	e := newAppleWriteEnv(t, &ekbridge.Client{Dir: dir, Timeout: time.Second})
	ctx := context.Background()

	answer <- &ekbridge.Response{OK: true, Result: json.RawMessage(`{"uid":"EK-NEW"}`)}
	res, err := e.w.CreateEvent(ctx, CreateEventParams{CalendarID: "CAL-HOME", Title: "Plumber", Start: "2026-05-06T14:00:00+02:00",
		End: "2026-05-06T15:00:00+02:00", Recurrence: "FREQ=MONTHLY;BYDAY=1MO"})
	if err != nil || res.Backend != BackendEventKit || res.UID != "EK-NEW" || res.State != string(writeops.StateReturned) {
		t.Fatalf("create: %+v, %v", res, err)
	}
	s := <-got
	if s.op != "create" || s.payload.CalendarID != "CAL-HOME" || *s.payload.Fields.Title != "Plumber" || *s.payload.Fields.Start != "2026-05-06T14:00:00+02:00" ||
		*s.payload.Fields.RRule != "FREQ=MONTHLY;BYDAY=1MO" {
		t.Errorf("request %+v", s)
	}

	answer <- &ekbridge.Response{OK: true}
	res, err = e.w.UpdateEvent(ctx, UpdateEventParams{UID: e.weekly, OccurrenceStart: "2026-05-11T09:00:00+02:00", Scope: ScopeFutureEvents, Title: ptr("Weekly v2")})
	if err != nil || res.State != string(writeops.StateReturned) {
		t.Fatalf("recurring update: %+v, %v", res, err)
	}
	if s = <-got; s.op != "update" || s.payload.UID != "WEEKLY-1" || s.payload.Scope != ScopeFutureEvents || s.payload.OccurrenceStart != "2026-05-11T07:00:00Z" {
		t.Errorf("request %+v", s)
	}

	answer <- &ekbridge.Response{Error: &ekbridge.ResponseError{Code: CodeFullAccessRequired, Message: "Calendar access is write-only", NotExecuted: true}}
	res, _ = e.w.DeleteEvent(ctx, DeleteEventParams{UID: e.lunch})
	<-got
	if op := e.op(res.OperationID); op.State != writeops.StateFailed || !strings.Contains(op.Error, CodeFullAccessRequired) {
		t.Errorf("full access refused: %s %q", op.State, op.Error)
	}

	answer <- &ekbridge.Response{OutcomeUnknown: true} // the launcher restarted mid-request
	res, _ = e.w.DeleteEvent(ctx, DeleteEventParams{UID: e.lunch})
	<-got
	if op := e.op(res.OperationID); op.State != writeops.StateUnknown || !strings.Contains(op.Error, "restarted") {
		t.Errorf("outcomeUnknown: %s %q", op.State, op.Error)
	}

	answer <- nil // the launcher claims the request and never answers
	res, _ = e.w.DeleteEvent(ctx, DeleteEventParams{UID: e.lunch})
	<-got
	if op := e.op(res.OperationID); op.State != writeops.StateUnknown || !strings.Contains(op.Error, "outcome is unknown") {
		t.Errorf("unanswered: %s %q", op.State, op.Error)
	}
	if n := len(e.script.ran()); n != 0 {
		t.Errorf("the bridge path fell back to AppleScript %d times", n)
	}
}

// Calendar.app returned no UID: the create is confirmed by exactly one
// matching event in the calendar after a later sync, and not by two.
func TestAppleCreateWithoutUIDNeedsOneCandidate(t *testing.T) {
	e := newAppleWriteEnv(t, nil)
	e.script.out = ""
	p := CreateEventParams{CalendarID: "CAL-WORK", Title: "Dentist", Start: "2026-05-06T14:00:00+02:00", End: "2026-05-06T15:00:00+02:00"}
	res, err := e.w.CreateEvent(context.Background(), p)
	if err != nil || res.UID != "" {
		t.Fatalf("create: %+v %v", res, err)
	}
	start := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	// What Calendar.app stored.
	e.apple.event(appleEvent{Summary: "Dentist", UID: "CAL-ASSIGNED-1", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 2})
	e.sync()
	if op := e.reconcile(res.OperationID); op.State != writeops.StateConfirmed {
		t.Fatalf("one candidate: %s %q", op.State, op.Note)
	}
	res, _ = e.w.CreateEvent(context.Background(), p)
	e.apple.event(appleEvent{Summary: "Dentist", UID: "CAL-ASSIGNED-2", Start: start, End: start.Add(time.Hour), TZ: "Europe/Rome", Calendar: 2})
	e.sync()
	if op := e.reconcile(res.OperationID); op.State == writeops.StateConfirmed || !strings.Contains(op.Note, "2 candidate events") {
		t.Errorf("two candidates: %s %q", op.State, op.Note)
	}
}
