package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
)

// requestPlan is a CandidateRequestPlan: one route member's request for a
// projection, serialised once. It keeps the structured candidate (the
// member: target, capability snapshot, adapter, budget), the structured
// request and its exact bytes with their admission hash; admission,
// retries and the send all use these same bytes.
type requestPlan struct {
	member RouteMember
	req    *llm.ChatRequest
	// acct is the exact accounting: the canonical body and the raster
	// reservation of the images it carries.
	acct agent.Accounting
	plan gateway.Plan
}

// tokens is the admission estimate, ceil(bytes/4) plus raster reservations.
func (p *requestPlan) tokens() int { return p.acct.Tokens() }

// fits reports whether the plan is within its own member's usable input
// (always, when the member's window is unknown).
func (p *requestPlan) fits() bool {
	u := p.member.Budget.UsableInput()
	return u <= 0 || p.tokens() <= u
}

// buildPlan maps the projection onto m's request and serialises it: the
// member's upstream model and output limit, the route's temperature, a
// stream with usage.
func (iv *invoker) buildPlan(m RouteMember, msgs []llm.Message, tools []llm.Tool) (*requestPlan, error) {
	req := &llm.ChatRequest{Model: m.Target.Model, Messages: msgs, Tools: tools, MaxTokens: m.Budget.MaxOutput,
		Temperature: iv.route.Temperature, Stream: true, StreamOptions: &llm.StreamOptions{IncludeUsage: true}}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("serialise the request for %s: %w", m.Candidate, err)
	}
	a := agent.Accounting{Body: body}
	for _, msg := range msgs {
		for _, img := range msg.Images {
			a.Raster += agent.RasterTokens(img)
		}
	}
	return &requestPlan{member: m, req: req, acct: a, plan: gateway.NewPlan(m.Target, body)}, nil
}

// admission is a projection's admitted membership, in route order: the
// plans that fit their own member's usable input, and the capable members
// whose plans did not (context-failed locally, kept for a rebuild after
// an authoritative compaction).
type admission struct {
	admitted []*requestPlan
	refused  []*requestPlan
}

// capable returns the route members whose capabilities take this request,
// and why each of the others does not. Incapable members are outside the
// membership: they neither trigger nor suppress a size compaction.
func (iv *invoker) capable(msgs []llm.Message, tools []llm.Tool) ([]RouteMember, []string) {
	probe := &llm.ChatRequest{Messages: msgs, Tools: tools}
	var out []RouteMember
	var why []string
	for _, m := range iv.route.Members {
		if r := m.Wire.Refuses(probe); r != "" {
			why = append(why, m.Target.Provider+"/"+m.Target.Model+" "+r)
			continue
		}
		out = append(out, m)
	}
	return out, why
}

// plans builds and admits a plan for each of members, each against its
// own usable input.
func (iv *invoker) plans(members []RouteMember, msgs []llm.Message, tools []llm.Tool) (*admission, error) {
	a := &admission{}
	for _, m := range members {
		p, err := iv.buildPlan(m, msgs, tools)
		if err != nil {
			return nil, err
		}
		if p.fits() {
			a.admitted = append(a.admitted, p)
		} else {
			a.refused = append(a.refused, p)
		}
	}
	return a, nil
}

// admit is local admission before primary I/O. The capable members are
// admitted once per projection in route order, each plan against its own
// member's usable input floor(U×C)−O. When none fits, one local-exact
// compaction rebuilds the projection and the members are admitted again;
// when still none fits the request is refused without being sent (one
// local pass, never a second). Members that do not fit while others do
// are not sent to; they stay in the admission as context-failed.
func (iv *invoker) admit(ctx context.Context, msgs []llm.Message, tools []llm.Tool) (*admission, []llm.Message, error) {
	members, why := iv.capable(msgs, tools)
	if len(members) == 0 {
		return nil, nil, fmt.Errorf("no candidate of route %s can take this request: %s", iv.route.Name, strings.Join(why, "; "))
	}
	a, err := iv.plans(members, msgs, tools)
	if err != nil {
		return nil, nil, err
	}
	compacted := false
	if len(a.admitted) == 0 {
		next, ok, err := iv.maintain(ctx, compactLocalExact, msgs, tools)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			compacted, msgs = true, next
			if a, err = iv.plans(members, msgs, tools); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, p := range a.refused {
		iv.rt.logEvent("candidate_not_admitted", map[string]any{"session": iv.sess.id, "candidate": p.member.Candidate,
			"target": p.member.Target.Provider + "/" + p.member.Target.Model, "tokens": p.tokens(), "usable_input": p.member.Budget.UsableInput()})
	}
	if len(a.admitted) == 0 {
		// Report the member with the most room: the nearest to fitting.
		p := slices.MaxFunc(a.refused, func(x, y *requestPlan) int {
			return x.member.Budget.UsableInput() - y.member.Budget.UsableInput()
		})
		need, usable := p.tokens(), p.member.Budget.UsableInput()
		iv.rt.logEvent("admission_refused", map[string]any{"session": iv.sess.id, "tokens": need, "usable_input": usable, "compacted": compacted})
		return nil, nil, fmt.Errorf("the request needs about %d tokens, more than the usable input of %d, after one local compaction: it was not sent", need, usable)
	}
	return a, msgs, nil
}

// readmit is the one rebuild after an authoritative context rejection of
// failed (a member of sent): the context-failed members that are not
// exhausted — failed itself first, then the members refused locally — are
// rebuilt from the compacted projection and admitted again against their
// own usable input; admitted members that were not tried keep their plans
// unchanged; members that failed otherwise in this operation (exhausted)
// are never reopened. The result is in that order, failed first.
func (iv *invoker) readmit(failed *requestPlan, sent []*requestPlan, a *admission, exhausted map[gateway.Target]bool, msgs []llm.Message, tools []llm.Tool) (*admission, error) {
	rebuild := []RouteMember{failed.member}
	for _, p := range a.refused {
		if p.member.Target != failed.member.Target && !exhausted[p.member.Target] {
			rebuild = append(rebuild, p.member)
		}
	}
	next, err := iv.plans(rebuild, msgs, tools)
	if err != nil {
		return nil, err
	}
	for _, p := range sent {
		if p.member.Target != failed.member.Target && !exhausted[p.member.Target] {
			next.admitted = append(next.admitted, p)
		}
	}
	// failed stays first when its rebuilt plan fits; the rest follow the
	// route's order.
	order := func(t gateway.Target) int {
		if t == failed.member.Target {
			return -1
		}
		return slices.IndexFunc(iv.route.Members, func(m RouteMember) bool { return m.Target == t })
	}
	slices.SortStableFunc(next.admitted, func(x, y *requestPlan) int { return order(x.member.Target) - order(y.member.Target) })
	for _, p := range next.refused {
		iv.rt.logEvent("candidate_not_admitted", map[string]any{"session": iv.sess.id, "candidate": p.member.Candidate,
			"target": p.member.Target.Provider + "/" + p.member.Target.Model, "tokens": p.tokens(), "usable_input": p.member.Budget.UsableInput(), "after": "authoritative_compaction"})
	}
	return next, nil
}

// planFor returns the plan of the target an attempt went to.
func planFor(plans []*requestPlan, provider, model string) *requestPlan {
	for _, p := range plans {
		if p.member.Target.Provider == provider && p.member.Target.Model == model {
			return p
		}
	}
	return nil
}
