package watch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentstack/agentstack/steward/push"
)

func TestMatchingWhereAndOnce(t *testing.T) {
	r := newRig(t)
	r.deliver.busy["chat_1"] = true // keep events pending: once must hold before delivery
	r.open()
	r.adapter.set("x", "platform", "6", "stop", map[string]any{"name": "A", "pos": -2.0}, "delay", 0.0)
	w := r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{
		{ID: "p7", Event: "fake.platform", Where: map[string]any{"value": "7"}},
		{ID: "penultimate", Event: "fake.stop", Where: map[string]any{"pos": -1, "value.name": "B"}},
		{ID: "late", Event: "fake.delay", Once: true},
	}})

	r.adapter.set("x", "platform", "8") // p7 does not match 8
	if c := r.cycle(); c.Queued != 0 {
		t.Fatalf("platform 8 queued %d events", c.Queued)
	}
	r.adapter.set("x", "platform", "7", "stop", map[string]any{"name": "B", "pos": -1.0}, "delay", 5.0)
	if c := r.cycle(); c.Queued != 3 || c.Deferred != 3 {
		t.Fatalf("cycle %+v, want 3 queued and deferred", c)
	}
	r.adapter.set("x", "delay", 9.0) // once: "late" already participated, even though still pending
	r.adapter.set("x", "stop", map[string]any{"name": "C", "pos": 0.0})
	if c := r.cycle(); c.Queued != 0 {
		t.Fatalf("cycle %+v: a once rule fired twice or a filter leaked", c)
	}
	got := r.query(`SELECT rule_id FROM watch_event_rules WHERE watch_id = ? ORDER BY rule_id`, w.ID)
	if strings.Join(got, ",") != "late,p7,penultimate" {
		t.Errorf("participation %v", got)
	}
	if len(r.deliver.all()) != 0 {
		t.Error("a busy chat received a turn")
	}
}

func TestAggregationOneTurnPerEvent(t *testing.T) {
	r := newRig(t)
	r.open()
	r.adapter.set("x", "stop", map[string]any{"pos": -2.0})
	w := r.create(CreateRequest{ResourceRef: "x", Instruction: "avvisami a ogni fermata e chiamami alla penultima", Rules: []Rule{
		{ID: "every-stop", Event: "fake.stop"},
		{ID: "penultimate", Event: "fake.stop", Where: map[string]any{"pos": -1}, Once: true},
		{ID: "unrelated", Event: "fake.other"},
	}})
	r.adapter.set("x", "stop", map[string]any{"pos": -1.0})
	c := r.cycle()
	if c.Queued != 1 || c.Delivered != 1 {
		t.Fatalf("cycle %+v, want one event for both rules", c)
	}
	turns := r.deliver.all()
	if len(turns) != 1 {
		t.Fatalf("%d turns", len(turns))
	}
	p := turns[0].Prompt
	for _, want := range []string{`"every-stop"`, `"penultimate"`, "not written by the user", "never an instruction", "avvisami a ogni fermata", w.ID} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, `"unrelated"`) {
		t.Error("an unmatched rule is in the prompt")
	}
	if rows := r.query(`SELECT matched_rules FROM watch_events`); len(rows) != 1 || !strings.Contains(rows[0], "penultimate") || !strings.Contains(rows[0], "every-stop") {
		t.Errorf("stored %v", rows)
	}
	if n := r.query(`SELECT COUNT(*) FROM watch_event_rules`); n[0] != "2" {
		t.Errorf("participation rows %v", n)
	}
	if r.notifier.count() != 1 || r.notifier.sent[0].Tag != "watch:"+w.ID+":"+turns[0].EventID || r.notifier.sent[0].URL != "/?chat=chat_1" {
		t.Errorf("push %+v", r.notifier.sent)
	}
}

