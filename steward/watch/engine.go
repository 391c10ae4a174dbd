package watch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
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
