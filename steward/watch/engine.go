package watch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/push"
	"github.com/agentstack/agentstack/steward/usage"
)

// Polling bounds (spec: Performance, Bounding And Backpressure).
const (
	DefaultPollInterval = 45 * time.Second // WATCH_POLL_MS default
	MinPollInterval     = 15 * time.Second // floor of the configured base
	MinUrgentInterval   = 5 * time.Second  // global floor of adapter urgency
	DeliveryBatch       = 20               // pending events read per batch
	// MaxGenerationFailures failed agent turns are followed by the adapter's
	// fallback text.
	MaxGenerationFailures = 2
	// maxDeliveryAttempts bounds generation plus fallback failures, and
	// maxPushAttempts all-failed push sends, before an event is given up.
	maxDeliveryAttempts = 8
	maxPushAttempts     = 60
	defaultConcurrency  = 8
)

// Clock is the engine's time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Deliverer is what the engine needs from the host: resume a chat's agent
// session with a structured event (never shown as a user message) and return
// the notification text it wrote. When Turn.Fallback is set it posts that
// text as-is without a model. It returns ErrChatBusy while the chat has an
// interactive turn, and creates a "Monitor automatici" chat when the original
// one was deleted (Delivered.ChatID then names it).
type Deliverer interface {
	DeliverWatchTurn(ctx context.Context, t Turn) (Delivered, error)
}

// ErrChatBusy defers an event while its chat runs an interactive turn.
var ErrChatBusy = errors.New("the chat has an interactive turn in flight")

// Turn is one background delivery turn.
type Turn struct {
	ChatID  string
	WatchID string
	EventID string
	// Prompt is the structured event message, marked as automatic data.
	Prompt string
	// Tools are exactly the tools this turn may use: read-only tools plus
	// the guarded grants of the matched rules. Everything else is denied.
	Tools []agent.Tool
	// Fallback, when set, is posted as the chat's assistant message instead
	// of running the model.
	Fallback string
}

// Delivered is the outcome of a delivery turn.
type Delivered struct {
	ChatID    string
	MessageID string
	Text      string
}

// Notifier sends Web Push notifications; *push.Service is one.
type Notifier interface {
	Send(ctx context.Context, n push.Notification) push.Report
}

// ToolRecorder receives usage rows for polling and delivery.
type ToolRecorder interface {
	RecordTool(ctx context.Context, c usage.ToolCall)
}

// Lifecycle is an audit-worthy thing that happened to a watch; WatchID is
// the correlation id.
type Lifecycle struct {
	Type    string // watch.created, watch.stopped, watch.expired, watch.completed, watch.poll_failed, watch.event_queued, …
	WatchID string
	ChatID  string
	EventID string
	Summary string
	Payload map[string]any
}

// Options configures an Engine.
type Options struct {
	// Path is watches.db (WATCH_DB, default STEWARD_HOME/watches.db).
	Path     string
	Adapters []Adapter
	// Deliverer resumes chats; required to deliver.
	Deliverer Deliverer
	// Notifier sends pushes; nil means no push endpoint is registered.
	Notifier Notifier
	// Capabilities are the write tools agent watches may be granted.
	Capabilities *Registry
	// Tools returns the tools available to the host (connectors and host
	// tools); background turns get the read-only ones and the matched grants.
	Tools func() []agent.Tool
	// ReadOnly says which tools every background turn may use.
	ReadOnly func(tool string) bool
	// PollInterval is WATCH_POLL_MS: default 45 s, floor 15 s.
	PollInterval time.Duration
	// Concurrency bounds simultaneous snapshot reads (default 8).
	Concurrency int
	// ContinuationSource/Event are the adapter and event a continuation
	// child watch uses (default "time" / "time.reached").
	ContinuationSource string
	ContinuationEvent  string
	// Language picks localized notification titles (default "en").
	Language    string
	Clock       Clock
	Logger      *slog.Logger
	OnLifecycle func(ctx context.Context, e Lifecycle)
	Usage       ToolRecorder
}

// Engine polls watches and delivers their events. Run it once per process:
// a process-local single-flight guard prevents overlapping cycles.
type Engine struct {
	opts     Options
	st       *store
	log      *slog.Logger
	clock    Clock
	adapters map[string]Adapter
	running  sync.Mutex
	wake     chan struct{}

	mu       sync.Mutex
	nextDue  map[string]time.Time // per active watch, process-local
	deferred bool                 // the last cycle left deliverable events waiting
	status   Status
}

