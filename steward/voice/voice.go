// Package voice is Steward's voice channel: a transport-neutral call
// coordinator over the same chats, tools, policy and approvals as the web
// app. The transport (Ringback, an external MCP server owning SIP media) is
// reached through a small interface; the coordinator owns what the host must
// guarantee: preflight before any chat or dial, one call at a time, request
// ids remembered for ten minutes, the call's phases, the terminal outcome as
// data, spoken approvals the model neither writes nor interprets, and the
// single replacement call after a connected call's media is interrupted.
package voice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/usage"
)

// Phases of a call, as /voice/status reports them.
const (
	PhaseIdle         = "idle"
	PhasePreflighting = "preflighting"
	PhaseStarting     = "starting"
	PhaseRinging      = "ringing"
	PhaseSpeaking     = "speaking"
	PhaseListening    = "listening"
	PhaseProcessing   = "processing"
	PhaseEnding       = "ending"
	PhaseFailed       = "failed"
)

// Tools of the voice transport's MCP contract.
const (
	ToolCallStart  = "call_start"
	ToolCallStatus = "call_status"
	ToolCallEnd    = "call_end"
	ToolConverse   = "converse"
)

// Bounds.
const (
	MaxOpeningLine   = 300
	requestIDTTL     = 10 * time.Minute
	maxRequestID     = 128
	recoveryDelay    = 3 * time.Second
	busyRetryAfter   = 15 * time.Second
	approvalPoll     = 200 * time.Millisecond
	defaultPreflight = 10 * time.Second
)

// Transport calls the voice server's tools (an MCP session).
type Transport interface {
	// Tools lists the server's tool names.
	Tools(ctx context.Context) ([]string, error)
	// Call runs a tool and returns its text content; isError reports an
	// MCP tool error.
	Call(ctx context.Context, tool string, args map[string]any) (text string, isError bool, err error)
}

// Runner is the host's side of a call: a fresh chat, the hidden control turn
// that starts the call (the agent then talks through the transport's tools),
// and the chat's pending approvals.
type Runner interface {
	NewChat(ctx context.Context, title string) (chatID string, err error)
	// RunControlTurn runs text as a host control turn (not shown as the
	// user's words) and returns when the turn ends.
	RunControlTurn(ctx context.Context, chatID, text string) protocol.TurnResult
	PendingApprovals(chatID string) []protocol.ApprovalRequest
	Respond(r protocol.ApprovalRespond) error
}

// Network is the call-scoped network fallback (a Tailscale exit node,
// steward/voice/exitnode): held for one retried dial, then released.
type Network interface {
	Acquire(ctx context.Context) (NetworkLease, error)
}

// NetworkLease restores the previous route when released.
type NetworkLease interface {
	Release(ctx context.Context) error
}

// UsageRecorder receives one row per spoken approval (voice.approval) and
// per call (voice.call) for the Usage page's voice section.
type UsageRecorder interface {
	RecordTool(ctx context.Context, c usage.ToolCall)
}

// Auditor records voice events (voice.call, voice.approval).
type Auditor interface {
	AuditVoice(ctx context.Context, typ, chatID, summary string, payload map[string]any)
}

// Options configure a Coordinator.
type Options struct {
	Transport Transport
	Runner    Runner
	Audit     Auditor
	Usage     UsageRecorder
	// Network, when set, gives a dial that failed with network_error before
	// the phone answered one retry through another route.
	Network Network
	// OpeningLine is STEWARD_VOICE_OPENING_LINE, the default first sentence.
	OpeningLine string
	// Language is en or it: the approval vocabulary and prompts.
	Language string
	// PreflightTimeout bounds startup checks (STEWARD_VOICE_PREFLIGHT_TIMEOUT_MS, default 10 s).
	PreflightTimeout time.Duration
	// RecoveryDelay is the wait before a replacement call (default 3 s).
	RecoveryDelay time.Duration
	Log           *slog.Logger
	Now           func() time.Time
}

// Coordinator admits and runs calls.
type Coordinator struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	state    Status
	requests map[string]cachedRequest
	// latched is the first actionable failure seen during the current call:
	// a later "NO ACTIVE CALL" or cleanup error never overwrites it.
	latched *outcomeStatus
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type cachedRequest struct {
	chatID string
	at     time.Time
}

// Status is /voice/status.
type Status struct {
	Active    bool      `json:"active"`
	Phase     string    `json:"phase"`
	ChatID    string    `json:"chatId,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Outcome is the terminal media outcome of the last call (no_answer,
	// busy, media_interrupted, completed, …); Error its detail.
	Outcome    string `json:"outcome,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	// Recovery is true for the one replacement call after an interruption.
	Recovery bool `json:"recovery,omitempty"`
}

