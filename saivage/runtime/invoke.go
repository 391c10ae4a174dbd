package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstack/agentstack/agent"

	"github.com/agentstack/agentstack/gateway"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/saivage/state"
)

// ContentPolicyError is a second content-policy refusal within one node
// execution; the card is blocked.
type ContentPolicyError struct{ Err error }

func (e *ContentPolicyError) Error() string {
	return "the provider refused the request twice on content-policy grounds: " + e.Err.Error()
}

func (e *ContentPolicyError) Unwrap() error { return e.Err }

// invoker is the agent.Model of one session. Every call is built from the
// persisted session (the single source of truth), so compaction can replace
// history between any two calls of a turn.
type invoker struct {
	rt    *Runtime
	route RouteBinding
	sess  *session
	// system renders the system prompt; tail the latest state snapshot,
	// the final system block observed for each call (empty for none).
	system func() string
	tail   func(ctx context.Context) stateSnapshot
	// gated marks autonomous card work: it waits at the Pause gate.
	gated    bool
	refusals int
}

// exchangeRow is one line of a session's exchanges.jsonl evidence.
type exchangeRow struct {
	ID            string            `json:"id"`
	Time          time.Time         `json:"ts"`
	Kind          string            `json:"kind"` // primary | summary
	Session       string            `json:"session"`
	Route         string            `json:"route"`
	Provider      string            `json:"provider,omitempty"`
	UpstreamModel string            `json:"upstream_model,omitempty"`
	Attempts      []attemptEvidence `json:"attempts"`
	Status        int               `json:"status,omitempty"`
	Outcome       string            `json:"outcome"`
	Error         string            `json:"error,omitempty"`
	DurationMS    int64             `json:"duration_ms"`
	RequestBytes  int               `json:"request_bytes"`
	RequestSHA256 string            `json:"request_sha256"`
	Messages      int               `json:"messages"`
	Tools         int               `json:"tools"`
	FinishReason  string            `json:"finish_reason,omitempty"`
	Usage         *llm.Usage        `json:"usage,omitempty"`
}

type attemptEvidence struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Status   int    `json:"status,omitempty"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error,omitempty"`
	// Code and Type are the structured code and type of the error object
	// the attempt's answer carried, what its failure was classified by.
	Code string `json:"code,omitempty"`
	Type string `json:"type,omitempty"`
	// RetryAfter is the answer's Retry-After header as sent.
	RetryAfter string `json:"retry_after,omitempty"`
	// RequestSHA256 is the hash of the plan this attempt sent.
	RequestSHA256 string `json:"request_sha256,omitempty"`
}

// Exchange is the latest primary exchange of a session: its evidence row,
// the exact request sent and the response.
type Exchange struct {
	exchangeRow
	Request  *llm.ChatRequest `json:"request"`
	Response *exchangeReply   `json:"response,omitempty"`
}

