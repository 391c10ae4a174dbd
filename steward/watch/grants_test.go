package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
)

// sentMail is a fake write tool that counts real executions.
type sentMail struct {
	mu      sync.Mutex
	calls   []string
	outcome string
	onCall  func()
}

func (m *sentMail) tool(name string) agent.Tool {
	return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: name}, Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
		m.mu.Lock()
		m.calls = append(m.calls, string(args))
		hook, outcome := m.onCall, m.outcome
		m.mu.Unlock()
		if hook != nil {
			hook()
		}
		res := agent.ToolResult{Content: "sent"}
		if outcome != "" {
			res.Data, _ = json.Marshal(map[string]string{"outcome": outcome})
		}
		return res, nil
	}}
}

func (m *sentMail) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

func testCapability() Capability {
	return Capability{Tool: "test__send", Allowed: []string{"to", "subject", "body", "sendAt", "priority"}, Required: []string{"to", "body"},
		ConstraintsRequired: true, Mode: "direct", MaxInvocations: 3}
}

func sisterGrant(max int) Grant {
	lo, hi := 1.0, 3.0
	return Grant{Tool: "test__send", MaxInvocations: max, Constraints: &Constraints{DenyExtraFields: true, Fields: map[string]FieldConstraint{
		"to":       {Kind: ConstraintExact, Value: []any{"sorella@example.com"}},
		"subject":  {Kind: ConstraintOneOf, Values: []any{"Sto arrivando", "Arrivo"}},
		"body":     {Kind: ConstraintTemplate, Template: "Sto arrivando a {{state.to}}, evento {{event.value}}."},
		"sendAt":   {Kind: ConstraintRelativeTime, Base: "state.etaMs", OffsetMinutes: -30},
		"priority": {Kind: ConstraintRange, Min: &lo, Max: &hi},
	}}}
}

// callTool is what a model does: call a tool of the turn by name.
func callTool(t Turn, name, args string) (agent.ToolResult, bool) {
	for _, tl := range t.Tools {
		if tl.Spec().Name == name {
			res, err := tl.Call(context.Background(), json.RawMessage(args))
			if err != nil {
				return agent.ToolResult{Content: err.Error(), IsError: true}, true
			}
			return res, true
		}
	}
	return agent.ToolResult{}, false
}

func grantRig(t *testing.T, mail *sentMail) *rig {
	r := newRig(t)
	r.caps, _ = NewRegistry(testCapability())
	r.tools = []agent.Tool{mail.tool("test__send"), mail.tool("other__delete"), mail.tool("read_calendar"), mail.tool(ToolCreateWatch), mail.tool("ask_user")}
	r.open()
	eta := t0.Add(2 * time.Hour)
	r.adapter.set("x", "to", "Torino", "etaMs", float64(eta.UnixMilli()), "v", 1.0)
	return r
}

// TestGrantRunsExactlyOnceAcrossCrash: the granted action runs, the process
// dies before the delivery completes, the restarted engine delivers the
// event again — and the action is not executed a second time.
func TestGrantRunsExactlyOnceAcrossCrash(t *testing.T) {
	mail := &sentMail{}
	r := grantRig(t, mail)
	w := r.create(CreateRequest{ResourceRef: "x", Agent: true, Instruction: "scrivi a mia sorella quando cambia",
		Rules: []Rule{{ID: "mail", Event: "fake.v", Once: true, Grants: []Grant{sisterGrant(1)}}}})
	r.adapter.set("x", "v", 2.0)

	ctx, crash := context.WithCancel(context.Background())
	mail.onCall = crash // the process dies right after the external effect
	var results []string
	r.deliver.act = func(turn Turn) (string, error) {
		res, ok := callTool(turn, "test__send", `{"subject":"Sto arrivando"}`)
		if !ok {
			return "", fmt.Errorf("test__send is not in the turn")
		}
		results = append(results, res.Content)
		if len(results) == 1 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "Ho scritto a tua sorella.", nil
	}
	r.clock.Advance(DefaultPollInterval)
	if _, err := r.e.RunOnce(ctx); err == nil {
		t.Fatal("the crashed pass reported success")
	}
	if mail.count() != 1 {
		t.Fatalf("first life executed %d times", mail.count())
	}
	var sent map[string]any
	json.Unmarshal([]byte(mail.calls[0]), &sent)
	if sent["body"] != "Sto arrivando a Torino, evento 2." || sent["sendAt"] != t0.Add(90*time.Minute).Format(time.RFC3339) || fmt.Sprint(sent["to"]) != "[sorella@example.com]" {
		t.Errorf("frozen arguments %s", mail.calls[0])
	}

	mail.onCall = nil
	r.open() // restart
	c, err := r.e.RunOnce(context.Background())
	if err != nil || c.Delivered != 1 {
		t.Fatalf("retry pass %+v %v", c, err)
	}
	if mail.count() != 1 {
		t.Fatalf("the action ran %d times", mail.count())
	}
	if len(results) != 2 || !strings.HasPrefix(results[1], "NOT DONE: this action was already started") {
		t.Errorf("the retried turn saw %q", results)
	}
	claims := r.query(`SELECT action_key, rule_id, tool FROM watch_action_runs`)
	if len(claims) != 1 || !strings.HasSuffix(claims[0], ":mail:test__send|mail|test__send") {
		t.Errorf("claims %v", claims)
	}
	_ = w
}

