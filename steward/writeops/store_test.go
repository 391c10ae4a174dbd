package writeops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type auditSink struct {
	mu     sync.Mutex
	events []audit.Event
}

func (a *auditSink) Record(_ context.Context, e audit.Event) {
	a.mu.Lock()
	a.events = append(a.events, e)
	a.mu.Unlock()
}

func (a *auditSink) types(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.events {
		if e.Correlation == id {
			out = append(out, e.Type)
		}
	}
	return out
}

func openTest(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type mailInput struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Body    string   `json:"body"`
}

func TestExecuteOutcomes(t *testing.T) {
	ctx := context.Background()
	sink := &auditSink{}
	s := openTest(t, filepath.Join(t.TempDir(), "ops.db"), Options{Audit: sink})
	in := mailInput{To: []string{"a@example.com"}, Subject: "Hi", Body: "full body kept"}
	cases := []struct {
		name  string
		err   error
		state State
		event string
	}{
		{"returned", nil, StateReturned, "writeop.returned"},
		{"definite failure", NotDone(errors.New("535 authentication failed")), StateFailed, "writeop.failed"},
		{"ambiguous", errors.New("connection reset during DATA"), StateUnknown, "writeop.unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sawStarted bool
			op, err := s.Execute(ctx, NewOperation{Kind: KindMailSend, Summary: "mail", Input: in, Origin: "chat:c1"},
				ExecutorFunc(func(ctx context.Context, op Operation) (any, error) {
					// The row is journaled before the backend runs.
					got, gerr := s.Get(ctx, op.ID)
					sawStarted = gerr == nil && got.State == StateStarted && got.Attempts == 1 && !got.AttemptedAt.IsZero()
					return map[string]string{"messageId": "<x@example.com>"}, tc.err
				}))
			if (err != nil) != (tc.err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !sawStarted {
				t.Fatal("operation was not journaled as started before the backend ran")
			}
			if op.State != tc.state {
				t.Fatalf("state = %s, want %s", op.State, tc.state)
			}
			var back mailInput
			if err := op.Decode(&back); err != nil || back.Body != in.Body {
				t.Fatalf("input not kept whole: %+v %v", back, err)
			}
			if tc.err != nil && op.Error != tc.err.Error() {
				t.Fatalf("error = %q", op.Error)
			}
			if string(op.Result) != `{"messageId":"<x@example.com>"}` {
				t.Fatalf("result = %s", op.Result)
			}
			if got := sink.types(op.ID); len(got) != 2 || got[0] != "writeop.started" || got[1] != tc.event {
				t.Fatalf("audit = %v", got)
			}
		})
	}
}

func TestClaimDueOnlyOnce(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "ops.db")
	s := openTest(t, path, Options{Now: clk.Now})
	const rows = 200
	for i := range rows {
		at := clk.Now().Add(time.Duration(i%3-1) * time.Minute) // a third are in the future
		if _, err := s.Schedule(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: fmt.Sprint(i)}}, at); err != nil {
			t.Fatal(err)
		}
	}
	// Four stores on the same file, as four processes would be.
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		st := openTest(t, path, Options{Now: clk.Now, BusyTimeout: time.Minute})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				op, ok, err := st.ClaimDue(ctx, clk.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed[op.ID]++
				mu.Unlock()
				if op.State != StateStarted || op.Attempts != 1 || op.AttemptedAt.IsZero() {
					t.Errorf("claimed row %+v", op)
				}
			}
		}()
	}
	wg.Wait()
	due := 0
	for i := range rows {
		if i%3 != 2 {
			due++
		}
	}
	if len(claimed) != due {
		t.Fatalf("claimed %d rows, want %d", len(claimed), due)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
	stats, _ := s.Stats(ctx)
	if stats[StateScheduled] != rows-due {
		t.Fatalf("stats %v", stats)
	}
}

func TestReconcileLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	sink := &auditSink{}
	s := openTest(t, filepath.Join(t.TempDir(), "ops.db"), Options{Now: clk.Now, Audit: sink,
		MaxConfirmAttempts: map[Domain]int{DomainMail: 3, DomainCalendar: 2}})

	mailOp, _ := s.Execute(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "a"}}, ExecutorFunc(func(context.Context, Operation) (any, error) { return nil, nil }))
	calOp, _ := s.Execute(ctx, NewOperation{Kind: KindCalendarCreate, Input: map[string]string{"title": "x"}}, ExecutorFunc(func(context.Context, Operation) (any, error) { return nil, errors.New("timeout") }))
	// A caller that crashed after Begin leaves a started row.
	crashed, _ := s.Begin(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "crashed"}})
	later, _ := s.Schedule(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "later"}}, clk.Now().Add(time.Hour))

	found := map[string]bool{}
	confirmers := map[Kind]Confirmer{
		KindMailSend: ConfirmerFunc(func(_ context.Context, op Operation) (Check, error) {
			if found[op.ID] {
				return Check{Confirmed: true, Evidence: map[string]string{"message": "m1"}}, nil
			}
			return Check{Note: "no matching Sent message"}, nil
		}),
		KindCalendarCreate: ConfirmerFunc(func(context.Context, Operation) (Check, error) {
			return Check{}, errors.New("index unavailable")
		}),
	}
	rep, err := s.Reconcile(ctx, DomainMail, confirmers, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The fresh started row is not yet eligible; the scheduled one never is.
	if rep.Checked != 1 || rep.Missed != 1 {
		t.Fatalf("first pass %+v", rep)
	}
	lost, _ := s.Begin(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "lost"}})
	clk.Add(DefaultStaleStarted)
	found[crashed.ID] = true
	rep, _ = s.Reconcile(ctx, DomainMail, confirmers, 0)
	if rep.Checked != 3 || rep.Confirmed != 1 || rep.IDs[0] != crashed.ID {
		t.Fatalf("second pass %+v", rep)
	}
	// A stale started row without evidence becomes unknown, never scheduled again.
	if g, _ := s.Get(ctx, lost.ID); g.State != StateUnknown || g.Error != "the process executing it stopped before recording the outcome" || g.Attempts != 1 {
		t.Fatalf("lost row %+v", g)
	}
	got, _ := s.Get(ctx, crashed.ID)
	if got.State != StateConfirmed || string(got.Evidence) != `{"message":"m1"}` || got.ConfirmedAt.IsZero() {
		t.Fatalf("crashed row %+v", got)
	}
	s.Reconcile(ctx, DomainMail, confirmers, 0)
	got, _ = s.Get(ctx, mailOp.ID)
	if got.State != StateNeedsReview || got.ConfirmAttempts != 3 || got.Note != "no matching Sent message" {
		t.Fatalf("mail row after limit %+v", got)
	}
	rep, _ = s.Reconcile(ctx, DomainMail, confirmers, 0)
	if rep.Checked != 1 || rep.Terminal != 1 {
		t.Fatalf("only the lost row is left, and it reaches the limit: %+v", rep)
	}
	rep, _ = s.Reconcile(ctx, DomainMail, confirmers, 0)
	if rep.Checked != 0 {
		t.Fatalf("terminal rows checked again: %+v", rep)
	}
	for range 2 {
		s.Reconcile(ctx, DomainCalendar, confirmers, 0)
	}
	got, _ = s.Get(ctx, calOp.ID)
	if got.State != StateRetryExhausted || got.ConfirmAttempts != 2 {
		t.Fatalf("calendar row %+v", got)
	}
	if got.Error != "timeout" || got.Note != "confirmation check failed: index unavailable" {
		t.Fatalf("calendar error %q, note %q", got.Error, got.Note)
	}
	if g, _ := s.Get(ctx, later.ID); g.State != StateScheduled || g.Attempts != 0 {
		t.Fatalf("scheduled row touched: %+v", g)
	}
	if ev := sink.types(mailOp.ID); fmt.Sprint(ev) != "[writeop.started writeop.returned writeop.retried writeop.retried writeop.needs_review]" {
		t.Fatalf("mail audit %v", ev)
	}
	if ev := sink.types(crashed.ID); fmt.Sprint(ev) != "[writeop.started writeop.confirmed]" {
		t.Fatalf("crashed audit %v", ev)
	}
}

func TestSendDueAndCancel(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	s := openTest(t, filepath.Join(t.TempDir(), "ops.db"), Options{Now: clk.Now})
	a, _ := s.Schedule(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "a"}}, clk.Now().Add(time.Minute))
	b, _ := s.Schedule(ctx, NewOperation{Kind: KindMailReply, Input: mailInput{Subject: "b"}}, clk.Now().Add(2*time.Minute))
	c, _ := s.Schedule(ctx, NewOperation{Kind: KindMailSend, Input: mailInput{Subject: "c"}}, clk.Now().Add(3*time.Minute))
	if err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	sent := []string{}
	ex := ExecutorFunc(func(_ context.Context, op Operation) (any, error) {
		var in mailInput
		op.Decode(&in)
		sent = append(sent, in.Subject)
		return nil, nil
	})
	rep, err := s.SendDue(ctx, map[Kind]Executor{KindMailSend: ex}, 0)
	if err != nil || rep.Claimed != 0 {
		t.Fatalf("nothing is due yet: %+v %v", rep, err)
	}
	clk.Add(5 * time.Minute)
	rep, err = s.SendDue(ctx, map[Kind]Executor{KindMailSend: ex}, 0)
	if err != nil || rep.Claimed != 2 || rep.Returned != 1 || rep.Failed != 1 {
		t.Fatalf("due pass %+v %v", rep, err)
	}
	if fmt.Sprint(sent) != "[a]" {
		t.Fatalf("sent %v", sent)
	}
	if g, _ := s.Get(ctx, b.ID); g.State != StateFailed || g.Error != "no executor for mail.reply" {
		t.Fatalf("row without executor %+v", g)
	}
	if g, _ := s.Get(ctx, a.ID); g.AttemptedAt != clk.Now() {
		t.Fatalf("attempted_at %v, want the execution time %v", g.AttemptedAt, clk.Now())
	}
	if err := s.Cancel(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel of a started row: %v", err)
	}
	if _, err := s.Get(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancelled row still there: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "ops.db"), Options{})
	if _, err := s.Begin(ctx, NewOperation{Kind: "send", Input: 1}); err == nil {
		t.Fatal("kind without domain accepted")
	}
	if _, err := s.Begin(ctx, NewOperation{Kind: KindMailSend}); err == nil {
		t.Fatal("missing input accepted")
	}
	if _, err := s.Schedule(ctx, NewOperation{Kind: KindMailSend, Input: 1}, time.Time{}); err == nil {
		t.Fatal("schedule without time accepted")
	}
	if ops, _ := s.List(ctx, Filter{}); len(ops) != 0 {
		t.Fatalf("bad input left rows: %v", ops)
	}
}