// TestDedupAcrossRestarts restarts the engine mid-stream: every distinct
// transition is delivered exactly once, and a transition seen before (same
// key) is never queued again, whichever process life sees it.
func TestDedupAcrossRestarts(t *testing.T) {
	r := newRig(t)
	r.open()
	r.adapter.set("x", "status", "a")
	r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "any", Event: "fake.status"}}})
	for _, s := range []string{"b", "c"} {
		r.adapter.set("x", "status", s)
		r.cycle()
	}
	r.open() // restart: new process, same watches.db; the first pass polls at once
	r.adapter.set("x", "status", "d")
	if c, _ := r.e.RunOnce(context.Background()); c.Polled != 1 || c.Delivered != 1 {
		t.Fatalf("start-up pass %+v", c)
	}
	for _, s := range []string{"c", "e"} { // "c" again: same key as before the restart
		r.adapter.set("x", "status", s)
		r.cycle()
	}
	r.open()
	r.cycle() // nothing new
	var got []string
	for _, turn := range r.deliver.all() {
		got = append(got, turn.EventID)
	}
	keys := r.query(`SELECT event_key FROM watch_events ORDER BY rowid`)
	if len(got) != 4 || len(keys) != 4 {
		t.Fatalf("turns %d, events %v", len(got), keys)
	}
	for i, s := range []string{"b", "c", "d", "e"} {
		if !strings.HasSuffix(keys[i], `:status:"`+s+`"`) {
			t.Errorf("event %d key %s", i, keys[i])
		}
	}
}

func TestExpiryAndTerminal(t *testing.T) {
	r := newRig(t)
	r.open()
	r.adapter.set("short", "v", 1.0)
	r.adapter.set("ends", "v", 1.0)
	short := r.create(CreateRequest{ResourceRef: "short", ExpiresAt: t0.Add(30 * time.Second), Rules: []Rule{{ID: "v", Event: "fake.v"}}})
	ends := r.create(CreateRequest{ResourceRef: "ends", Rules: []Rule{{ID: "done", Event: "fake.done"}}})

	r.adapter.set("ends", "done", true)
	reads := r.adapter.readsOf("short")
	c := r.cycle()
	if c.Expired != 1 || c.Completed != 1 || c.Queued != 1 || c.Delivered != 1 {
		t.Fatalf("cycle %+v", c)
	}
	if r.adapter.readsOf("short") != reads {
		t.Error("an expired watch was polled")
	}
	for id, want := range map[string]string{short.ID: StatusExpired, ends.ID: StatusCompleted} {
		if w, _ := r.e.Get(context.Background(), id); w.Status != want || w.EndedAt.IsZero() {
			t.Errorf("%s: %s, want %s", id, w.Status, want)
		}
	}
	// The final event was queued and delivered although the watch completed.
	if turns := r.deliver.all(); len(turns) != 1 || !strings.Contains(turns[0].Prompt, "fake.done") {
		t.Errorf("final event not delivered: %+v", turns)
	}
	r.adapter.set("ends", "v", 2.0)
	if c := r.cycle(); c.Polled != 0 {
		t.Errorf("ended watches polled: %+v", c)
	}
	if !strings.Contains(r.life.types(), "watch.expired") || !strings.Contains(r.life.types(), "watch.completed") {
		t.Errorf("lifecycle %s", r.life.types())
	}
	// Stopping is idempotent and only moves active watches.
	if s, err := r.e.Stop(context.Background(), ends.ID); err != nil || s != StatusCompleted {
		t.Errorf("stop of a completed watch: %s %v", s, err)
	}
	if _, err := r.e.Stop(context.Background(), "w_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown watch: %v", err)
	}
}

func TestPollFailureKeepsSnapshot(t *testing.T) {
	r := newRig(t)
	r.open()
	r.adapter.set("x", "v", 1.0)
	w := r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "fake.v"}}})
	r.adapter.fail("x", errors.New("ViaggiaTreno is unreachable"))
	r.adapter.set("x", "v", 2.0)
	r.cycle()
	r.cycle()
	got, _ := r.e.Get(context.Background(), w.ID)
	if got.LastError != "ViaggiaTreno is unreachable" || got.Status != StatusActive || !strings.Contains(string(got.Snapshot), `"v":1`) {
		t.Fatalf("after failures: %+v", got)
	}
	if n := strings.Count(r.life.types(), "watch.poll_failed"); n != 1 {
		t.Errorf("poll failure reported %d times, want once", n)
	}
	r.adapter.fail("x", nil)
	if c := r.cycle(); c.Queued != 1 {
		t.Fatalf("recovery did not diff from the last known state: %+v", c)
	}
	if got, _ = r.e.Get(context.Background(), w.ID); got.LastError != "" {
		t.Errorf("error not cleared: %q", got.LastError)
	}
}

