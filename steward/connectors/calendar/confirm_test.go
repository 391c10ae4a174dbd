package calendar

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/writeops"
)

// rewrite edits an event file the way another client or a server would.
func (e *writeEnv) rewrite(cal, uid, old, new string) {
	e.t.Helper()
	p := filepath.Join(e.root, cal, uid+".ics")
	b, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		e.t.Fatalf("%s does not contain %q:\n%s", p, old, b)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *writeEnv) create(p CreateEventParams) *WriteResult {
	e.t.Helper()
	res, err := e.w.CreateEvent(context.Background(), p)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

var dentist = CreateEventParams{CalendarID: "personal", Title: "Dentist", Start: "2026-05-04T09:00:00+02:00", End: "2026-05-04T10:00:00+02:00"}

// Evidence only comes from a sync that started after the write completed.
func TestConfirmationWaitsForALaterSync(t *testing.T) {
	e := newWriteEnv(t)
	e.sync() // before the write
	res := e.create(dentist)
	op := e.reconcile(res.OperationID)
	if op.State != writeops.StateReturned || op.ConfirmAttempts != 1 || !strings.Contains(op.Note, "waiting for a calendar sync that starts after the write") {
		t.Fatalf("before a later sync: %s, %d attempts, %q", op.State, op.ConfirmAttempts, op.Note)
	}
	e.confirm(res)
}

// A delete is confirmed by absence only when the event was indexed before
// the write; without that baseline the checks run out.
func TestDeleteWithoutBaselineExhausts(t *testing.T) {
	e := newWriteEnv(t)
	ctx := context.Background()
	res := e.create(dentist)
	del, err := e.w.DeleteEvent(ctx, DeleteEventParams{UID: res.UID}) // not indexed yet
	if err != nil {
		t.Fatal(err)
	}
	e.sync()
	var op writeops.Operation
	for i := 0; i < writeops.DefaultMaxConfirmAttempts; i++ {
		op = e.reconcile(del.OperationID)
	}
	if op.State != writeops.StateRetryExhausted || !strings.Contains(op.Note, "no pre-write baseline") {
		t.Fatalf("delete without baseline: %s, %q", op.State, op.Note)
	}
}

// A partial sync (a file it could not read) is not evidence of deletion.
func TestPartialSyncIsNoEvidenceOfDeletion(t *testing.T) {
	e := newWriteEnv(t)
	res := e.create(dentist)
	e.confirm(res)
	del, err := e.w.DeleteEvent(context.Background(), DeleteEventParams{UID: res.UID})
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(e.root, "work", "broken.ics")
	os.WriteFile(bad, []byte("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\n"), 0o644)
	if rep := e.sync(); rep.Complete {
		t.Fatal("the sync should be partial")
	}
	if op := e.reconcile(del.OperationID); op.State == writeops.StateConfirmed || !strings.Contains(op.Note, "partial") {
		t.Fatalf("after a partial sync: %s, %q", op.State, op.Note)
	}
	os.Remove(bad)
	e.confirm(del)
}

// A server that changes the event's UID after the write: the sync records
// the old UID as an alias and confirmation finds the event through it.
func TestConfirmationResolvesUIDAliases(t *testing.T) {
	e := newWriteEnv(t)
	res := e.create(dentist)
	e.confirm(res)
	upd, err := e.w.UpdateEvent(context.Background(), UpdateEventParams{UID: res.UID, Location: ptr("Studio Bianchi")})
	if err != nil {
		t.Fatal(err)
	}
	e.rewrite("personal", res.UID, "UID:"+res.UID, "UID:server-assigned-1")
	e.confirm(upd)
	var ev Evidence
	op, _ := e.journal.Get(context.Background(), upd.OperationID)
	if err := json.Unmarshal(op.Evidence, &ev); err != nil || ev.Ref == "" || !strings.Contains(strings.Join(ev.Matched, ","), "location") {
		t.Errorf("evidence %s", op.Evidence)
	}
	// Later writes name the event by the old UID too.
	if _, err := e.w.UpdateEvent(context.Background(), UpdateEventParams{UID: res.UID, Title: ptr("Dentist (Bianchi)")}); err != nil {
		t.Errorf("update through the alias: %v", err)
	}
}

// What the index shows must match what was written: another change in
// between leaves the write unconfirmed, with the difference as evidence.
func TestConfirmationComparesFields(t *testing.T) {
	e := newWriteEnv(t)
	res := e.create(dentist)
	e.rewrite("personal", res.UID, "SUMMARY:Dentist", "SUMMARY:Dentist?")
	e.sync()
	op := e.reconcile(res.OperationID)
	if op.State == writeops.StateConfirmed || !strings.Contains(op.Note, `title is "Dentist?", expected "Dentist"`) {
		t.Fatalf("changed title: %s, %q", op.State, op.Note)
	}
}

// Rules compare canonically: a server writing the same rule in another
// order confirms; a different interval does not.
func TestConfirmationComparesRulesCanonically(t *testing.T) {
	for _, tc := range []struct {
		written string
		ok      bool
	}{
		{"RRULE:BYDAY=MO;FREQ=WEEKLY;INTERVAL=1", true},
		{"RRULE:FREQ=WEEKLY;BYDAY=MO;INTERVAL=2", false},
	} {
		e := newWriteEnv(t)
		p := dentist
		p.Recurrence = "FREQ=WEEKLY;BYDAY=MO"
		res := e.create(p)
		e.rewrite("personal", res.UID, "RRULE:FREQ=WEEKLY;BYDAY=MO", tc.written)
		e.sync()
		if op := e.reconcile(res.OperationID); (op.State == writeops.StateConfirmed) != tc.ok {
			t.Errorf("%s: %s, %q", tc.written, op.State, op.Note)
		}
	}
}
