package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/agent"
)

// phone is a fake voice transport's call_start: each call answers or fails
// as scripted and is counted.
type phone struct {
	sentMail
	fail bool
}

func (p *phone) tool() agent.Tool {
	return agent.ToolFunc{ToolSpec: agent.ToolSpec{Name: "voice__call_start"}, Fn: func(ctx context.Context, args json.RawMessage) (agent.ToolResult, error) {
		p.mu.Lock()
		p.calls = append(p.calls, string(args))
		p.mu.Unlock()
		if p.fail {
			return agent.ToolResult{Content: `[CALL FAILED] {"code":"no_answer"}`, IsError: true}, nil
		}
		return agent.ToolResult{Content: "connected"}, nil
	}}
}

func voiceRig(t *testing.T, p *phone) *rig {
	r := newRig(t)
	r.caps, _ = NewRegistry(Capability{Tool: "voice__call_start", Allowed: []string{"openingLine"}, Mode: CapabilityVoice, MaxInvocations: 1})
	r.tools = []agent.Tool{p.tool()}
	r.open()
	r.adapter.set("x", "v", 1.0)
	return r
}

func callRule(id, fallback string) Rule {
	return Rule{ID: id, Event: "fake.v", VoiceFallback: fallback, Grants: []Grant{{Tool: "voice__call_start", Constraints: &Constraints{
		Fields: map[string]FieldConstraint{"openingLine": {Kind: ConstraintExact, Value: "Il treno è in ritardo."}}}}}}
}

// dialAndReport makes the model call once, as a watch turn would.
func dialAndReport(r *rig) {
	r.deliver.act = func(turn Turn) (string, error) {
		res, ok := callTool(turn, "voice__call_start", `{"openingLine":"Il treno è in ritardo."}`)
		if !ok {
			return "", fmt.Errorf("the call tool is not in the turn")
		}
		return "Ho provato a chiamarti: " + res.Content, nil
	}
}

func TestVoiceRulesAndPush(t *testing.T) {
	for _, c := range []struct {
		name      string
		rules     []Rule
		fail      bool
		wantPush  int
		wantCalls int
	}{
		{"call-only rule, call answered", []Rule{callRule("call", "")}, false, 0, 1},
		{"call-only rule, no answer", []Rule{callRule("call", "")}, true, 0, 1},
		{"push fallback, no answer", []Rule{callRule("call", "push")}, true, 1, 1},
		{"push fallback, call answered", []Rule{callRule("call", "push")}, false, 0, 1},
		{"one of two voice rules without fallback", []Rule{callRule("a", "push"), callRule("b", "")}, true, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &phone{fail: c.fail}
			r := voiceRig(t, p)
			r.create(CreateRequest{ResourceRef: "x", Agent: true, Instruction: "chiamami se cambia", Rules: c.rules})
			dialAndReport(r)
			r.adapter.set("x", "v", 2.0)
			r.cycle()
			if p.count() != c.wantCalls || r.notifier.count() != c.wantPush {
				t.Fatalf("%d calls, %d pushes; want %d, %d", p.count(), r.notifier.count(), c.wantCalls, c.wantPush)
			}
			if row := r.query(`SELECT status FROM watch_events`); row[0] != "delivered" {
				t.Fatalf("event %v", row)
			}
			if c.wantPush == 0 && !strings.Contains(r.life.types(), "watch.push_skipped") {
				t.Errorf("lifecycle lacks watch.push_skipped: %s", r.life.types())
			}
		})
	}
}

// A watch's call is claimed before dialing: a delivery retried after a
// crash and a host restart never dials again.
func TestVoiceCallDialsOnceAcrossRestartAndRetry(t *testing.T) {
	p := &phone{}
	r := voiceRig(t, p)
	r.create(CreateRequest{ResourceRef: "x", Agent: true, Instruction: "chiamami", Rules: []Rule{callRule("call", "")}})
	ctx, crash := context.WithCancel(context.Background())
	first := true
	r.deliver.act = func(turn Turn) (string, error) {
		res, _ := callTool(turn, "voice__call_start", `{"openingLine":"Il treno è in ritardo."}`)
		if first {
			first = false
			crash() // the host dies after dialing, before the delivery completes
			return "", ctx.Err()
		}
		return "Chiamata: " + res.Content, nil
	}
	r.adapter.set("x", "v", 2.0)
	r.clock.Advance(DefaultPollInterval)
	r.e.RunOnce(ctx)
	r.open() // restart
	if _, err := r.e.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.count() != 1 {
		t.Fatalf("dialled %d times", p.count())
	}
	if r.notifier.count() != 0 {
		t.Fatalf("a call-only rule pushed %d times", r.notifier.count())
	}
}

func TestVoiceFallbackValidation(t *testing.T) {
	r := newRig(t)
	r.caps, _ = NewRegistry(Capability{Tool: "voice__call_start", Allowed: []string{"openingLine"}, Mode: CapabilityVoice, MaxInvocations: 1})
	r.open()
	for _, c := range []struct {
		rule Rule
		want string
	}{
		{Rule{ID: "a", Event: "fake.v", VoiceFallback: "sms", Grants: []Grant{{Tool: "voice__call_start"}}}, `voiceFallback must be "push"`},
		{Rule{ID: "a", Event: "fake.v", VoiceFallback: "push"}, "applies to a rule that grants a call"},
	} {
		_, err := r.e.Create(context.Background(), CreateRequest{Source: "fake", Instruction: "x", ResourceRef: "x", Agent: true, ChatID: "chat_1", Rules: []Rule{c.rule}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.rule, err, c.want)
		}
	}
}
