package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentstack/agentstack/llm"
)

// Plan is one candidate's exact request, as its caller admitted it: the
// bytes sent upstream for that candidate, byte for byte (the gateway does
// not serialise them again), and their SHA-256 taken at admission. Every
// attempt checks the bytes against the hash before anything is sent, so a
// body changed after admission is never sent under that admission.
type Plan struct {
	// Target is the candidate of the route the plan is for.
	Target Target
	// Body is the upstream request body. The plan keeps the slice it was
	// given: the caller must not change it (an attempt would refuse it).
	Body []byte
	// SHA256 is the hash of Body at admission.
	SHA256 [sha256.Size]byte
}

// NewPlan returns the plan of body for target, hashing body now.
func NewPlan(target Target, body []byte) Plan {
	return Plan{Target: target, Body: body, SHA256: sha256.Sum256(body)}
}

// Hash is the admission hash in lowercase hex.
func (p Plan) Hash() string { return hex.EncodeToString(p.SHA256[:]) }

// verify is the attempt's integrity check: the bytes about to be sent are
// the bytes admitted.
func (p *Plan) verify() error {
	if got := sha256.Sum256(p.Body); got != p.SHA256 {
		return &IntegrityError{Target: p.Target, Want: p.Hash(), Got: hex.EncodeToString(got[:])}
	}
	return nil
}

// IntegrityError is a plan whose bytes no longer hash to what was admitted.
// It is a defect of the caller, not a provider failure: nothing was sent,
// no attempt is recorded, and no other candidate is tried.
type IntegrityError struct {
	Target    Target
	Want, Got string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("request plan integrity: the body for %s/%s hashes to %s, not the admitted %s; nothing was sent",
		e.Target.Provider, e.Target.Model, e.Got, e.Want)
}

type plansKey struct{}

// StreamPlans sends a streamed chat request of the public model name as
// the given plans, tried in their order (each must name a candidate of
// that route; candidates without a plan are not tried). Each plan's body
// should ask for a stream; one answered with plain JSON is re-emitted as
// SSE like any other. A plan that fails its integrity check ends the call
// with an *IntegrityError before anything is sent for it.
func (r *Router) StreamPlans(ctx context.Context, public string, plans []Plan, onChunk func(llm.StreamChunk) error) (*llm.ChatResponse, *Trace, error) {
	if len(plans) == 0 {
		return nil, &Trace{}, errors.New("gateway: no request plan to send")
	}
	ctx, tr := withTrace(ctx)
	ctx = context.WithValue(ctx, plansKey{}, slices.Clone(plans))
	resp, err := r.client.ChatStream(ctx, &llm.ChatRequest{Model: public}, onChunk)
	if ie := tr.integrityError(); ie != nil {
		return nil, tr.done(), ie
	}
	return resp, tr.done(), err
}

// planChain maps a Router call's plans onto the route's chain: the targets
// to try, in the plans' order, and the plan of each. ok is false when the
// call carries no plans; a plan naming no candidate of the route is an
// error.
func planChain(ctx context.Context, chain []*target) ([]*target, []*Plan, bool, error) {
	plans, ok := ctx.Value(plansKey{}).([]Plan)
	if !ok {
		return chain, nil, false, nil
	}
	targets := make([]*target, 0, len(plans))
	out := make([]*Plan, 0, len(plans))
	for i := range plans {
		p := &plans[i]
		j := slices.IndexFunc(chain, func(t *target) bool { return t.provider == p.Target.Provider && t.model == p.Target.Model })
		if j < 0 {
			return nil, nil, true, fmt.Errorf("the plan for %s/%s names no candidate of this route", p.Target.Provider, p.Target.Model)
		}
		targets, out = append(targets, chain[j]), append(out, p)
	}
	return targets, out, true, nil
}

// planBody is the body an attempt sends: the current plan's exact bytes
// once they pass the integrity check, else the client's request rewritten
// for t.
func (x *exchange) planBody(t *target, stream bool) ([]byte, error) {
	if x.plan == nil {
		return x.upstreamBody(t, stream), nil
	}
	if err := x.plan.verify(); err != nil {
		return nil, err
	}
	return x.plan.Body, nil
}

// integrityFailed ends the exchange on a plan that failed its check: no
// attempt is recorded and the Router caller gets the IntegrityError.
func (x *exchange) integrityFailed(err *IntegrityError) {
	x.rec.Outcome, x.rec.Status, x.rec.Error = OutcomeInvalid, 500, err.Error()
	if s := traceOf(x.ctx); s != nil {
		s.mu.Lock()
		s.integrity = err
		s.mu.Unlock()
	}
	writeError(x.w, http.StatusInternalServerError, "invalid_request_error", "plan_integrity", err.Error())
}

func (s *traceSink) integrityError() *IntegrityError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.integrity
}
