package runtime

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
)

// Candidate availability ("Failure, retries and evidence"). A candidate is
// one gateway target (provider and upstream model). Its cooling is
// process-local and shared by every model call of the runtime: a candidate
// that answered overloaded or failed ordinarily is set aside until its
// cooling ends, and a ready admitted alternative is sent first. Cooling
// resets on restart; it is not durable health. Finite budgets belong to one
// logical operation (one model call with its retries and its compaction
// pass): four ordinary failures (rate limit, generic 5xx, network), or an
// ordinary failure two hours after the first one, exhaust the candidate for
// the rest of the operation, whatever its cooling says. A rate limit whose
// answer says when to come back (Retry-After: seconds or an HTTP date)
// cools for that long, at most maxRetryAfter, instead of the fixed delay;
// it still spends the budget. Exact overloads (llm.FailureCause
// "overloaded") cool 30 s doubling to 600 s outside that budget and never
// exhaust: only the caller's context ends the wait. An operation's summary
// (compaction) calls share its budgets and the runtime's cooling.
const (
	// ordinaryBudget is how many ordinary failures exhaust a candidate.
	ordinaryBudget = 4
	// ordinaryWindow is how long after its first ordinary failure a
	// candidate's budget lasts: the next ordinary failure exhausts it.
	ordinaryWindow = 2 * time.Hour
	// maxRetryAfter bounds the cooling a rate limit's Retry-After asks
	// for, so a provider cannot park a candidate indefinitely.
	maxRetryAfter = 600 * time.Second
)

// candidateRetry is the delay arithmetic of candidate cooling: 2, 4 and
// 8 s after ordinary failures, 30 s doubling to 600 s after overloads.
func candidateRetry() agent.RetryPolicy {
	return agent.RetryPolicy{TransientBase: 2 * time.Second, OverloadMin: 30 * time.Second, OverloadMax: 600 * time.Second}
}

// availability is the runtime's process-local cooling of candidates.
type availability struct {
	clock Clock

	mu   sync.Mutex
	cool map[gateway.Target]cooling
}

// cooling is one candidate's state: sent to again from until on, after
// overloads consecutive overloads (reset by a success).
type cooling struct {
	until     time.Time
	overloads int
}

// newAvailability reads the time from clock (the runtime's Clock; the
// real one when nil).
func newAvailability(clock Clock) *availability {
	if clock == nil {
		clock = realClock{}
	}
	return &availability{clock: clock, cool: map[gateway.Target]cooling{}}
}

// operation starts the bookkeeping of one logical operation.
func (av *availability) operation() *callAvailability {
	op := &callAvailability{av: av, budgets: map[gateway.Target]*candidateBudget{}}
	op.tick()
	return op
}

// callAvailability is one operation's view: the runtime's cooling plus the
// operation's own finite budgets.
type callAvailability struct {
	av *availability
	// at is the operation's time: read from the clock when the operation
	// starts and when a pass or a compaction ends, and moved on by each
	// wait. Between those points it stands still, so a wait lasts exactly
	// until the cooling it waits for ends; and a Sleep that does not move
	// the clock (tests) still takes the operation past what it waited for.
	at      time.Time
	budgets map[gateway.Target]*candidateBudget
}

// candidateBudget is one candidate's finite budget within an operation.
type candidateBudget struct {
	failures  int
	first     time.Time
	exhausted bool
	// late says the budget ended at a failure two hours after the first.
	late bool
	// last is the candidate's latest failure, for the final error.
	last string
}

// tick moves the operation's time on to the clock's, never back.
func (op *callAvailability) tick() {
	if t := op.av.clock.Now(); t.After(op.at) {
		op.at = t
	}
}

func (op *callAvailability) budget(t gateway.Target) *candidateBudget {
	b := op.budgets[t]
	if b == nil {
		b = &candidateBudget{}
		op.budgets[t] = b
	}
	return b
}

// schedule picks, from plans in their order, the ones to send now: neither
// exhausted nor cooling. When none is ready but some still live, wait is
// how long until the earliest cooling ends. live is false when every plan's
// candidate is exhausted.
func (op *callAvailability) schedule(plans []*requestPlan) (ready []*requestPlan, wait time.Duration, live bool) {
	now := op.at
	op.av.mu.Lock()
	defer op.av.mu.Unlock()
	var earliest time.Time
	for _, p := range plans {
		t := p.member.Target
		if op.budget(t).exhausted {
			continue
		}
		live = true
		if c := op.av.cool[t]; c.until.After(now) {
			if earliest.IsZero() || c.until.Before(earliest) {
				earliest = c.until
			}
			continue
		}
		ready = append(ready, p)
	}
	if len(ready) == 0 && live {
		wait = earliest.Sub(now)
	}
	return ready, wait, live
}

// waited records that the operation waited d.
func (op *callAvailability) waited(d time.Duration) { op.at = op.at.Add(d) }

