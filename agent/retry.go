package agent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// ErrorClass says what kind of failure a model call met, which decides
// whether and when it is retried.
type ErrorClass int

// Error classes, from the structured error a provider (or the gateway)
// returned.
const (
	// ErrOther is a failure retrying cannot fix (a bad request, a missing key).
	ErrOther ErrorClass = iota
	// ErrContextLength is a request too large for the model's context.
	ErrContextLength
	// ErrContentPolicy is a refusal on content-policy grounds.
	ErrContentPolicy
	// ErrOverload is a provider that says it is overloaded (HTTP 529), or a
	// gateway whose every candidate said so.
	ErrOverload
	// ErrRateLimit is HTTP 429.
	ErrRateLimit
	// ErrTransient is a network failure, a truncated stream, a timeout or
	// another 5xx.
	ErrTransient
)

var classNames = [...]string{"other", "context_length", "content_policy", "overload", "rate_limit", "transient"}

// String names the class for logs.
func (c ErrorClass) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// Classify looks at the structured error only: its HTTP status and the
// provider's error code and type (llm.FailureCause), and, for a gateway's
// 502 that ended a fallback chain, at the statuses of the attempts it made.
// Message text never changes the class (a provider's prose is not a
// contract, and matching it would let a quoted phrase decide a retry).
func Classify(err error, attemptStatuses ...int) ErrorClass {
	var ae *llm.APIError
	if !errors.As(err, &ae) {
		return ErrTransient // network failures, truncated or stalled streams
	}
	cause := llm.FailureCause(ae.Status, ae.Code, ae.Type)
	switch cause {
	case "context_length":
		return ErrContextLength
	case "content_policy":
		return ErrContentPolicy
	case "overloaded":
		return ErrOverload
	case "invalid_encrypted_content":
		// Terminal even in-band: the same history fails the same way.
		return ErrOther
	}
	if ae.Status == http.StatusBadGateway && len(attemptStatuses) > 0 {
		overloaded := true
		for _, s := range attemptStatuses {
			if s != 529 {
				overloaded = false
			}
		}
		if overloaded {
			return ErrOverload
		}
	}
	switch {
	case cause == "rate_limit":
		return ErrRateLimit
	case cause == "auth":
		return ErrOther
	case ae.Status == 0 || ae.Status == http.StatusRequestTimeout || ae.Status >= 500:
		return ErrTransient
	}
	return ErrOther
}

// RetryPolicy says which failed model calls are tried again and after how
// long. Rate limits and transient failures share a finite budget with an
// exponential delay; overloads wait longer, doubling up to a ceiling.
// Context-length and content-policy failures are never retried as they are:
// the caller compacts or gives up.
type RetryPolicy struct {
	// MaxTransient is how many rate-limit or transient failures end the
	// call (the last one is returned); default 4.
	MaxTransient int
	// TransientBase is the first delay after a transient failure, doubled
	// after each one; default 2 s.
	TransientBase time.Duration
	// OverloadMin and OverloadMax bound the overload delay, which starts at
	// OverloadMin and doubles; defaults 30 s and 600 s.
	OverloadMin, OverloadMax time.Duration
	// MaxOverloads, when > 0, ends the call after that many overloads;
	// 0 waits out an overload for as long as it lasts.
	MaxOverloads int
	// Sleep waits between attempts (default: a timer that ctx cancels).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Retries counts the failures of one call under a policy.
type Retries struct {
	p                    RetryPolicy
	Transient, Overloads int
}

// withDefaults fills the policy's unset fields.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxTransient <= 0 {
		p.MaxTransient = 4
	}
	if p.TransientBase <= 0 {
		p.TransientBase = 2 * time.Second
	}
	if p.OverloadMin <= 0 {
		p.OverloadMin = 30 * time.Second
	}
	if p.OverloadMax <= 0 {
		p.OverloadMax = 600 * time.Second
	}
	if p.Sleep == nil {
		p.Sleep = Sleep
	}
	return p
}

// Start returns the counters of a new call.
func (p RetryPolicy) Start() *Retries {
	return &Retries{p: p.withDefaults()}
}

// TransientDelay is the wait after the n-th (from 1) rate-limit or
// transient failure: TransientBase doubled n-1 times.
func (p RetryPolicy) TransientDelay(n int) time.Duration {
	p = p.withDefaults()
	return p.TransientBase << min(max(n-1, 0), 16)
}

// OverloadDelay is the wait after the n-th (from 1) overload in a row:
// OverloadMin doubled n-1 times, at most OverloadMax.
func (p RetryPolicy) OverloadDelay(n int) time.Duration {
	p = p.withDefaults()
	return min(p.OverloadMin<<min(max(n-1, 0), 16), p.OverloadMax)
}

// Next counts a failure of class c and returns how long to wait before the
// next attempt, or false when the call must end with this failure.
func (r *Retries) Next(c ErrorClass) (time.Duration, bool) {
	switch c {
	case ErrOverload:
		if r.p.MaxOverloads > 0 && r.Overloads >= r.p.MaxOverloads {
			return 0, false
		}
		r.Overloads++
		return r.p.OverloadDelay(r.Overloads), true
	case ErrRateLimit, ErrTransient:
		r.Transient++
		if r.Transient >= r.p.MaxTransient {
			return 0, false
		}
		return r.p.TransientDelay(r.Transient), true
	}
	return 0, false
}

// Wait sleeps d through the policy's Sleep.
func (r *Retries) Wait(ctx context.Context, d time.Duration) error { return r.p.Sleep(ctx, d) }

// Sleep waits d or until ctx ends (returning its cause): the default wait
// between attempts.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