func TestPollFloorAndUrgency(t *testing.T) {
	r := newRig(t)
	tests := []struct {
		name     string
		base     time.Duration
		urgentMs float64
		want     time.Duration
	}{
		{"default base", 0, 0, 45 * time.Second},
		{"configured base below the 15 s floor", time.Second, 0, 15 * time.Second},
		{"configured base", 20 * time.Second, 0, 20 * time.Second},
		{"urgency", 0, 10_000, 10 * time.Second},
		{"urgency below the 5 s floor", 0, 1_000, 5 * time.Second},
		{"urgency longer than base", 20 * time.Second, 30_000, 20 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.path = t.TempDir() + "/w.db"
			e := r.open(func(o *Options) { o.PollInterval = tc.base })
			r.adapter.set(tc.name, "urgentMs", tc.urgentMs)
			r.create(CreateRequest{ResourceRef: tc.name, Rules: []Rule{{ID: "v", Event: "fake.v"}}})
			if got := e.NextWake(); got != tc.want {
				t.Errorf("next wake %v, want %v", got, tc.want)
			}
		})
	}

	// The loop: an immediate pass at start-up, then sleeps of NextWake;
	// overlapping passes are refused.
	r.path = t.TempDir() + "/loop.db"
	e := r.open()
	r.adapter.set("loop", "urgentMs", 8000.0)
	r.create(CreateRequest{ResourceRef: "loop", Rules: []Rule{{ID: "v", Event: "fake.v"}}})
	reads := r.adapter.readsOf("loop")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	select {
	case d := <-r.clock.requested:
		if d != 8*time.Second {
			t.Errorf("first sleep %v, want the urgent 8 s", d)
		}
	case <-time.After(hangGuard):
		t.Fatal("the loop never slept")
	}
	if r.adapter.readsOf("loop") != reads {
		t.Error("the start-up pass polled a watch that was not due")
	}
	r.clock.Advance(8 * time.Second)
	r.clock.release <- r.clock.Now()
	select {
	case <-r.clock.requested:
	case <-time.After(hangGuard):
		t.Fatal("no second pass")
	}
	if r.adapter.readsOf("loop") != reads+1 {
		t.Errorf("the due watch was read %d times", r.adapter.readsOf("loop")-reads)
	}
	e.running.Lock() // a pass in progress
	if c, _ := e.RunOnce(context.Background()); !c.Skipped {
		t.Error("an overlapping pass ran")
	}
	e.running.Unlock()
	cancel()
	<-done
}

func TestBeforeTimeTrigger(t *testing.T) {
	r := newRig(t)
	r.open()
	eta := t0.Add(60 * time.Minute)
	r.adapter.set("x", "etaMs", float64(eta.UnixMilli()))
	w := r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{
		{ID: "mail-30m", Trigger: &Trigger{Kind: TriggerBeforeTime, Field: "etaMs", Minutes: 30}, Once: true}}})
	if got := r.e.NextWake(); got != 30*time.Minute && got != DefaultPollInterval {
		t.Errorf("next wake %v", got)
	}
	r.clock.Advance(20 * time.Minute) // 40 min before the ETA
	r.e.RunOnce(context.Background())
	// The ETA moves 15 minutes later: the deadline moves with it.
	eta = eta.Add(15 * time.Minute)
	r.adapter.set("x", "etaMs", float64(eta.UnixMilli()))
	r.clock.Advance(15 * time.Minute) // 40 min before the new ETA: nothing yet
	if c, _ := r.e.RunOnce(context.Background()); c.Queued != 0 {
		t.Fatalf("fired on the old deadline: %+v", c)
	}
	r.clock.Advance(11 * time.Minute) // 29 min before
	c, _ := r.e.RunOnce(context.Background())
	if c.Queued != 1 || c.Delivered != 1 {
		t.Fatalf("deadline passed: %+v", c)
	}
	if turns := r.deliver.all(); !strings.Contains(turns[0].Prompt, EventBeforeTime) || !strings.Contains(turns[0].Prompt, `"mail-30m"`) {
		t.Errorf("prompt %s", turns[0].Prompt)
	}
	if rows := r.query(`SELECT rule_id FROM watch_events WHERE watch_id = ?`, w.ID); len(rows) != 1 || rows[0] != "mail-30m" {
		t.Errorf("events %v", rows)
	}

	// A stale window after a restart sends nothing: the host was down
	// across the deadline and the target.
	r.adapter.set("y", "etaMs", float64(r.clock.Now().Add(60*time.Minute).UnixMilli()))
	r.create(CreateRequest{ResourceRef: "y", Rules: []Rule{{ID: "late", Trigger: &Trigger{Kind: TriggerBeforeTime, Field: "etaMs", Minutes: 30}}}})
	r.open()
	r.clock.Advance(2 * time.Hour)
	if c, _ := r.e.RunOnce(context.Background()); c.Queued != 0 {
		t.Errorf("a stale before_time fired: %+v", c)
	}
	if _, err := r.e.Create(context.Background(), CreateRequest{Source: "fake", ResourceRef: "y", Instruction: "x", ChatID: "c",
		Rules: []Rule{{ID: "t", Trigger: &Trigger{Kind: TriggerBeforeTime, Field: "nope", Minutes: 5}}}}); err == nil {
		t.Error("a trigger on a missing timestamp was accepted")
	}
}

