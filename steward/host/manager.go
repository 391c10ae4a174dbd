package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
	"github.com/agentstack/agentstack/steward/policy"
	"github.com/agentstack/agentstack/steward/protocol"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/usage"
)

// ToolSource supplies the tools of a turn. It is asked once per turn, so a
// connector that connected later appears at the next turn, never mid-turn.
type ToolSource func() []agent.Tool

// Auditor receives audit events; it must never block or fail a turn.
type Auditor interface {
	Audit(ctx context.Context, e AuditEvent)
}

// AuditEvent is one thing that happened, before redaction.
type AuditEvent struct {
	Actor   string // user, assistant, agent, host
	Type    string // chat.message, tool.decision, tool.result, approval.request, …
	Risk    string // low, medium, high
	ChatID  string
	Tool    string
	Summary string
	Payload any
}

// ToolRecorder receives one row per tool call for the usage ledger.
type ToolRecorder interface {
	RecordTool(ctx context.Context, c usage.ToolCall)
}

// Broadcaster delivers frames to connected clients.
type Broadcaster interface {
	// Broadcast sends to every client (chat list changes, approvals).
	Broadcast(frame any)
	// Publish sends to the clients following chatID (streamed output).
	Publish(chatID string, frame any)
	Clients() int
}

// ManagerOptions configures a ChatManager.
type ManagerOptions struct {
	Store           *chats.Store
	Model           agent.Model
	ModelName       string // HOST_TIER
	SystemPrompt    string
	Tools           ToolSource
	Policy          *policy.Policy
	ApprovalTimeout time.Duration
	// DisconnectGrace is how long a pending approval waits for a client to
	// come back after the last one disconnected (a page reload) before it
	// resolves as no_channel.
	DisconnectGrace time.Duration
	MaxSteps        int
	// ContextWindow returns the context window of ModelName in tokens
	// (gateway.Config.ContextWindow), asked at each turn: a conversation
	// nearing it is compacted before the next model step. When it is nil
	// or returns 0, only a provider's context-length rejection compacts.
	ContextWindow func() int
	// Retry, when set, retries model calls that failed for a reason that
	// may pass (rate limits, overload, transient 5xx).
	Retry   *agent.RetryPolicy
	Clients Broadcaster
	// Notifier pushes what waits for the user (pending approvals, replies
	// and failures no app shows, quick-send results); nil: none.
	Notifier Notifier
	Audit    Auditor
	Usage    ToolRecorder
	Logger   *slog.Logger
	// Files registers the files of file cards for opening (set by the host).
	Files *fileOpener
}

// ChatManager runs turns: one at a time per chat, each persisted to the
// chat's transcript and agent session as it happens.
type ChatManager struct {
	opts ManagerOptions

	mu    sync.Mutex
	turns map[string]*turn // running turn per chat
	locks map[string]chan struct{}
	// pending holds the approvals and questions turns wait for.
	pending *pendingSet
	// sessions caches each chat's agent conversation after its first turn;
	// it is only read and written under the chat's lock.
	sessions map[string][]llm.Message
	// starting counts the turns waiting for their first model output.
	starting *startGate
	// known answers the chat lookup at the start of a turn from memory for
	// chats this host has read: true while the chat exists, false once the
	// host deleted it (IDs are never reused). Only the host writes chats.db,
	// and the SQLite read cost more CPU than all the rest of a turn's start.
	known map[string]bool
}

type turn struct {
	id      string
	cancel  context.CancelFunc
	journal *journal
	gate    *startGate
	left    sync.Once
}

// newTurn starts a turn's journal and counts the turn as waiting for its
// first output until outputStarted.
func (m *ChatManager) newTurn(ctx context.Context, chatID string, cancel context.CancelFunc) *turn {
	m.starting.enter()
	return &turn{id: chats.NewID("turn"), cancel: cancel, gate: m.starting,
		journal: newJournal(ctx, m.opts.Store, chatID, m.opts.Logger, m.starting)}
}

// outputStarted says the turn's first output has been handled, or that the
// turn ended without any; it may be called more than once.
func (t *turn) outputStarted() { t.left.Do(t.gate.leave) }

