package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/llm/llmtest"
)

// planBody is a streamed chat body for model, with a field order and
// spacing the gateway's own serialisation would not produce, so a body
// that was serialised again cannot pass for the plan's.
func planBody(model, text string) []byte {
	return []byte(fmt.Sprintf(`{"stream":true,  "messages":[{"role":"user","content":%q}],"model":%q,"stream_options":{"include_usage":true}}`, text, model))
}

// TestStreamPlansSendsExactBytes: each candidate receives its own plan's
// bytes, byte for byte, in the plans' order (here against route order),
// and a candidate without a plan is not tried.
func TestStreamPlansSendsExactBytes(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	f.upstream.Enqueue("second", llmtest.Reply{Status: 503})
	f.upstream.Enqueue("first", llmtest.Reply{Content: "from first"})
	second := gateway.NewPlan(gateway.Target{Provider: "b", Model: "second"}, planBody("second", "a long history for the big window"))
	first := gateway.NewPlan(gateway.Target{Provider: "a", Model: "first"}, planBody("first", "short"))
	resp, tr, err := f.gw.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{second, first}, nil)
	if err != nil || resp.Choices[0].Message.Content != "from first" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	reqs := f.upstream.Requests()
	if len(reqs) != 2 || !bytes.Equal(reqs[0].Raw, second.Body) || !bytes.Equal(reqs[1].Raw, first.Body) {
		t.Fatalf("upstream received %d requests, not the plans' bytes", len(reqs))
	}
	if len(tr.Attempts) != 2 || tr.Attempts[0].Provider != "b" || tr.Attempts[1].Provider != "a" {
		t.Fatalf("attempts %+v", tr.Attempts)
	}

	// Only the planned candidate is tried.
	f.upstream.Enqueue("second", llmtest.Reply{Status: 503})
	_, tr, err = f.gw.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{second}, nil)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 502 || len(tr.Attempts) != 1 || len(f.upstream.Requests()) != 3 {
		t.Fatalf("err %v attempts %+v requests %d", err, tr.Attempts, len(f.upstream.Requests()))
	}
}

// TestPlanIntegrity: a plan whose bytes changed after admission is never
// sent. The IntegrityError escapes as is: no attempt is recorded for it and
// no later candidate is tried, whether it is the first plan or the second.
func TestPlanIntegrity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tamper   int // index of the altered plan
		wantSent int // requests the upstream receives
	}{
		{"first plan", 0, 0},
		{"second plan after a failover", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, twoCandidates, gateway.Options{})
			f.upstream.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Status: 503} })
			plans := []gateway.Plan{
				gateway.NewPlan(gateway.Target{Provider: "a", Model: "first"}, planBody("first", "admitted")),
				gateway.NewPlan(gateway.Target{Provider: "b", Model: "second"}, planBody("second", "admitted")),
			}
			admitted := plans[tc.tamper].Hash()
			// The same backing array: the change reaches the plan the
			// gateway holds, as an aliasing bug would.
			copy(plans[tc.tamper].Body[bytes.Index(plans[tc.tamper].Body, []byte("admitted")):], "ALTERED!")
			_, tr, err := f.gw.Router().StreamPlans(context.Background(), "tier-5", plans, nil)
			var ie *gateway.IntegrityError
			if !errors.As(err, &ie) || ie.Want != admitted || ie.Got == admitted || ie.Target != plans[tc.tamper].Target {
				t.Fatalf("err = %v, want the integrity error of plan %d", err, tc.tamper)
			}
			if n := len(f.upstream.Requests()); n != tc.wantSent {
				t.Errorf("upstream received %d requests, want %d", n, tc.wantSent)
			}
			if len(tr.Attempts) != tc.wantSent {
				t.Errorf("attempts %+v: the failed check was recorded or a later candidate tried", tr.Attempts)
			}
			for _, r := range f.upstream.Requests() {
				if bytes.Contains(r.Raw, []byte("ALTERED")) {
					t.Error("the altered bytes reached the provider")
				}
			}
		})
	}
}

// TestPlanForUnknownCandidate: a plan naming no candidate of the route is
// refused before anything is sent.
func TestPlanForUnknownCandidate(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	p := gateway.NewPlan(gateway.Target{Provider: "a", Model: "second"}, planBody("second", "x"))
	_, _, err := f.gw.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{p}, nil)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "plan_target_not_found" || len(f.upstream.Requests()) != 0 {
		t.Fatalf("err %v, %d requests", err, len(f.upstream.Requests()))
	}
}

// TestStreamEventsLongerThanTheReadBuffer: a stream event far longer than
// the gateway's 32 KiB event buffer (a long summary in a few chunks) is
// forwarded whole, streamed or through a plan.
func TestStreamEventsLongerThanTheReadBuffer(t *testing.T) {
	f := newFixture(t, twoCandidates, gateway.Options{})
	big := strings.Repeat("an overlong summary ", 5000) // three events of about 33 KB
	for _, tc := range []struct {
		name string
		send func() (*llm.ChatResponse, error)
	}{
		{"stream", func() (*llm.ChatResponse, error) {
			resp, _, err := f.gw.Router().Stream(context.Background(), &llm.ChatRequest{Model: "tier-5", Messages: []llm.Message{{Role: "user", Content: "hi"}}}, nil)
			return resp, err
		}},
		{"plan", func() (*llm.ChatResponse, error) {
			p := gateway.NewPlan(gateway.Target{Provider: "a", Model: "first"}, planBody("first", "hi"))
			resp, _, err := f.gw.Router().StreamPlans(context.Background(), "tier-5", []gateway.Plan{p}, nil)
			return resp, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.upstream.Enqueue("first", llmtest.Reply{Content: big})
			resp, err := tc.send()
			if err != nil || resp.Choices[0].Message.Content != big {
				t.Fatalf("err %v, content of %d bytes, want %d", err, len(resp.Choices[0].Message.Content), len(big))
			}
		})
	}
}

// TestPlanSkipsAProviderThatDoesNotStream: a plan's bytes ask for a stream
// and are never rewritten, so a provider configured not to stream is
// skipped (recorded) and the next plan is sent as it is.
func TestPlanSkipsAProviderThatDoesNotStream(t *testing.T) {
	f := newFixture(t, `
providers:
  a: { base_url: UPSTREAM, stream: false }
  b: { base_url: UPSTREAM }
models:
  tier-5: [ { provider: a, model: first }, { provider: b, model: second } ]
`, gateway.Options{})
	plans := []gateway.Plan{
		gateway.NewPlan(gateway.Target{Provider: "a", Model: "first"}, planBody("first", "hi")),
		gateway.NewPlan(gateway.Target{Provider: "b", Model: "second"}, planBody("second", "hi")),
	}
	resp, tr, err := f.gw.Router().StreamPlans(context.Background(), "tier-5", plans, nil)
	if err != nil || resp.Choices[0].Message.Content != "ok" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	reqs := f.upstream.Requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Raw, plans[1].Body) {
		t.Fatalf("upstream received %d requests, want only the second plan", len(reqs))
	}
	if len(tr.Attempts) != 2 || tr.Attempts[0].Outcome != gateway.OutcomeSkipped || tr.Attempts[1].Outcome != gateway.OutcomeOK {
		t.Fatalf("attempts %+v", tr.Attempts)
	}
}