func TestDeliveryFallbackAndPushRetry(t *testing.T) {
	r := newRig(t)
	r.deliver.failures = 2
	r.notifier.reports = []push.Report{{Attempted: 2, Failed: 2}, {Attempted: 2, Failed: 1, Pruned: 1, Delivered: 0}}
	r.open(func(o *Options) { o.Language = "it" })
	r.adapter.set("x", "v", 1.0)
	w := r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "fake.v"}}})
	r.adapter.set("x", "v", 2.0)

	r.cycle() // generation fails (1)
	r.cycle() // generation fails (2)
	if turns := r.deliver.all(); len(turns) != 2 || turns[1].Fallback != "" {
		t.Fatalf("turns %+v", turns)
	}
	r.cycle() // third pass: the adapter's fallback text; push fails everywhere
	turns := r.deliver.all()
	if len(turns) != 3 || turns[2].Fallback != "v is now 2" || turns[2].Tools != nil {
		t.Fatalf("third pass %+v", turns[2])
	}
	row := r.query(`SELECT status, notification_text, attempts, push_attempts FROM watch_events`)
	if row[0] != "pending|v is now 2|2|1" {
		t.Fatalf("after all-failed push: %v", row)
	}
	r.cycle() // retry: reuses the text, no new turn, push fails again
	r.cycle() // retry: delivered
	if n := len(r.deliver.all()); n != 3 {
		t.Errorf("the retry ran %d more turns", n-3)
	}
	if row = r.query(`SELECT status, push_attempts FROM watch_events`); row[0] != "delivered|2" {
		t.Errorf("final %v", row)
	}
	if r.notifier.count() != 3 || r.notifier.sent[2].Body != "v is now 2" || r.notifier.sent[2].Title != "Finto v" {
		t.Errorf("pushes %+v", r.notifier.sent)
	}
	for _, want := range []string{"watch.generation_failed", "watch.fallback_used", "watch.push_failed", "watch.delivered"} {
		if !strings.Contains(r.life.types(), want) {
			t.Errorf("lifecycle lacks %s: %s", want, r.life.types())
		}
	}
	_ = w
}

func TestBusyChatAndDeletedChat(t *testing.T) {
	r := newRig(t)
	r.deliver.busy["chat_1"] = true
	r.open()
	r.adapter.set("x", "v", 1.0)
	w := r.create(CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "fake.v"}}})
	r.adapter.set("x", "v", 2.0)
	c := r.cycle()
	if c.Deferred != 1 || c.Delivered != 0 || r.e.NextWake() != MinUrgentInterval {
		t.Fatalf("busy: %+v, next wake %v", c, r.e.NextWake())
	}
	if row := r.query(`SELECT attempts FROM watch_events`); row[0] != "0" {
		t.Errorf("a deferral counted as an attempt: %v", row)
	}
	// The interactive turn ends; the original chat was deleted meanwhile:
	// the host answers from its "Monitor automatici" chat.
	delete(r.deliver.busy, "chat_1")
	r.deliver.moveTo = "chat_monitor"
	r.clock.Advance(MinUrgentInterval)
	if c, _ = r.e.RunOnce(context.Background()); c.Delivered != 1 {
		t.Fatalf("after the turn: %+v", c)
	}
	got, _ := r.e.Get(context.Background(), w.ID)
	if got.ChatID != "chat_monitor" || r.notifier.sent[0].ChatID != "chat_monitor" {
		t.Errorf("watch chat %s, push chat %s", got.ChatID, r.notifier.sent[0].ChatID)
	}
}