// Status is what the host's system page shows about this process's engine.
type Status struct {
	LastPoll     time.Time `json:"lastPoll,omitzero"`
	LastDelivery time.Time `json:"lastDelivery,omitzero"`
	LastError    string    `json:"lastError,omitempty"`
	Active       int       `json:"active"`
	Pending      int       `json:"pending"`
}

// Open opens watches.db and returns an engine; it starts nothing.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	opts.PollInterval = max(opts.PollInterval, MinPollInterval)
	if opts.Concurrency <= 0 {
		opts.Concurrency = defaultConcurrency
	}
	if opts.ContinuationSource == "" {
		opts.ContinuationSource = "time"
	}
	if opts.ContinuationEvent == "" {
		opts.ContinuationEvent = "time.reached"
	}
	if opts.Language == "" {
		opts.Language = "en"
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Tools == nil {
		opts.Tools = func() []agent.Tool { return nil }
	}
	e := &Engine{opts: opts, log: opts.Logger, clock: opts.Clock, adapters: map[string]Adapter{},
		wake: make(chan struct{}, 1), nextDue: map[string]time.Time{}}
	for _, a := range opts.Adapters {
		if _, dup := e.adapters[a.Source()]; dup {
			return nil, fmt.Errorf("two watch adapters for source %q", a.Source())
		}
		e.adapters[a.Source()] = a
	}
	st, err := openStore(ctx, opts.Path)
	if err != nil {
		return nil, err
	}
	e.st = st
	return e, nil
}

// Close closes watches.db. Stop Run first.
func (e *Engine) Close() error { return e.st.db.Close() }

// Sources lists the registered adapters.
func (e *Engine) Sources() []string {
	out := make([]string, 0, len(e.adapters))
	for s := range e.adapters {
		out = append(out, s)
	}
	return out
}

func (e *Engine) emit(ctx context.Context, l Lifecycle) {
	if e.opts.OnLifecycle != nil {
		e.opts.OnLifecycle(context.WithoutCancel(ctx), l)
	}
}

func (e *Engine) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// CreateRequest describes a new watch.
type CreateRequest struct {
	Source      string
	ResourceRef string
	Instruction string
	ChatID      string
	Rules       []Rule
	// ExpiresAt overrides the adapter's default expiry.
	ExpiresAt time.Time
	// Agent allows grants (create_agent_watch, after approval).
	Agent bool
}

// Prepared is a validated request with its initial snapshot, ready to store
// or to show in an approval.
type Prepared struct {
	CreateRequest
	Snapshot json.RawMessage
}

// Prepare validates req, freezes relative references (a relative time
// becomes an instant now, before any approval), reads the initial snapshot
// and checks the rules against it. It stores nothing.
func (e *Engine) Prepare(ctx context.Context, req CreateRequest) (*Prepared, error) {
	now := e.clock.Now()
	a, ok := e.adapters[req.Source]
	if !ok {
		return nil, fmt.Errorf("unknown watch source %q (available: %s)", req.Source, strings.Join(e.Sources(), ", "))
	}
	req.Instruction = strings.TrimSpace(req.Instruction)
	if req.Instruction == "" || len([]rune(req.Instruction)) > MaxInstruction {
		return nil, fmt.Errorf("instruction must be the user's request in 1–%d characters", MaxInstruction)
	}
	if strings.TrimSpace(req.ChatID) == "" {
		return nil, errors.New("a watch needs its originating chat")
	}
	if err := validateRules(req.Rules); err != nil {
		return nil, err
	}
	// Rules are stored as JSON: give adapters the same decoded form (numbers
	// as float64) whether they came from a tool call or from Go code.
	b, err := json.Marshal(req.Rules)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	req.Rules = nil
	if err := json.Unmarshal(b, &req.Rules); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	hasGrants := false
	for _, r := range req.Rules {
		hasGrants = hasGrants || len(r.Grants) > 0
	}
	switch {
	case hasGrants && !req.Agent:
		return nil, errors.New("rules with grants need create_agent_watch, which asks the user's approval")
	case hasGrants:
		if err := e.opts.Capabilities.validateGrants(req.Rules); err != nil {
			return nil, err
		}
	}
	if p, ok := a.(RefPreparer); ok {
		ref, err := p.PrepareRef(req.ResourceRef, now)
		if err != nil {
			return nil, err
		}
		req.ResourceRef = ref
	}
	if strings.TrimSpace(req.ResourceRef) == "" || len(req.ResourceRef) > 4096 {
		return nil, errors.New("resourceRef is required (at most 4096 characters)")
	}
	snap, err := a.Snapshot(ctx, req.ResourceRef)
	if err != nil {
		return nil, fmt.Errorf("read the initial state: %w", err)
	}
	if a.IsTerminal(snap) {
		return nil, errors.New("there is nothing left to watch: the resource is already in a final state")
	}
	if c, ok := a.(RuleChecker); ok {
		if req.Rules, err = c.CheckRules(req.Rules, snap); err != nil {
			return nil, err
		}
	}
	for _, r := range req.Rules {
		if r.Trigger != nil {
			if _, ok := timestampAt(decode(snap), r.Trigger.Field); !ok {
				return nil, fmt.Errorf("rule %q: %s is not a timestamp of the watched state", r.ID, r.Trigger.Field)
			}
		}
	}
	if req.ExpiresAt.IsZero() {
		req.ExpiresAt = a.DefaultExpiry(snap, now)
	}
	switch {
	case !req.ExpiresAt.After(now):
		return nil, errors.New("the expiry is already past")
	case req.ExpiresAt.Sub(now) > MaxExpiry:
		return nil, fmt.Errorf("a watch expires within %s", MaxExpiry)
	}
	return &Prepared{CreateRequest: req, Snapshot: snap}, nil
}