// NewManager returns a manager; it starts nothing.
func NewManager(opts ManagerOptions) *ChatManager {
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = policy.DefaultApprovalTimeout
	}
	if opts.DisconnectGrace <= 0 {
		opts.DisconnectGrace = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Tools == nil {
		opts.Tools = func() []agent.Tool { return nil }
	}
	return &ChatManager{opts: opts, turns: map[string]*turn{}, locks: map[string]chan struct{}{},
		pending: newPendingSet(), sessions: map[string][]llm.Message{},
		starting: newStartGate(), known: map[string]bool{}}
}

// TurnOptions varies a turn.
type TurnOptions struct {
	Files []protocol.File
	// Headless turns have no attached client (quick send): a gated tool
	// waits for an approval that may come from any client until the
	// approval timeout, then is denied.
	Headless bool
	// Control turns are the host's own instructions (a voice call's start):
	// the model reads text as a user message, the transcript shows a
	// control entry, never words the user did not say.
	Control     bool
	Attribution llm.Attribution
	// chatChecked says the caller has just looked the chat up, so the turn
	// does not look it up again before it starts.
	chatChecked bool
}

// lockChat serialises turns per chat; it gives up when ctx ends.
func (m *ChatManager) lockChat(ctx context.Context, chatID string) (func(), error) {
	m.mu.Lock()
	l, ok := m.locks[chatID]
	if !ok {
		l = make(chan struct{}, 1)
		m.locks[chatID] = l
	}
	m.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Running reports whether chatID has a turn in progress.
func (m *ChatManager) Running(chatID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns[chatID] != nil
}

// Abort stops the running turn of chatID; it reports whether one was running.
func (m *ChatManager) Abort(chatID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.turns[chatID]; t != nil {
		t.cancel()
		return true
	}
	return false
}

// RunTurn sends text into a chat and runs the agent until it answers. It
// never returns a Go error: every failure — a missing or deleted chat, a
// store or model failure, an abort — is a TurnResult with OK false.
func (m *ChatManager) RunTurn(ctx context.Context, chatID, text string, opts TurnOptions) protocol.TurnResult {
	fail := func(err error, aborted bool) protocol.TurnResult {
		return protocol.TurnResult{OK: false, Error: err.Error(), Aborted: aborted}
	}
	if !opts.chatChecked {
		if err := m.CheckChat(ctx, chatID); err != nil {
			return fail(err, false)
		}
	}
	unlock, err := m.lockChat(ctx, chatID)
	if err != nil {
		return fail(fmt.Errorf("waiting for the chat's previous turn: %w", err), errors.Is(err, context.Canceled))
	}
	defer unlock()

	if opts.Attribution.Service == "" {
		opts.Attribution = llm.Attribution{Service: "host", Action: "chat"}
	}
	return m.runTurnLocked(ctx, chatID, turnSpec{attribution: opts.Attribution, text: text, files: opts.Files, headless: opts.Headless,
		control: opts.Control}).result
}

// Budget returns the context budget of the chats' model now.
func (m *ChatManager) Budget() agent.Budget {
	b := agent.Budget{}
	if m.opts.ContextWindow != nil {
		b.ContextWindow = m.opts.ContextWindow()
	}
	return b
}

// contextStatus is the System page's row for the chats' context budget.
func (m *ChatManager) contextStatus() ServiceStatus {
	b := m.Budget()
	st := ServiceStatus{Name: "chat context", State: StateOK}
	if usable := b.UsableInput(); usable > 0 {
		st.Detail = fmt.Sprintf("%s: %d-token context window, %d usable for the conversation; a chat is summarised past %d tokens",
			m.opts.ModelName, b.ContextWindow, usable, int(agent.DefaultTrigger*float64(usable)))
	} else {
		st.Detail = fmt.Sprintf("%s: no context window declared (context_window in gateway.yaml), or too small for the %d-token reply reserve; "+
			"a chat is summarised only when the provider refuses it as too long", m.opts.ModelName, agent.DefaultOutputTokens)
	}
	return st
}

func (m *ChatManager) broadcast(frame any) {
	if m.opts.Clients != nil {
		m.opts.Clients.Broadcast(frame)
	}
}

func (m *ChatManager) publish(chatID string, frame any) {
	if m.opts.Clients != nil {
		m.opts.Clients.Publish(chatID, frame)
	}
}

func (m *ChatManager) audit(ctx context.Context, e AuditEvent) {
	if m.opts.Audit != nil {
		m.opts.Audit.Audit(context.WithoutCancel(ctx), e)
	}
}

func (m *ChatManager) cachedSession(chatID string) []llm.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[chatID]
}