func TestCreateValidation(t *testing.T) {
	r := newRig(t)
	r.caps, _ = NewRegistry(Capability{Tool: "test__notify", Allowed: []string{"to", "body"}, Required: []string{"to"}, ConstraintsRequired: true})
	r.open()
	r.adapter.set("x", "v", 1.0)
	r.adapter.set("done", "done", true)
	ok := []Rule{{ID: "v", Event: "fake.v"}}
	grant := []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "test__notify", Constraints: &Constraints{Fields: map[string]FieldConstraint{
		"to": {Kind: ConstraintExact, Value: "a@b.c"}}}}}}}
	tests := []struct {
		name string
		req  CreateRequest
		want string
	}{
		{"unknown source", CreateRequest{Source: "bus", ResourceRef: "x", Rules: ok}, "unknown watch source"},
		{"no rules", CreateRequest{ResourceRef: "x"}, "at least one rule"},
		{"event and trigger", CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "e", Trigger: &Trigger{Kind: TriggerBeforeTime, Field: "v", Minutes: 1}}}}, "exactly one"},
		{"duplicate ids", CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "a"}, {ID: "v", Event: "b"}}}, "unique"},
		{"bad where key", CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "a", Where: map[string]any{"a..b": 1}}}}, "dot path"},
		{"grants without approval", CreateRequest{ResourceRef: "x", Rules: grant}, "create_agent_watch"},
		{"unregistered tool", CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "mcp__mail__send_email"}}}}}, "not a registered watch capability"},
		{"unconstrained required field", CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "test__notify"}}}}}, "must be constrained"},
		{"field outside the capability", CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "test__notify", Constraints: &Constraints{Fields: map[string]FieldConstraint{
			"to": {Kind: ConstraintExact, Value: "a"}, "bcc": {Kind: ConstraintExact, Value: "x"}}}}}}}}, "not an argument"},
		{"template outside state/event", CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "test__notify", Constraints: &Constraints{Fields: map[string]FieldConstraint{
			"to": {Kind: ConstraintTemplate, Template: "{{secrets.key}}"}}}}}}}}, "state. or event."},
		{"too many invocations", CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "g", Event: "fake.v", Grants: []Grant{{Tool: "test__notify", MaxInvocations: 5, Constraints: &Constraints{Fields: map[string]FieldConstraint{
			"to": {Kind: ConstraintExact, Value: "a"}}}}}}}}, "maxInvocations"},
		{"continuation without grants", CreateRequest{ResourceRef: "x", Rules: []Rule{{ID: "v", Event: "a", Continuation: &Continuation{Outcomes: []string{"busy"}, AfterMinutes: 1, MaxAttempts: 2}}}}, "needs grants"},
		{"already final", CreateRequest{ResourceRef: "done", Rules: ok}, "final state"},
		{"past expiry", CreateRequest{ResourceRef: "x", Rules: ok, ExpiresAt: t0.Add(-time.Minute)}, "already past"},
		{"expiry too far", CreateRequest{ResourceRef: "x", Rules: ok, ExpiresAt: t0.Add(30 * 24 * time.Hour)}, "expires within"},
		{"unreadable resource", CreateRequest{ResourceRef: "missing", Rules: ok}, "initial state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req.Source == "" {
				req.Source = "fake"
			}
			req.Instruction, req.ChatID = "x", "chat_1"
			_, err := r.e.Create(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if ws, err := r.e.List(context.Background(), "", true); err != nil || len(ws) != 0 {
		t.Errorf("%d watches stored by refused requests (%v)", len(ws), err)
	}
}