// New returns a coordinator; Close ends its background calls.
func New(opts Options) *Coordinator {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PreflightTimeout <= 0 {
		opts.PreflightTimeout = defaultPreflight
	}
	if opts.RecoveryDelay <= 0 {
		opts.RecoveryDelay = recoveryDelay
	}
	if opts.Language != "it" {
		opts.Language = "en"
	}
	if opts.OpeningLine == "" {
		opts.OpeningLine = vocab[opts.Language].opening
	}
	c := &Coordinator{opts: opts, log: opts.Log, state: Status{Phase: PhaseIdle}, requests: map[string]cachedRequest{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Close ends the running call's turn and waits for it.
func (c *Coordinator) Close() {
	c.cancel()
	c.wg.Wait()
}

// Status returns the live state.
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// CallRequest asks for a call.
type CallRequest struct {
	// OpeningLine replaces the configured first sentence (at most 300 characters).
	OpeningLine string `json:"openingLine,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
}

// BusyError is the answer while another call is active (409).
type BusyError struct {
	RetryAfter time.Duration
	State      Status
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("a call is already %s; try again in %s", e.State.Phase, e.RetryAfter)
}

// InputError is a request the caller must fix (400).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// PreflightError says why the transport is not usable; no chat was created
// and nothing was dialled (503).
type PreflightError struct{ Msg string }

func (e *PreflightError) Error() string { return e.Msg }

// Started is the answer once a call's turn has started (202).
type Started struct {
	ChatID string `json:"chatId"`
	// Replayed is true when the request id was seen in the last ten minutes.
	Replayed bool `json:"replayed,omitempty"`
}

// Start runs preflight, creates a fresh chat and starts the call's control
// turn in the background. It returns once the turn has started.
func (c *Coordinator) Start(ctx context.Context, req CallRequest) (*Started, error) {
	line := strings.TrimSpace(req.OpeningLine)
	if utf8.RuneCountInString(line) > MaxOpeningLine {
		return nil, &InputError{fmt.Sprintf("openingLine is over %d characters", MaxOpeningLine)}
	}
	if len(req.RequestID) > maxRequestID {
		return nil, &InputError{fmt.Sprintf("requestId is over %d characters", maxRequestID)}
	}
	if line == "" {
		line = c.opts.OpeningLine
	}
	c.mu.Lock()
	now := c.opts.Now()
	for id, r := range c.requests {
		if now.Sub(r.at) > requestIDTTL {
			delete(c.requests, id)
		}
	}
	if r, ok := c.requests[req.RequestID]; ok && req.RequestID != "" {
		c.mu.Unlock()
		return &Started{ChatID: r.chatID, Replayed: true}, nil
	}
	if c.state.Active {
		st := c.state
		c.mu.Unlock()
		return nil, &BusyError{RetryAfter: busyRetryAfter, State: st}
	}
	c.state = Status{Active: true, Phase: PhasePreflighting, StartedAt: now}
	c.mu.Unlock()

	if err := c.preflight(ctx); err != nil {
		c.finish(Status{Phase: PhaseFailed, Error: err.Error()})
		return nil, &PreflightError{err.Error()}
	}
	chatID, err := c.opts.Runner.NewChat(ctx, vocab[c.opts.Language].title)
	if err != nil {
		c.finish(Status{Phase: PhaseFailed, Error: err.Error()})
		return nil, fmt.Errorf("create the call's chat: %w", err)
	}
	c.mu.Lock()
	c.state.ChatID, c.state.Phase = chatID, PhaseStarting
	if req.RequestID != "" {
		c.requests[req.RequestID] = cachedRequest{chatID: chatID, at: now}
	}
	c.mu.Unlock()
	c.audit("voice.call", chatID, "call started", map[string]any{"openingLine": line})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(chatID, controlText(c.opts.Language, line), false)
	}()
	return &Started{ChatID: chatID}, nil
}

// preflight checks the transport's tools and asks call_status, retrying
// that safe check once.
func (c *Coordinator) preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.PreflightTimeout)
	defer cancel()
	names, err := c.opts.Transport.Tools(ctx)
	if err != nil {
		return fmt.Errorf("the voice transport did not start: %w", err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	var missing []string
	for _, n := range []string{ToolCallStart, ToolCallStatus, ToolCallEnd} {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the voice transport lacks %s", strings.Join(missing, ", "))
	}
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		text, isErr, err := c.opts.Transport.Call(ctx, ToolCallStatus, map[string]any{})
		switch {
		case err != nil:
			last = err
		case isErr:
			last = errors.New(firstLine(text))
		default:
			return nil
		}
	}
	return fmt.Errorf("the voice transport's status check failed: %w", last)
}

// run is one call: the control turn (the agent dials and converses through
// the transport's tools) with spoken approvals beside it, then the outcome.
func (c *Coordinator) run(chatID, control string, recovery bool) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	approvals := make(chan struct{})
	go func() {
		defer close(approvals)
		c.serveApprovals(ctx, chatID)
	}()
	c.mu.Lock()
	c.latched = nil
	c.mu.Unlock()
	res := c.opts.Runner.RunControlTurn(ctx, chatID, control)
	cancel()
	<-approvals
	st := c.callOutcome(context.WithoutCancel(c.ctx))
	c.mu.Lock()
	if l := c.latched; l != nil && st.Outcome != l.Outcome {
		st.Outcome, st.Error, st.connected = l.Outcome, l.Error, st.connected || l.connected
	}
	c.mu.Unlock()
	if !res.OK && st.Outcome == "" {
		st.Outcome, st.Error = "turn_failed", res.Error
	}
	st.ChatID, st.Recovery = chatID, recovery
	c.audit("voice.call", chatID, "call ended: "+st.Outcome, map[string]any{"outcome": st.Outcome, "error": st.Error,
		"durationMs": st.DurationMs, "recovery": recovery})
	c.recordUsage(chatID, "voice.call", time.Duration(st.DurationMs)*time.Millisecond, st.Outcome == OutcomeCompleted, st.Outcome)
	if st.Outcome == OutcomeNetworkError && !st.connected && !recovery && c.opts.Network != nil && c.ctx.Err() == nil {
		// Nothing was heard yet: one retry of the dial through the
		// fallback route, in the same chat, the route restored after.
		lease, err := c.opts.Network.Acquire(c.ctx)
		if err != nil {
			st.Error = strings.TrimSpace(st.Error + "; network fallback unavailable: " + err.Error())
			c.audit("voice.network", chatID, "network fallback unavailable", map[string]any{"error": err.Error()})
			c.finish(st.Status)
			return
		}
		c.audit("voice.network", chatID, "retrying the dial through the fallback route", nil)
		c.setRetrying(chatID, st.Outcome)
		c.run(chatID, fmt.Sprintf(vocab[c.opts.Language].redial, ToolCallStart, ToolConverse, ToolCallEnd), true)
		if err := lease.Release(context.WithoutCancel(c.ctx)); err != nil {
			c.log.Error("the previous network route was not restored after the call", "err", err)
			c.audit("voice.network", chatID, "route not restored", map[string]any{"error": err.Error()})
		}
		return
	}
	if st.Outcome == OutcomeMediaInterrupted && st.connected && !recovery && c.ctx.Err() == nil {
		// One replacement call in the same chat, asking where the user was.
		c.setRetrying(chatID, st.Outcome)
		select {
		case <-time.After(c.opts.RecoveryDelay):
		case <-c.ctx.Done():
			c.finish(st.Status)
			return
		}
		c.run(chatID, recoveryText(c.opts.Language), true)
		return
	}
	c.finish(st.Status)
}

func (c *Coordinator) recordUsage(chatID, tool string, d time.Duration, ok bool, errText string) {
	if c.opts.Usage == nil {
		return
	}
	if ok {
		errText = ""
	}
	c.opts.Usage.RecordTool(context.WithoutCancel(c.ctx), usage.ToolCall{Time: c.opts.Now().Add(-d), Service: "host", Action: "voice-call",
		ChatID: chatID, Tool: tool, Duration: d, OK: ok, Error: errText})
}

// setRetrying marks the call live again for its one retry.
func (c *Coordinator) setRetrying(chatID, previous string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = Status{Active: true, Phase: PhaseStarting, ChatID: chatID, StartedAt: c.opts.Now(), Recovery: true, Outcome: previous}
}

func (c *Coordinator) finish(st Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Active = false
	if st.Phase == "" {
		st.Phase = PhaseIdle
		if st.Outcome != "" && st.Outcome != OutcomeCompleted {
			st.Phase = PhaseFailed
		}
	}
	c.state = st
}

// latch keeps the first actionable failure the transport reported.
func (c *Coordinator) latch(st outcomeStatus) {
	if st.Outcome == "" || st.Outcome == OutcomeCompleted || st.Outcome == "unknown" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latched == nil {
		c.latched = &st
	}
}

// setPhase records a phase the transport reported while the call is live.
func (c *Coordinator) setPhase(phase string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Active {
		c.state.Phase = phase
	}
}

func (c *Coordinator) audit(typ, chatID, summary string, payload map[string]any) {
	if c.opts.Audit != nil {
		c.opts.Audit.AuditVoice(context.WithoutCancel(c.ctx), typ, chatID, summary, payload)
	}
}

// callOutcome asks the transport how the call ended.
func (c *Coordinator) callOutcome(ctx context.Context) outcomeStatus {
	ctx, cancel := context.WithTimeout(ctx, c.opts.PreflightTimeout)
	defer cancel()
	text, _, err := c.opts.Transport.Call(ctx, ToolCallStatus, map[string]any{})
	if err != nil {
		return outcomeStatus{Status: Status{Outcome: "unknown", Error: err.Error()}}
	}
	return parseOutcome(text)
}

func controlText(lang, line string) string {
	return fmt.Sprintf(vocab[lang].control, ToolCallStart, mustJSON(line), ToolConverse, ToolCallEnd)
}

func recoveryText(lang string) string {
	return fmt.Sprintf(vocab[lang].recovery, ToolCallStart, ToolConverse, ToolCallEnd)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}