func TestGrantConstraintsAndScope(t *testing.T) {
	mail := &sentMail{}
	r := grantRig(t, mail)
	r.create(CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{
		{ID: "mail", Event: "fake.v", Grants: []Grant{sisterGrant(2)}},
		{ID: "quiet", Event: "fake.other"},
	}})
	type call struct{ args, want string }
	var got []string
	var turnTools []string
	script := []call{
		{`{"bcc":"x@y.z"}`, "NOT DONE: these arguments are outside"},       // extra field
		{`{"to":["attacker@evil.com"]}`, "field to must be"},               // exact mismatch
		{`{"body":"Vieni a prendermi alle 3"}`, "field body must be"},      // template mismatch
		{`{"subject":"Ciao"}`, "field subject must be one of"},             // one_of
		{`{"priority":9}`, "approved range"},                               // range
		{`{"sendAt":"2026-11-30T09:00:00Z"}`, "field sendAt must be"},      // relative_time mismatch
		{`{"sendAt":"2026-11-30T10:30:00+01:00","priority":2}`, "sent"},    // equal instant, other offset
		{`{}`, "NOT DONE: this action was already started for this event"}, // same event: claimed
	}
	r.deliver.act = func(turn Turn) (string, error) {
		turnTools = nil
		for _, tl := range turn.Tools {
			turnTools = append(turnTools, tl.Spec().Name)
		}
		for _, c := range script {
			res, _ := callTool(turn, "test__send", c.args)
			got = append(got, res.Content)
		}
		return "ok", nil
	}
	r.adapter.set("x", "v", 2.0)
	r.cycle()
	if strings.Join(turnTools, ",") != "read_calendar,test__send" {
		t.Errorf("turn tools %v: want read-only tools plus the grant, never other writes or host tools", turnTools)
	}
	for i, c := range script {
		if !strings.Contains(got[i], c.want) {
			t.Errorf("call %s: %q, want %q", c.args, got[i], c.want)
		}
	}
	if mail.count() != 1 {
		t.Fatalf("executed %d times", mail.count())
	}

	// A second event may use the grant's second invocation; a third may not.
	script = []call{{`{}`, "sent"}}
	r.adapter.set("x", "v", 3.0)
	r.cycle()
	script = []call{{`{}`, "of test__send for this rule are used up"}}
	got = nil
	r.adapter.set("x", "v", 4.0)
	r.cycle()
	if mail.count() != 2 || !strings.Contains(got[0], script[0].want) {
		t.Errorf("invocation limit: %d executions, last %q", mail.count(), got)
	}

	// An event matching only an ungranted rule gets no write tool at all.
	r.adapter.set("x", "other", 1.0)
	r.cycle()
	if strings.Join(turnTools, ",") != "read_calendar" {
		t.Errorf("ungranted event tools %v", turnTools)
	}
}