type exchangeReply struct {
	Content   string         `json:"content"`
	Reasoning string         `json:"reasoning,omitempty"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
}

// ExchangesFile and LatestExchangeFile live in each session directory.
const (
	ExchangesFile      = "exchanges.jsonl"
	LatestExchangeFile = "latest-exchange.json"
	exchangeVersion    = 1
)

// messages builds the provider context from the session
// (composeContextProjection).
func (iv *invoker) messages(ctx context.Context) ([]llm.Message, error) {
	cur, err := iv.sess.current()
	if err != nil {
		return nil, err
	}
	return iv.project(cur.Rows, iv.descriptor(ctx)), nil
}

// ChatStream implements agent.Model.
func (iv *invoker) ChatStream(ctx context.Context, req *llm.ChatRequest, onChunk func(llm.StreamChunk) error) (*llm.ChatResponse, error) {
	if iv.gated {
		release, err := iv.rt.acquireGate(ctx, iv.sess.id)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	// op is the call's availability: process-local cooling of the
	// candidates and this operation's finite budgets (availability.go),
	// which the summary calls of its compactions share.
	op := iv.rt.avail.operation()
	msgs, err := iv.messages(ctx)
	if err != nil {
		return nil, err
	}
	if msgs, _, err = iv.maintain(ctx, compaction{mode: compactPreventive, op: op}, msgs, req.Tools); err != nil {
		return nil, err
	}
	adm, msgs, err := iv.admit(ctx, op, msgs, req.Tools)
	if err != nil {
		return nil, err
	}
	compacted := false
	// pin is the plan of the candidate that refused on content-policy
	// grounds: the one further pass sends it alone, byte for byte, waiting
	// out its overloads, never failing over.
	var pin *requestPlan
	for {
		retained := adm.admitted
		if pin != nil {
			retained = []*requestPlan{pin}
		}
		sent, err := iv.ready(ctx, op, retained, iv.route.Name, pin != nil)
		if err != nil {
			return nil, err
		}
		iv.rt.observe(Observation{Kind: ObsModelCall, Session: iv.sess.id})
		resp, attempts, err := iv.sendPlans(ctx, "primary", iv.route.Public, sent, onChunk)
		if ie := (*gateway.IntegrityError)(nil); errors.As(err, &ie) {
			return nil, err // a defect, not a provider failure: no retry, no evidence
		}
		if err == nil && len(resp.Choices) > 0 && resp.Choices[0].FinishReason == "content_filter" {
			err = &llm.APIError{Status: 200, Message: "the response was stopped by the provider's content filter", Code: "content_filter"}
		}
		if err == nil {
			if ctx.Err() == nil {
				op.settle(sent, attempts, nil, iv.rt.redact)
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		last, class := op.settle(sent, attempts, err, iv.rt.redact)
		switch class {
		case agent.ErrContextLength:
			if pin != nil {
				return nil, fmt.Errorf("the content-policy retry to %s/%s was rejected as too large; a pinned pass is not compacted: %w", pin.member.Target.Provider, pin.member.Target.Model, err)
			}
			if compacted {
				return nil, fmt.Errorf("the request is still too large for the model after compaction: %w", err)
			}
			if last == nil {
				return nil, fmt.Errorf("a context rejection without an attempt: %w", err)
			}
			compacted = true
			// The pass targets the rejecting member's own usable input.
			next, ok, cerr := iv.maintain(ctx, compaction{mode: compactAuthoritative, op: op, rejected: last}, msgs, req.Tools)
			if cerr != nil {
				return nil, cerr
			}
			if !ok {
				return nil, fmt.Errorf("the request is too large for the model and nothing can be compacted: %w", err)
			}
			msgs = next
			op.tick() // the compaction took its time
			// Members whose budget this operation exhausted are never
			// reopened; cooling ones stay retained.
			if adm, err = iv.readmit(last, adm, op.exhausted(), msgs, req.Tools); err != nil {
				return nil, err
			}
			if len(adm.admitted) == 0 {
				return nil, fmt.Errorf("the request is still too large for %s/%s after compaction: it was not sent again", last.member.Target.Provider, last.member.Target.Model)
			}
		case agent.ErrContentPolicy:
			iv.refusals++
			_ = iv.sess.append(markerRow("refusal-"+state.NewUUID(), markerRefusal, map[string]any{"count": iv.refusals, "error": iv.rt.redact(err.Error())}))
			iv.rt.logEvent("content_policy_refusal", map[string]any{"session": iv.sess.id, "count": iv.refusals})
			if iv.refusals >= 2 {
				return nil, &ContentPolicyError{Err: err}
			}
			if pin == nil {
				pin = last
			}
		case agent.ErrOverload, agent.ErrRateLimit, agent.ErrTransient:
			// settle recorded each failed candidate's cooling or budget.
		default:
			return nil, err
		}
	}
}

// ready returns the plans of a pass, in their order: the ones whose
// candidate is ready. A cooling one waits its turn — when none is ready
// it waits (abortably) for the earliest cooling to end — and an exhausted
// one is never reopened, whatever its cooling says; when every candidate
// is exhausted it returns the error naming route and each last failure.
func (iv *invoker) ready(ctx context.Context, op *callAvailability, plans []*requestPlan, route string, pinned bool) ([]*requestPlan, error) {
	for {
		sent, wait, live := op.schedule(plans)
		if !live {
			return nil, op.exhaustedError(route, plans, pinned)
		}
		if len(sent) > 0 {
			return sent, nil
		}
		if err := iv.backoff(ctx, wait); err != nil {
			return nil, err
		}
		op.waited(wait)
	}
}

func (iv *invoker) backoff(ctx context.Context, d time.Duration) error {
	iv.rt.observe(Observation{Kind: ObsBackoff, Session: iv.sess.id, Delay: d})
	return iv.rt.opts.Sleep(ctx, d)
}

// sendPlans sends a request as its admitted plans, in order, through the
// route's public name, and records its evidence: the exact bytes and hash
// of the plan of the candidate that answered (or was tried last), and each
// attempt's hash. An integrity failure returns before any evidence is
// written.
func (iv *invoker) sendPlans(ctx context.Context, kind, public string, plans []*requestPlan, onChunk func(llm.StreamChunk) error) (*llm.ChatResponse, []gateway.AttemptRecord, error) {
	gp := make([]gateway.Plan, len(plans))
	for i, p := range plans {
		gp[i] = p.plan
	}
	start := time.Now()
	resp, trace, err := iv.rt.models.router.StreamPlans(ctx, public, gp, onChunk)
	if ie := (*gateway.IntegrityError)(nil); errors.As(err, &ie) {
		return nil, nil, err
	}
	shown := plans[0]
	if n := len(trace.Attempts); n > 0 {
		if p := planFor(plans, trace.Attempts[n-1].Provider, trace.Attempts[n-1].UpstreamModel); p != nil {
			shown = p
		}
	}
	iv.evidence(start, kind, shown, resp, trace, err, plans)
	return resp, trace.Attempts, err
}

// send performs a request outside a primary turn (a summary fold, whose
// model is the session's route or the summarizer) as request plans of
// that route's capable members, each admitted against its own usable
// input, and records the evidence of each pass. It goes through the
// availability of op, the logical operation it belongs to: only ready
// candidates are sent, in route order (one cooling after an overload
// yields to a ready alternative); with none ready it waits for the
// earliest cooling; each failure cools or spends its candidate's budget
// and is tried again until every candidate is exhausted. Any other
// failure (a refusal, a rejection) is returned with the pass's attempts.
func (iv *invoker) send(ctx context.Context, op *callAvailability, creq *llm.ChatRequest, onChunk func(llm.StreamChunk) error, kind string) (*llm.ChatResponse, []gateway.AttemptRecord, error) {
	rb := iv.route
	if s := iv.rt.models.summarizer; s != "" && creq.Model == s {
		rb = iv.rt.models.summary
	}
	base := *creq
	base.PromptCacheKey = iv.cacheKey(kind)
	creq = &base
	members, why := capable(rb, creq)
	if len(members) == 0 {
		return nil, nil, fmt.Errorf("no candidate of %s can take the %s request: %s", rb.Name, kind, strings.Join(why, "; "))
	}
	a, err := plans(members, creq)
	if err != nil {
		return nil, nil, err
	}
	if len(a.admitted) == 0 {
		need, usable := tooLarge(a.refused)
		return nil, nil, fmt.Errorf("the %s request needs about %d tokens, more than the usable input of %d: it was not sent", kind, need, usable)
	}
	for {
		sent, err := iv.ready(ctx, op, a.admitted, rb.Name, false)
		if err != nil {
			return nil, nil, err
		}
		resp, attempts, err := iv.sendPlans(ctx, kind, rb.Public, sent, onChunk)
		if ie := (*gateway.IntegrityError)(nil); errors.As(err, &ie) {
			return nil, nil, err
		}
		if err == nil {
			if ctx.Err() == nil {
				op.settle(sent, attempts, nil, iv.rt.redact)
			}
			return resp, attempts, nil
		}
		if ctx.Err() != nil {
			return nil, attempts, context.Cause(ctx)
		}
		if _, class := op.settle(sent, attempts, err, iv.rt.redact); !retryable(class) {
			return nil, attempts, err
		}
	}
}

// evidence writes one exchange's evidence row (and, for a primary call,
// the latest exchange): the exact bytes and hash of shown, and each
// attempt's plan hash.
func (iv *invoker) evidence(start time.Time, kind string, shown *requestPlan, resp *llm.ChatResponse, trace *gateway.Trace, err error, plans []*requestPlan) {
	rec, attempts := trace.Request, trace.Attempts
	creq := shown.req
	row := exchangeRow{ID: state.NewUUID(), Time: start.UTC(), Kind: kind, Session: iv.sess.id, Route: iv.route.Name,
		Provider: rec.Provider, UpstreamModel: rec.UpstreamModel, Status: rec.Status, Outcome: string(rec.Outcome),
		DurationMS: time.Since(start).Milliseconds(), RequestBytes: len(shown.plan.Body), RequestSHA256: shown.plan.Hash(),
		Messages: len(creq.Messages), Tools: len(creq.Tools), Attempts: []attemptEvidence{}}
	for i, a := range attempts {
		ev := attemptEvidence{Provider: a.Provider, Model: a.UpstreamModel, Status: a.Status, Outcome: string(a.Outcome), Error: a.Error,
			Code: a.Code, Type: a.Type, RetryAfter: a.RetryAfter}
		// The gateway passes the last attempt's own rejection through
		// (and keeps no cause for it): the error returned is its answer.
		if ae := (*llm.APIError)(nil); i == len(attempts)-1 && a.Code == "" && a.Type == "" &&
			a.Outcome != gateway.OutcomeRetryable && a.Outcome != gateway.OutcomeSkipped && errors.As(err, &ae) {
			ev.Code, ev.Type = ae.Code, ae.Type
		}
		if p := planFor(plans, a.Provider, a.UpstreamModel); p != nil {
			ev.RequestSHA256 = p.plan.Hash()
		}
		row.Attempts = append(row.Attempts, ev)
	}
	if err != nil {
		row.Error = iv.rt.redact(err.Error())
		if row.Outcome == "" || row.Outcome == string(gateway.OutcomeOK) {
			row.Outcome = "error"
		}
	} else if resp != nil {
		row.Usage = resp.Usage
		if len(resp.Choices) > 0 {
			row.FinishReason = resp.Choices[0].FinishReason
		}
	}
	iv.rt.writeExchange(iv.sess, row, creq, resp, kind == "primary")
}

// writeExchange appends the evidence row and, for primary calls, replaces
// the session's latest exchange. Evidence failures are logged; publication
// uncertainty stops the process through the publisher's fatal hook.
func (rt *Runtime) writeExchange(s *session, row exchangeRow, req *llm.ChatRequest, resp *llm.ChatResponse, primary bool) {
	raw, _ := json.Marshal(row)
	p := filepath.Join(s.dir, ExchangesFile)
	_, statErr := os.Lstat(p)
	if err := rt.p.Publisher.Append(p, state.Envelope{V: exchangeVersion, Rows: []json.RawMessage{raw}}, errors.Is(statErr, os.ErrNotExist)); err != nil {
		rt.log.Error("write exchange evidence", "session", s.id, "err", err)
		return
	}
	if !primary {
		return
	}
	ex := Exchange{exchangeRow: row, Request: req}
	if resp != nil && len(resp.Choices) > 0 {
		m := resp.Choices[0].Message
		ex.Response = &exchangeReply{Content: m.Content, Reasoning: m.ReasoningContent, ToolCalls: m.ToolCalls}
	}
	data, err := json.Marshal(ex)
	if err == nil {
		data = []byte(rt.redact(string(data)))
		err = rt.p.Publisher.Replace(filepath.Join(s.dir, LatestExchangeFile), data)
	}
	if err != nil {
		rt.log.Error("write latest exchange", "session", s.id, "err", err)
		return
	}
	rt.hint("exchange", s.id)
}