// failed records a failure of class c of target t at time at (the end of
// the pass it happened in, the same for every attempt of that pass).
// Overloads cool without touching the budget; ordinary failures consume it
// and cool while it lasts — a rate limit for its Retry-After (retryAfter,
// the header as sent) when it gives one; any other class that reaches here
// (a candidate the gateway skipped: no key, no stream) exhausts the
// candidate.
func (op *callAvailability) failed(t gateway.Target, c agent.ErrorClass, msg, retryAfter string, at time.Time) {
	b := op.budget(t)
	b.last = msg
	op.av.mu.Lock()
	defer op.av.mu.Unlock()
	cl := op.av.cool[t]
	switch c {
	case agent.ErrOverload:
		cl.overloads++
		cl.until = at.Add(candidateRetry().OverloadDelay(cl.overloads))
	case agent.ErrRateLimit, agent.ErrTransient:
		if b.failures == 0 {
			b.first = at
		}
		b.failures++
		b.late = at.Sub(b.first) >= ordinaryWindow
		if b.failures >= ordinaryBudget || b.late {
			b.exhausted = true
			return
		}
		delay := candidateRetry().TransientDelay(b.failures)
		if d := llm.ParseRetryAfter(retryAfter, at); c == agent.ErrRateLimit && d > 0 {
			delay = min(d, maxRetryAfter)
		}
		cl.until = at.Add(delay)
	default:
		b.exhausted = true
		return
	}
	op.av.cool[t] = cl
}

// succeeded ends t's cooling and overload streak.
func (op *callAvailability) succeeded(t gateway.Target) {
	op.av.mu.Lock()
	defer op.av.mu.Unlock()
	delete(op.av.cool, t)
}

// exhausted returns the candidates whose budget this operation used up.
func (op *callAvailability) exhausted() map[gateway.Target]bool {
	out := map[gateway.Target]bool{}
	for t, b := range op.budgets {
		if b.exhausted {
			out[t] = true
		}
	}
	return out
}

// exhaustedError is the end of an operation none of whose plans has a
// candidate left: it names the route and each candidate's last error.
func (op *callAvailability) exhaustedError(route string, plans []*requestPlan, pinned bool) error {
	var parts []string
	for _, p := range plans {
		b := op.budget(p.member.Target)
		part := fmt.Sprintf("%s/%s failed %d times", p.member.Target.Provider, p.member.Target.Model, b.failures)
		if b.failures == 0 {
			part = p.member.Target.Provider + "/" + p.member.Target.Model + " is unavailable"
		}
		if b.late {
			part += " over two hours"
		}
		if b.last != "" {
			part += " (last: " + b.last + ")"
		}
		parts = append(parts, part)
	}
	what := "no candidate of model route " + route + " is left"
	if pinned {
		what = "the content-policy retry on model route " + route + " cannot be sent again"
	}
	return fmt.Errorf("%s: %s", what, strings.Join(parts, "; "))
}

// settle records the outcome of one pass that ended in err (nil for an
// answer): each attempt the gateway moved on from or skipped
// (attemptClass), then the last attempt's success or its own error
// (classified from the structured error). It returns the plan of the last
// attempt and the class of the error that ended the pass. A failed pass
// without attempts charges its first plan. The caller settles no pass
// after an abort: a known success then updates no availability.
func (op *callAvailability) settle(sent []*requestPlan, attempts []gateway.AttemptRecord, err error, redact func(string) string) (*requestPlan, agent.ErrorClass) {
	op.tick()
	at := op.at
	if len(attempts) == 0 {
		if err == nil {
			return nil, agent.ErrOther
		}
		c := agent.Classify(err)
		if retryable(c) && len(sent) > 0 {
			op.failed(sent[0].member.Target, c, redact(err.Error()), "", at)
		}
		return nil, c
	}
	var last *requestPlan
	class := agent.ErrOther
	for i, a := range attempts {
		t := gateway.Target{Provider: a.Provider, Model: a.UpstreamModel}
		last = planFor(sent, a.Provider, a.UpstreamModel)
		switch a.Outcome {
		case gateway.OutcomeRetryable:
			class = attemptClass(a)
			op.failed(t, class, redact(a.Error), a.RetryAfter, at)
		case gateway.OutcomeSkipped:
			class = agent.ErrOther
			op.failed(t, class, redact(a.Error), "", at)
		default:
			if i < len(attempts)-1 {
				continue
			}
			if err == nil {
				op.succeeded(t)
				return last, class
			}
			// The answer (or stream) of the last attempt is the error.
			class = agent.Classify(err)
			if retryable(class) {
				op.failed(t, class, redact(err.Error()), "", at)
			}
		}
	}
	return last, class
}

// attemptClass classifies an attempt the gateway moved on from by its
// status and its error object's structured code and type: an overload
// alias, a rate limit, an authentication failure (that account cannot
// serve the operation), or else an ordinary failure (a generic 5xx, a
// network failure, a conflict).
func attemptClass(a gateway.AttemptRecord) agent.ErrorClass {
	switch llm.FailureCause(a.Status, a.Code, a.Type) {
	case "overloaded":
		return agent.ErrOverload
	case "rate_limit":
		return agent.ErrRateLimit
	case "auth":
		return agent.ErrOther
	}
	return agent.ErrTransient
}

// retryable reports the classes availability handles.
func retryable(c agent.ErrorClass) bool {
	return c == agent.ErrOverload || c == agent.ErrRateLimit || c == agent.ErrTransient
}