func (m *ChatManager) cacheSession(chatID string, msgs []llm.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if msgs == nil {
		delete(m.sessions, chatID)
		return
	}
	m.sessions[chatID] = msgs
}

// Transcript returns a chat's transcript as a client opening it must see
// it: the stored entries followed by those the running turn has queued but
// not yet written.
func (m *ChatManager) Transcript(ctx context.Context, chatID string) ([]chats.Entry, error) {
	m.mu.Lock()
	t := m.turns[chatID]
	m.mu.Unlock()
	var queued []chats.Entry
	if t != nil {
		queued = t.journal.unwritten() // before the store: an entry written meanwhile is then read there
	}
	entries, err := m.opts.Store.Transcript(ctx, chatID)
	if err != nil {
		return nil, err
	}
	for _, q := range queued {
		if !slices.ContainsFunc(entries, func(e chats.Entry) bool { return e.ID == q.ID }) {
			entries = append(entries, q)
		}
	}
	return entries, nil
}

// CheckChat returns nil when chatID exists and chats.ErrNotFound when it does
// not (or an error of the store). It reads the store once per chat; after
// that it answers from memory until Forget or the host deletes the chat.
func (m *ChatManager) CheckChat(ctx context.Context, chatID string) error {
	m.mu.Lock()
	exists, seen := m.known[chatID]
	m.mu.Unlock()
	switch {
	case seen && exists:
		return nil
	case seen:
		return chats.ErrNotFound
	}
	if _, err := m.opts.Store.Get(ctx, chatID); err != nil {
		return err
	}
	m.mu.Lock()
	if _, seen := m.known[chatID]; !seen { // a deletion meanwhile wins
		m.known[chatID] = true
	}
	m.mu.Unlock()
	return nil
}

// deleted records that the host deleted chatID from the store (after Forget).
func (m *ChatManager) deleted(chatID string) {
	m.mu.Lock()
	m.known[chatID] = false
	m.mu.Unlock()
}

// Forget drops what the manager keeps in memory about a chat being deleted.
func (m *ChatManager) Forget(chatID string) {
	m.Abort(chatID)
	m.cacheSession(chatID, nil)
	m.mu.Lock()
	delete(m.locks, chatID)
	delete(m.known, chatID) // the next lookup reads the store
	m.mu.Unlock()
}

// journalOf returns the running turn's journal of chatID (approvals and
// questions only happen inside a turn).
func (m *ChatManager) journalOf(chatID string) *journal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns[chatID].journal
}

// PendingApprovals returns the approvals waiting in chatID.
func (m *ChatManager) PendingApprovals(chatID string) []protocol.ApprovalRequest {
	out := []protocol.ApprovalRequest{}
	for _, f := range m.pending.frames(chatID, protocol.EntryApproval) {
		out = append(out, f.(protocol.ApprovalRequest))
	}
	return out
}

// ErrNoApproval reports an approval that is not (or no longer) pending.
var ErrNoApproval = errors.New("no such pending approval (it may have been answered, timed out or been cancelled)")

// Respond answers a pending approval.
func (m *ChatManager) Respond(r protocol.ApprovalRespond) error {
	var resp policy.ApprovalResponse
	switch r.Decision {
	case protocol.DecisionApprove:
		resp = policy.ApprovalResponse{Verdict: policy.VerdictApproved, Args: r.Args, Note: r.Note}
		if len(r.Args) > 0 && string(r.Args) != "null" {
			var obj map[string]json.RawMessage
			if json.Unmarshal(r.Args, &obj) != nil || obj == nil {
				return errors.New("edited args must be a JSON object")
			}
		}
	case protocol.DecisionDeny:
		resp = policy.ApprovalResponse{Verdict: policy.VerdictDenied, Note: r.Note}
	case protocol.DecisionRevise:
		resp = policy.ApprovalResponse{Verdict: policy.VerdictRevise, Note: r.Note}
	default:
		return fmt.Errorf("unknown decision %q: use approve, deny or revise", r.Decision)
	}
	if !m.pending.answer(r.ApprovalID, protocol.EntryApproval, resp) {
		return ErrNoApproval
	}
	return nil
}

// chatApprover routes a chat's approval requests to the connected clients.
type chatApprover struct {
	m        *ChatManager
	chatID   string
	headless bool
}