// Create prepares and stores a watch with its initial snapshot.
func (e *Engine) Create(ctx context.Context, req CreateRequest) (*Watch, error) {
	p, err := e.Prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.store(ctx, p, newID("w"), "", 0, nil)
}

func (e *Engine) store(ctx context.Context, p *Prepared, id, parentEvent string, attempt int, wctx json.RawMessage) (*Watch, error) {
	now := e.clock.Now()
	w := &Watch{ID: id, Source: p.Source, ResourceRef: p.ResourceRef, Rules: p.Rules, Instruction: p.Instruction,
		ChatID: p.ChatID, Agent: p.Agent, Status: StatusActive, Snapshot: p.Snapshot, CreatedAt: now, ExpiresAt: p.ExpiresAt,
		LastCheckAt: now, ParentEventID: parentEvent, Attempt: attempt, Context: wctx}
	inserted, err := e.st.insertWatch(ctx, w)
	if err != nil {
		return nil, err
	}
	if !inserted {
		return e.st.getWatch(ctx, id)
	}
	e.mu.Lock()
	e.nextDue[w.ID] = now.Add(e.interval(w, now))
	e.mu.Unlock()
	e.emit(ctx, Lifecycle{Type: "watch.created", WatchID: w.ID, ChatID: w.ChatID,
		Summary: fmt.Sprintf("%s watch with %d rules", w.Source, len(w.Rules)),
		Payload: map[string]any{"source": w.Source, "rules": w.Rules, "agent": w.Agent, "expiresAt": w.ExpiresAt, "parentEventId": parentEvent}})
	e.kick()
	return w, nil
}

// Stop moves an active watch to stopped. Stopping an ended watch changes
// nothing and is not an error; it returns the watch's status.
func (e *Engine) Stop(ctx context.Context, id string) (string, error) {
	now := e.clock.Now()
	ended, err := e.st.endWatch(ctx, id, StatusStopped, now)
	if err != nil {
		return "", err
	}
	w, err := e.st.getWatch(ctx, id)
	if err != nil {
		return "", err
	}
	if ended {
		e.forget(id)
		e.emit(ctx, Lifecycle{Type: "watch.stopped", WatchID: id, ChatID: w.ChatID, Summary: "watch stopped"})
	}
	return w.Status, nil
}

// Get returns a watch.
func (e *Engine) Get(ctx context.Context, id string) (*Watch, error) { return e.st.getWatch(ctx, id) }

// List returns the watches of chatID (every chat when empty), active only
// unless all.
func (e *Engine) List(ctx context.Context, chatID string, all bool) ([]*Watch, error) {
	where, args := "1 = 1", []any{}
	if chatID != "" {
		where, args = "chat_id = ?", append(args, chatID)
	}
	if !all {
		where += " AND status = 'active'"
	}
	return e.st.listWatches(ctx, where, args...)
}

// Status reports this process's polling and delivery state.
func (e *Engine) Status(ctx context.Context) Status {
	e.mu.Lock()
	s := e.status
	e.mu.Unlock()
	e.st.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM watches WHERE status = 'active'`).Scan(&s.Active)
	e.st.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM watch_events WHERE status = 'pending'`).Scan(&s.Pending)
	return s
}