func TestCheckArgsTemplateNeedsState(t *testing.T) {
	g := Grant{Tool: "test__send", Constraints: &Constraints{Fields: map[string]FieldConstraint{
		"to":   {Kind: ConstraintExact, Value: "a@b.c"},
		"body": {Kind: ConstraintTemplate, Template: "Arrivo alle {{state.eta}}"},
	}}}
	_, err := checkArgs(testCapability(), g, json.RawMessage(`{}`), actionContext{State: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "state.eta") {
		t.Errorf("missing template value: %v", err)
	}
	if _, err := checkArgs(testCapability(), g, json.RawMessage(`[1]`), actionContext{}); err == nil {
		t.Error("a non-object was accepted")
	}
	out, err := checkArgs(testCapability(), g, json.RawMessage(`{"to":"a@b.c"}`), actionContext{State: map[string]any{"eta": "10:15"}})
	if err != nil || string(out) != `{"body":"Arrivo alle 10:15","to":"a@b.c"}` {
		t.Errorf("filled %s %v", out, err)
	}
}

// TestContinuation: an action outcome in the rule's list schedules a durable
// child time watch with the same grants and the inherited context; a retry
// cannot schedule it twice; maxAttempts bounds the chain.
func TestContinuation(t *testing.T) {
	mail := &sentMail{outcome: "not_answered"}
	r := newRig(t)
	r.caps, _ = NewRegistry(Capability{Tool: "test__call", MaxInvocations: 1})
	r.tools = []agent.Tool{mail.tool("test__call")}
	ta := &stubTime{}
	r.extra = []Adapter{ta}
	r.open()
	ta.now = r.clock.Now
	r.adapter.set("x", "stop", -2.0)
	parent := r.create(CreateRequest{ResourceRef: "x", Agent: true, Rules: []Rule{{ID: "prepare", Event: "fake.stop", Once: true,
		Grants:       []Grant{{Tool: "test__call"}},
		Continuation: &Continuation{Outcomes: []string{"not_answered", "busy"}, AfterMinutes: 1, MaxAttempts: 2}}}})
	r.deliver.act = func(turn Turn) (string, error) {
		res, _ := callTool(turn, "test__call", `{}`)
		return "call: " + res.Content, nil
	}
	r.adapter.set("x", "stop", -1.0)
	r.cycle()
	children, _ := r.e.List(context.Background(), "", false)
	if len(children) != 2 {
		t.Fatalf("%d active watches, want the parent and one child", len(children))
	}
	child := children[1]
	if child.Source != "time" || child.Attempt != 1 || child.ParentEventID == "" || len(child.Rules[0].Grants) != 1 ||
		child.Rules[0].Grants[0].Tool != "test__call" || !strings.Contains(string(child.Context), `"stop"`) {
		t.Fatalf("child %+v", child)
	}
	// The parent's retried delivery would derive the same child id.
	if id := stableID("w", child.ParentEventID, "prepare", "continuation"); id != child.ID {
		t.Errorf("child id %s is not derived from its event", child.ID)
	}
	r.clock.Advance(2 * time.Minute)
	r.e.RunOnce(context.Background()) // child fires: second call, schedules attempt 2
	r.clock.Advance(2 * time.Minute)
	r.e.RunOnce(context.Background()) // attempt 2 fires: third call; maxAttempts reached
	r.clock.Advance(2 * time.Minute)
	r.e.RunOnce(context.Background())
	if mail.count() != 3 {
		t.Errorf("calls %d, want the original plus two attempts", mail.count())
	}
	if !strings.Contains(r.life.types(), "watch.continuation_exhausted") {
		t.Errorf("lifecycle %s", r.life.types())
	}
	_ = parent
}

// stubTime is a minimal "time" source for continuation children.
type stubTime struct{ now func() time.Time }

func (s *stubTime) Source() string { return "time" }
func (s *stubTime) Snapshot(_ context.Context, ref string) (json.RawMessage, error) {
	at, err := time.Parse(time.RFC3339, ref)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"atMs": at.UnixMilli(), "reached": !s.now().Before(at)})
}
func (s *stubTime) Events(prev, cur json.RawMessage) ([]Event, error) {
	var p, c map[string]any
	json.Unmarshal(prev, &p)
	json.Unmarshal(cur, &c)
	if c["reached"] == true && p["reached"] != true {
		return []Event{{Key: "reached", Type: "time.reached", FallbackText: "time"}}, nil
	}
	return nil, nil
}
func (s *stubTime) DefaultExpiry(_ json.RawMessage, created time.Time) time.Time {
	return created.Add(time.Hour)
}
func (s *stubTime) IsTerminal(snap json.RawMessage) bool {
	var c map[string]any
	json.Unmarshal(snap, &c)
	return c["reached"] == true
}