func (a *chatApprover) Approve(ctx context.Context, req policy.ApprovalRequest) (policy.ApprovalResponse, error) {
	m := a.m
	// The card goes into the transcript even when nobody can see it now: the
	// observer's Resolved updates it, and the chat keeps a trace of each
	// call that waited for the user.
	m.journalCard(a.chatID, req.ID, protocol.EntryApproval, approvalCard(req, protocol.StatusPending, policy.ApprovalResponse{}))
	if !a.headless && (m.opts.Clients == nil || m.opts.Clients.Clients() == 0) {
		return policy.ApprovalResponse{Verdict: policy.VerdictNoChannel}, nil
	}
	frame := protocol.ApprovalRequest{Envelope: protocol.Env(protocol.TypeApprovalRequest, ""), ChatID: a.chatID,
		ApprovalID: req.ID, CallID: req.CallID, Tool: req.Tool, Args: req.Args, Schema: req.Schema, ExpiresAt: req.ExpiresAt}
	p := &pendingRequest{id: req.ID, kind: protocol.EntryApproval, chatID: a.chatID, frame: frame, answer: make(chan any, 1)}
	defer m.pending.add(p)()
	m.broadcast(frame)
	m.notify(ctx, push.Event{Kind: push.KindApproval, ChatID: a.chatID, ApprovalID: req.ID, Tool: req.Tool}, false)
	m.audit(ctx, AuditEvent{Actor: "agent", Type: "approval.request", Risk: "medium", ChatID: a.chatID, Tool: req.Tool, Summary: "approval requested for " + req.Tool, Payload: map[string]any{"args": json.RawMessage(req.Args)}})

	// A pending approval survives a page reload: only when no client has been
	// connected for DisconnectGrace does it resolve as no_channel.
	tick := time.NewTicker(min(m.opts.DisconnectGrace/4, time.Second))
	defer tick.Stop()
	var alone time.Time
	for {
		if !a.headless {
			switch {
			case m.opts.Clients.Clients() > 0:
				alone = time.Time{}
			case alone.IsZero():
				alone = time.Now()
			case time.Since(alone) >= m.opts.DisconnectGrace:
				return policy.ApprovalResponse{Verdict: policy.VerdictNoChannel}, nil
			}
		}
		select {
		case resp := <-p.answer:
			return resp.(policy.ApprovalResponse), nil
		case <-ctx.Done():
			return policy.ApprovalResponse{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// policyObserver writes decisions and approval outcomes to the audit trail,
// the transcript and the clients.
type policyObserver struct {
	m      *ChatManager
	chatID string
}

func (o *policyObserver) Decided(ctx context.Context, tool string, d policy.Decision, args json.RawMessage) {
	risk := map[policy.Decision]string{policy.Allow: "low", policy.Gate: "medium", policy.Deny: "high"}[d]
	o.m.audit(ctx, AuditEvent{Actor: "host", Type: "tool.decision", Risk: risk, ChatID: o.chatID, Tool: tool,
		Summary: fmt.Sprintf("%s: %s", tool, d), Payload: map[string]any{"decision": string(d), "args": args}})
}

func (o *policyObserver) Resolved(ctx context.Context, req policy.ApprovalRequest, resp policy.ApprovalResponse) {
	m := o.m
	verdict := string(resp.Verdict)
	typ := "approval.response"
	if resp.Verdict == policy.VerdictTimeout {
		typ = "approval.timeout"
	}
	m.audit(ctx, AuditEvent{Actor: "user", Type: typ, Risk: "medium", ChatID: o.chatID, Tool: req.Tool,
		Summary: req.Tool + ": " + verdict, Payload: map[string]any{"verdict": verdict, "note": resp.Note, "args": resp.Args}})
	m.updateCard(o.chatID, req.ID, approvalCard(req, verdict, resp))
	m.broadcast(protocol.ApprovalResolved{Envelope: protocol.Env(protocol.TypeApprovalResolved, ""), ChatID: o.chatID,
		ApprovalID: req.ID, Verdict: verdict, Args: resp.Args, Note: resp.Note})
}

// approvalCard is req's transcript card with its status and, once
// answered, the user's note and edits.
func approvalCard(req policy.ApprovalRequest, status string, resp policy.ApprovalResponse) protocol.ApprovalCard {
	return protocol.ApprovalCard{ApprovalID: req.ID, CallID: req.CallID, Tool: req.Tool, Args: req.Args, Status: status,
		Note: resp.Note, EditedArgs: resp.Args}
}