func (e *Engine) forget(id string) {
	e.mu.Lock()
	delete(e.nextDue, id)
	e.mu.Unlock()
}

// Cycle reports one poll-and-deliver pass.
type Cycle struct {
	Skipped   bool // another pass was running (single flight)
	Expired   int
	Polled    int
	Failed    int
	Queued    int
	Completed int
	Delivered int
	Deferred  int
}

// RunOnce runs one poll-and-deliver pass: expiry first, then the due active
// watches in creation order, then the oldest pending events. A pass already
// in progress makes it return at once with Skipped.
func (e *Engine) RunOnce(ctx context.Context) (Cycle, error) {
	if !e.running.TryLock() {
		return Cycle{Skipped: true}, nil
	}
	defer e.running.Unlock()
	var c Cycle
	now := e.clock.Now()
	start := time.Now()
	err := e.expire(ctx, now, &c)
	if err == nil {
		err = e.poll(ctx, now, &c)
	}
	if c.Polled > 0 && e.opts.Usage != nil {
		e.opts.Usage.RecordTool(ctx, usage.ToolCall{Time: start, Service: "host", Action: "watch-poll", Tool: "watch.poll",
			Duration: time.Since(start), OK: err == nil && c.Failed == 0, Error: errString(err)})
	}
	if err == nil {
		err = e.deliver(ctx, &c)
	}
	e.mu.Lock()
	e.status.LastPoll = now
	if c.Delivered > 0 {
		e.status.LastDelivery = now
	}
	e.status.LastError = errString(err)
	e.deferred = c.Deferred > 0
	e.mu.Unlock()
	return c, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (e *Engine) expire(ctx context.Context, now time.Time, c *Cycle) error {
	due, err := e.st.listWatches(ctx, "status = 'active' AND expires_at <= ?", now.UnixMilli())
	if err != nil {
		return err
	}
	for _, w := range due {
		ended, err := e.st.endWatch(ctx, w.ID, StatusExpired, now)
		if err != nil {
			return err
		}
		if ended {
			c.Expired++
			e.forget(w.ID)
			e.emit(ctx, Lifecycle{Type: "watch.expired", WatchID: w.ID, ChatID: w.ChatID, Summary: "watch expired",
				Payload: map[string]any{"expiresAt": w.ExpiresAt}})
		}
	}
	return nil
}

// polled is one watch's read.
type polled struct {
	w    *Watch
	snap json.RawMessage
	err  error
}

func (e *Engine) poll(ctx context.Context, now time.Time, c *Cycle) error {
	active, err := e.st.listWatches(ctx, "status = 'active'")
	if err != nil {
		return err
	}
	var due []*polled
	e.mu.Lock()
	for _, w := range active {
		if next, ok := e.nextDue[w.ID]; !ok || !next.After(now) {
			due = append(due, &polled{w: w})
		}
	}
	e.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	// Read concurrently; apply in creation order.
	sem := make(chan struct{}, e.opts.Concurrency)
	var wg sync.WaitGroup
	for _, p := range due {
		a, ok := e.adapters[p.w.Source]
		if !ok {
			p.err = fmt.Errorf("no adapter is registered for source %q", p.w.Source)
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p.snap, p.err = a.Snapshot(ctx, p.w.ResourceRef)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	tx, err := e.st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("poll watches: %w", err)
	}
	defer tx.Rollback()
	var notes []Lifecycle
	for _, p := range due {
		c.Polled++
		n, err := e.apply(ctx, tx, p, now, c)
		if err != nil {
			return err
		}
		notes = append(notes, n...)
		e.mu.Lock()
		if p.w.Status == StatusActive {
			e.nextDue[p.w.ID] = now.Add(e.interval(p.w, now))
		} else {
			delete(e.nextDue, p.w.ID)
		}
		e.mu.Unlock()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("poll watches: %w", err)
	}
	for _, n := range notes {
		e.emit(ctx, n)
	}
	return nil
}

// apply records one watch's read: a failure keeps the old snapshot; a
// success enqueues the matched events, then saves the snapshot, then ends a
// terminal watch.
func (e *Engine) apply(ctx context.Context, tx *sql.Tx, p *polled, now time.Time, c *Cycle) ([]Lifecycle, error) {
	w := p.w
	var events []Event
	if p.err == nil {
		a := e.adapters[w.Source]
		if string(p.snap) != string(w.Snapshot) {
			events, p.err = a.Events(w.Snapshot, p.snap)
		}
	}
	if p.err != nil {
		c.Failed++
		msg := p.err.Error()
		// last_check_at stays at the last successful read, so a before_time
		// deadline that passed during an outage is still seen afterwards.
		if _, err := tx.ExecContext(ctx, `UPDATE watches SET last_error = ?, last_error_at = ? WHERE id = ?`,
			msg, now.UnixMilli(), w.ID); err != nil {
			return nil, fmt.Errorf("record poll failure of watch %s: %w", w.ID, err)
		}
		if msg == w.LastError {
			return nil, nil // already reported
		}
		return []Lifecycle{{Type: "watch.poll_failed", WatchID: w.ID, ChatID: w.ChatID, Summary: "polling failed; the last snapshot is kept",
			Payload: map[string]any{"error": msg}}}, nil
	}
	events = append(events, triggerEvents(w, p.snap, now)...)
	var notes []Lifecycle
	if len(events) > 0 {
		queued, err := e.enqueue(ctx, tx, w, events, now)
		if err != nil {
			return nil, err
		}
		c.Queued += len(queued)
		notes = append(notes, queued...)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE watches SET snapshot = ?, last_check_at = ?, last_error = NULL, last_error_at = NULL WHERE id = ?`,
		string(p.snap), now.UnixMilli(), w.ID); err != nil {
		return nil, fmt.Errorf("save snapshot of watch %s: %w", w.ID, err)
	}
	w.Snapshot, w.LastCheckAt = p.snap, now
	if e.adapters[w.Source].IsTerminal(p.snap) {
		if _, err := tx.ExecContext(ctx, `UPDATE watches SET status = 'completed', ended_at = ? WHERE id = ? AND status = 'active'`,
			now.UnixMilli(), w.ID); err != nil {
			return nil, fmt.Errorf("complete watch %s: %w", w.ID, err)
		}
		w.Status = StatusCompleted
		c.Completed++
		notes = append(notes, Lifecycle{Type: "watch.completed", WatchID: w.ID, ChatID: w.ChatID, Summary: "the watched resource reached a final state"})
	}
	return notes, nil
}

// triggerEvents fires before_time rules whose deadline (the live timestamp
// minus the minutes) passed since the previous check while the timestamp
// itself is still ahead: a stale window after a restart sends nothing.
func triggerEvents(w *Watch, snap json.RawMessage, now time.Time) []Event {
	var doc any
	var out []Event
	prev := w.LastCheckAt
	if prev.IsZero() {
		prev = w.CreatedAt
	}
	for _, r := range w.Rules {
		t := r.Trigger
		if t == nil {
			continue
		}
		if doc == nil {
			doc = decode(snap)
		}
		target, ok := timestampAt(doc, t.Field)
		if !ok {
			continue
		}
		deadline := target.Add(-time.Duration(t.Minutes * float64(time.Minute)))
		if !deadline.After(prev) || deadline.After(now) || !target.After(now) {
			continue
		}
		out = append(out, Event{
			Key: fmt.Sprintf("before_time:%s:%d", r.ID, deadline.Unix()/60), Type: EventBeforeTime, At: now, RuleID: r.ID,
			Data: map[string]any{"ruleId": r.ID, "field": t.Field, "minutes": t.Minutes,
				"deadline": deadline.UTC().Format(time.RFC3339), "target": target.UTC().Format(time.RFC3339),
				"deadlineMs": deadline.UnixMilli(), "targetMs": target.UnixMilli()},
			Current:      snap,
			FallbackText: fmt.Sprintf("Reminder: %g minutes before %s (%s).", t.Minutes, t.Field, target.Local().Format("15:04")),
		})
	}
	return out
}

// matches reports whether rule r takes event ev: the exact type, then every
// where entry deep-equal to the event data at its dot path.
func matches(r Rule, ev Event, data any) bool {
	if r.Trigger != nil {
		return ev.Type == EventBeforeTime && ev.RuleID == r.ID
	}
	if r.Event != ev.Type {
		return false
	}
	for k, want := range r.Where {
		got, ok := lookup(data, k)
		if !ok || !jsonEqual(got, want) {
			return false
		}
	}
	return true
}

// enqueue inserts each event that matched rules as one pending row for all
// of them, recording each rule's participation; once rules that already
// participated are skipped, and INSERT OR IGNORE drops a transition seen
// before (another poll, another process life).
func (e *Engine) enqueue(ctx context.Context, tx *sql.Tx, w *Watch, events []Event, now time.Time) ([]Lifecycle, error) {
	var used map[string]bool
	var notes []Lifecycle
	for _, ev := range events {
		b, _ := json.Marshal(ev.Data)
		var data any
		json.Unmarshal(b, &data)
		ev.Data, _ = data.(map[string]any)
		var matched []Rule
		for _, r := range w.Rules {
			if !matches(r, ev, data) {
				continue
			}
			if r.Once {
				if used == nil {
					var err error
					if used, err = onceUsed(ctx, tx, w.ID); err != nil {
						return nil, err
					}
				}
				if used[r.ID] {
					continue
				}
			}
			matched = append(matched, r)
		}
		if len(matched) == 0 {
			continue
		}
		if ev.At.IsZero() {
			ev.At = now
		}
		if len(ev.Current) == 0 {
			ev.Current = w.Snapshot
		}
		evJSON, _ := json.Marshal(ev)
		rulesJSON, _ := json.Marshal(matched)
		firstJSON, _ := json.Marshal(matched[0])
		id := newID("wev")
		r, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO watch_events(id, event_key, watch_id, rule_id, rule, matched_rules, event, status, created_at)
			VALUES (?,?,?,?,?,?,?,'pending',?)`, id, w.ID+":"+ev.Key, w.ID, matched[0].ID, string(firstJSON), string(rulesJSON), string(evJSON), now.UnixMilli())
		if err != nil {
			return nil, fmt.Errorf("queue event of watch %s: %w", w.ID, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			continue
		}
		var ids []string
		for _, m := range matched {
			if _, err := tx.ExecContext(ctx, `INSERT INTO watch_event_rules(event_id, watch_id, rule_id) VALUES (?,?,?)`, id, w.ID, m.ID); err != nil {
				return nil, fmt.Errorf("record rule %s of watch %s: %w", m.ID, w.ID, err)
			}
			if used != nil {
				used[m.ID] = true
			}
			ids = append(ids, m.ID)
		}
		notes = append(notes, Lifecycle{Type: "watch.event_queued", WatchID: w.ID, ChatID: w.ChatID, EventID: id,
			Summary: fmt.Sprintf("%s matched %s", ev.Type, strings.Join(ids, ", ")), Payload: map[string]any{"key": ev.Key, "rules": ids}})
	}
	return notes, nil
}

func onceUsed(ctx context.Context, tx *sql.Tx, watchID string) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT rule_id FROM watch_event_rules WHERE watch_id = ?`, watchID)
	if err != nil {
		return nil, fmt.Errorf("read rules already used by watch %s: %w", watchID, err)
	}
	defer rows.Close()
	used := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		used[id] = true
	}
	return used, rows.Err()
}

// interval is how long until w's next poll: the base, shortened by adapter
// urgency and by an approaching before_time deadline or expiry, never below
// MinUrgentInterval.
func (e *Engine) interval(w *Watch, now time.Time) time.Duration {
	d := e.opts.PollInterval
	if u, ok := e.adapters[w.Source].(Urgency); ok {
		if x := u.PollWithin(w.Snapshot, now); x > 0 && x < d {
			d = x
		}
	}
	var doc any
	for _, r := range w.Rules {
		if r.Trigger == nil {
			continue
		}
		if doc == nil {
			doc = decode(w.Snapshot)
		}
		if target, ok := timestampAt(doc, r.Trigger.Field); ok {
			deadline := target.Add(-time.Duration(r.Trigger.Minutes * float64(time.Minute)))
			if until := deadline.Sub(now); until > 0 && until < d {
				d = until
			}
		}
	}
	if until := w.ExpiresAt.Sub(now); until > 0 && until < d {
		d = until
	}
	return max(d, MinUrgentInterval)
}

// NextWake is how long the loop sleeps after a pass: until the earliest due
// watch, at most the base interval, at least MinUrgentInterval.
func (e *Engine) NextWake() time.Duration {
	now := e.clock.Now()
	d := e.opts.PollInterval
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, next := range e.nextDue {
		if until := next.Sub(now); until < d {
			d = until
		}
	}
	if e.deferred {
		d = min(d, MinUrgentInterval)
	}
	return max(d, MinUrgentInterval)
}

// Run polls and delivers at start-up, then whenever a watch is due, until
// ctx ends.
func (e *Engine) Run(ctx context.Context) {
	for {
		if _, err := e.RunOnce(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("watch cycle failed", "err", err)
		}
		select {
		case <-e.wake: // a watch was created meanwhile: recompute at once
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-e.clock.After(e.NextWake()):
		case <-e.wake:
		}
	}
}
