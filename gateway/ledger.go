package gateway

import (
	"context"
	"time"

	"github.com/agentstack/agentstack/llm"
)

// Outcome is how a gateway request or attempt ended.
type Outcome string

// Request and attempt outcomes.
const (
	OutcomeOK          Outcome = "ok"           // answered by a provider
	OutcomeRejected    Outcome = "rejected"     // a provider's non-retryable 4xx, passed through
	OutcomeFailed      Outcome = "failed"       // every candidate failed before output
	OutcomeTimeout     Outcome = "timeout"      // the shared request deadline passed
	OutcomeCancelled   Outcome = "cancelled"    // the client went away
	OutcomeStreamError Outcome = "stream_error" // a stream failed after output had started
	OutcomeInvalid     Outcome = "invalid"      // refused before forwarding (bad JSON, unknown model…)
	OutcomeRetryable   Outcome = "retryable"    // attempt only: failed, the next candidate was tried
	OutcomeSkipped     Outcome = "skipped"      // attempt only: the provider's key is not set
)

// RequestRecord is the one terminal ledger row of a gateway request.
type RequestRecord struct {
	ID            string
	Time          time.Time
	Service       string // from X-Usage-Service, "unknown" when missing
	Action        string // from X-Usage-Action, "unknown" when missing
	Endpoint      string // "chat" or "embeddings"
	PublicModel   string
	Provider      string // the provider that answered, if any
	UpstreamModel string
	Stream        bool
	Outcome       Outcome
	Status        int
	Tokens        llm.Tokens
	CostUSD       float64
	Latency       time.Duration
	TTFB          time.Duration // time to the first byte sent to the client
	Attempts      int
	Error         string // user-safe, never contains a key
}

// AttemptRecord is one try of one candidate. Attempts are diagnostics and
// never count as usage.
type AttemptRecord struct {
	RequestID     string
	Seq           int
	Time          time.Time
	Provider      string
	UpstreamModel string
	Stream        bool
	Status        int
	Outcome       Outcome
	TimeToHeaders time.Duration
	Error         string
	// Code and Type are the structured code and type of the error object
	// a retryable answer carried (empty otherwise), for classification.
	Code, Type string
	// RetryAfter is that answer's Retry-After header as sent (seconds or
	// an HTTP date; empty when absent), for the caller's cooling.
	RetryAfter string
}

// Ledger stores usage. Implementations must not block the request for long:
// the gateway calls them after the response is complete.
type Ledger interface {
	RecordRequest(ctx context.Context, r RequestRecord)
	RecordAttempt(ctx context.Context, a AttemptRecord)
}

// Cost prices tokens at r, USD.
func (r Rate) Cost(t llm.Tokens) float64 {
	return (float64(t.Input)*r.Input + float64(t.Output)*r.Output +
		float64(t.CacheRead)*r.CacheRead + float64(t.CacheWrite)*r.CacheWrite) / 1e6
}
