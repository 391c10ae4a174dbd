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
// member: target, capability snapshot, adapter), the structured request,
// the budget it is admitted against and its exact bytes with their
// admission hash; admission, retries and the send all use these same
// bytes.
type requestPlan struct {
	member RouteMember
	req    *llm.ChatRequest
	// budget is the member's, with the output limit this request carries.
	budget agent.Budget
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
	u := p.budget.UsableInput()
	return u <= 0 || p.tokens() <= u
}

// buildPlan maps base (the messages, tools, temperature, wanted output
// limit and Codex cache key of the call) onto m's request and serialises
// it: the member's upstream model and output limit, a stream with usage,
// the cache key only for a Codex member (so it is admitted and hashed with
// the body, and its session_id header derives from it).
func buildPlan(m RouteMember, base *llm.ChatRequest) (*requestPlan, error) {
	req := *base
	req.Model, req.MaxTokens = m.Target.Model, outputLimit(m.Caps, base.MaxTokens)
	req.Stream, req.StreamOptions = true, &llm.StreamOptions{IncludeUsage: true}
	if m.Wire.Protocol != llm.ProtocolCodex {
		req.PromptCacheKey = "" // only the Codex dialect takes one
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("serialise the request for %s: %w", m.Candidate, err)
	}
	a := agent.Accounting{Body: body}
	for _, msg := range req.Messages {
		for _, img := range msg.Images {
			a.Raster += agent.RasterTokens(img)
		}
	}
	b := m.Budget
	b.MaxOutput = req.MaxTokens
	return &requestPlan{member: m, req: &req, budget: b, acct: a, plan: gateway.NewPlan(m.Target, body)}, nil
}

// admission is a projection's admitted membership, in route order: the
// plans that fit their own member's usable input, and the capable members
// whose plans did not (context-failed locally, kept for a rebuild after
// an authoritative compaction).
type admission struct {
	admitted []*requestPlan
	refused  []*requestPlan
}

// capable returns the members of rb whose capabilities take base, and
// why each of the others does not. Incapable members are outside the
// membership: they neither trigger nor suppress a size compaction.
func capable(rb RouteBinding, base *llm.ChatRequest) ([]RouteMember, []string) {
	var out []RouteMember
	var why []string
	for _, m := range rb.Members {
		if r := m.Wire.Refuses(base); r != "" {
			why = append(why, m.Target.Provider+"/"+m.Target.Model+" "+r)
			continue
		}
		out = append(out, m)
	}
	return out, why
}

// plans builds and admits a plan of base for each of members, each
// against its own usable input.
func plans(members []RouteMember, base *llm.ChatRequest) (*admission, error) {
	a := &admission{}
	for _, m := range members {
		p, err := buildPlan(m, base)
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

// primary is the call a primary request plan is built from: the
// projection, the tools, the route's output limit and temperature and the
// session's cache key.
func (iv *invoker) primary(msgs []llm.Message, tools []llm.Tool) *llm.ChatRequest {
	return &llm.ChatRequest{Messages: msgs, Tools: tools, MaxTokens: iv.route.MaxTokens, Temperature: iv.route.Temperature,
		PromptCacheKey: iv.cacheKey("primary")}
}

// cacheKey is the Codex prompt_cache_key of this invocation owner: the
// session's primary calls, and its summarizer apart from them.
func (iv *invoker) cacheKey(kind string) string {
	return llm.OwnerCacheKey(iv.rt.models.cacheSeed, iv.sess.id+"\x00"+kind)
}

// notAdmitted logs the members whose plans did not fit.
func (iv *invoker) notAdmitted(refused []*requestPlan, after string) {
	for _, p := range refused {
		data := map[string]any{"session": iv.sess.id, "candidate": p.member.Candidate,
			"target": p.member.Target.Provider + "/" + p.member.Target.Model, "tokens": p.tokens(), "usable_input": p.budget.UsableInput()}
		if after != "" {
			data["after"] = after
		}
		iv.rt.logEvent("candidate_not_admitted", data)
	}
}

// tooLarge is the refusal of a request no capable member admitted: the
// numbers of the member with the most room, the nearest to fitting.
func tooLarge(refused []*requestPlan) (need, usable int) {
	p := slices.MaxFunc(refused, func(x, y *requestPlan) int { return x.budget.UsableInput() - y.budget.UsableInput() })
	return p.tokens(), p.budget.UsableInput()
}

// admit is local admission before primary I/O. The capable members are
// admitted once per projection in route order, each plan against its own
// member's usable input floor(U×C)−O. When none fits, one local-exact
// compaction rebuilds the projection and the members are admitted again;
// when still none fits the request is refused without being sent (one
// local pass, never a second). Members that do not fit while others do
// are not sent to; they stay in the admission as context-failed. op is the
// logical operation the compaction's summary calls belong to.
func (iv *invoker) admit(ctx context.Context, op *callAvailability, msgs []llm.Message, tools []llm.Tool) (*admission, []llm.Message, error) {
	a, err := iv.admitProjection(msgs, tools)
	if err != nil {
		return nil, nil, err
	}
	compacted := false
	if len(a.admitted) == 0 {
		next, ok, err := iv.maintain(ctx, compaction{mode: compactLocalExact, op: op}, msgs, tools)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			compacted, msgs = true, next
			if a, err = iv.admitProjection(msgs, tools); err != nil {
				return nil, nil, err
			}
		}
	}
	iv.notAdmitted(a.refused, "")
	if len(a.admitted) == 0 {
		need, usable := tooLarge(a.refused)
		iv.rt.logEvent("admission_refused", map[string]any{"session": iv.sess.id, "tokens": need, "usable_input": usable, "compacted": compacted})
		return nil, nil, fmt.Errorf("the request needs about %d tokens, more than the usable input of %d, after one local compaction: it was not sent", need, usable)
	}
	return a, msgs, nil
}

// admitProjection admits the capable members' plans of one projection
// (its capability membership is decided once, for this projection).
func (iv *invoker) admitProjection(msgs []llm.Message, tools []llm.Tool) (*admission, error) {
	base := iv.primary(msgs, tools)
	members, why := capable(iv.route, base)
	if len(members) == 0 {
		return nil, fmt.Errorf("no candidate of route %s can take this request: %s", iv.route.Name, strings.Join(why, "; "))
	}
	return plans(members, base)
}

// readmit is the one rebuild after an authoritative context rejection of
// failed (a member of a): the context-failed members that are not
// exhausted — failed itself first, then the members refused locally — are
// rebuilt from the compacted projection and admitted again against their
// own usable input; the other admitted members (untried, or cooling after
// a failure within their budget) keep their plans unchanged; members whose
// finite budget this operation exhausted are never reopened. The result is
// in that order, failed first.
func (iv *invoker) readmit(failed *requestPlan, a *admission, exhausted map[gateway.Target]bool, msgs []llm.Message, tools []llm.Tool) (*admission, error) {
	rebuild := []RouteMember{failed.member}
	for _, p := range a.refused {
		if p.member.Target != failed.member.Target && !exhausted[p.member.Target] {
			rebuild = append(rebuild, p.member)
		}
	}
	next, err := plans(rebuild, iv.primary(msgs, tools))
	if err != nil {
		return nil, err
	}
	for _, p := range a.admitted {
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
	iv.notAdmitted(next.refused, "authoritative_compaction")
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
