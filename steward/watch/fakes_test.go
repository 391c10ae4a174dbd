package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/steward/push"
)

// hangGuard bounds waits in these tests; it is never what is asserted.
const hangGuard = 30 * time.Second

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// fakeClock is a settable clock whose After reports each requested sleep
// and fires only when the test releases it.
type fakeClock struct {
	mu        sync.Mutex
	now       time.Time
	requested chan time.Duration
	release   chan time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: t0, requested: make(chan time.Duration, 64), release: make(chan time.Time)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.requested <- d
	return c.release
}

// fakeAdapter is source "fake": each ref's state is a JSON object the test
// sets. Every changed top-level key k gives an event "fake.<k>" keyed by its
// new value; "done": true is terminal; "urgentMs" asks for faster polls.
type fakeAdapter struct {
	mu     sync.Mutex
	states map[string]map[string]any
	errs   map[string]error
	reads  map[string]int
}

func newFakeAdapter() *fakeAdapter {
	return &fakeAdapter{states: map[string]map[string]any{}, errs: map[string]error{}, reads: map[string]int{}}
}

func (a *fakeAdapter) set(ref string, kv ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := map[string]any{}
	for k, v := range a.states[ref] {
		st[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		st[kv[i].(string)] = kv[i+1]
	}
	a.states[ref] = st
}

func (a *fakeAdapter) fail(ref string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs[ref] = err
}

func (a *fakeAdapter) readsOf(ref string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads[ref]
}

func (a *fakeAdapter) Source() string { return "fake" }

func (a *fakeAdapter) Snapshot(_ context.Context, ref string) (json.RawMessage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads[ref]++
	if err := a.errs[ref]; err != nil {
		return nil, err
	}
	st, ok := a.states[ref]
	if !ok {
		return nil, fmt.Errorf("unknown resource %s", ref)
	}
	return json.Marshal(st)
}

func (a *fakeAdapter) Events(prev, cur json.RawMessage) ([]Event, error) {
	var p, c map[string]any
	json.Unmarshal(prev, &p)
	if err := json.Unmarshal(cur, &c); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Event
	for _, k := range keys {
		if k == "urgentMs" || k == "etaMs" || jsonEqual(p[k], c[k]) {
			continue
		}
		data := map[string]any{"value": c[k], "previous": p[k]}
		if m, ok := c[k].(map[string]any); ok {
			for mk, mv := range m {
				data[mk] = mv
			}
		}
		out = append(out, Event{Key: fmt.Sprintf("%s:%s", k, mustJSON(c[k])), Type: "fake." + k, Data: data,
			Previous: prev, Current: cur, FallbackText: fmt.Sprintf("%s is now %s", k, mustJSON(c[k])),
			Notification: &Notification{Title: Text{"": "Fake " + k, "it": "Finto " + k}}})
	}
	return out, nil
}

func (a *fakeAdapter) DefaultExpiry(_ json.RawMessage, created time.Time) time.Time {
	return created.Add(6 * time.Hour)
}

func (a *fakeAdapter) IsTerminal(snap json.RawMessage) bool {
	var c map[string]any
	json.Unmarshal(snap, &c)
	return c["done"] == true
}

func (a *fakeAdapter) PollWithin(snap json.RawMessage, _ time.Time) time.Duration {
	var c map[string]any
	json.Unmarshal(snap, &c)
	if v, ok := c["urgentMs"].(float64); ok {
		return time.Duration(v) * time.Millisecond
	}
	return 0
}

// fakeDeliverer stands in for the host: it records turns, can be busy or
// fail, and can call granted tools the way a model would.
type fakeDeliverer struct {
	mu       sync.Mutex
	turns    []Turn
	busy     map[string]bool
	failures int                          // next turns to fail
	moveTo   string                       // answer from this chat instead (original deleted)
	act      func(t Turn) (string, error) // optional: what the "model" does
}

func (d *fakeDeliverer) DeliverWatchTurn(ctx context.Context, t Turn) (Delivered, error) {
	d.mu.Lock()
	if d.busy[t.ChatID] {
		d.mu.Unlock()
		return Delivered{}, ErrChatBusy
	}
	d.turns = append(d.turns, t)
	fail := d.failures > 0
	if fail {
		d.failures--
	}
	act, moveTo := d.act, d.moveTo
	d.mu.Unlock()
	if fail {
		return Delivered{}, errors.New("model unavailable")
	}
	text := t.Fallback
	if text == "" {
		text = "Notified: " + t.EventID
		if act != nil {
			var err error
			if text, err = act(t); err != nil {
				return Delivered{}, err
			}
		}
	}
	chat := t.ChatID
	if moveTo != "" {
		chat = moveTo
	}
	return Delivered{ChatID: chat, MessageID: "asst_" + t.EventID, Text: text}, nil
}

func (d *fakeDeliverer) all() []Turn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Turn(nil), d.turns...)
}

// fakeNotifier records pushes and answers scripted reports.
type fakeNotifier struct {
	mu      sync.Mutex
	sent    []push.Notification
	reports []push.Report // consumed in order; then all delivered
}

func (n *fakeNotifier) Send(_ context.Context, p push.Notification) push.Report {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, p)
	if len(n.reports) > 0 {
		r := n.reports[0]
		n.reports = n.reports[1:]
		return r
	}
	return push.Report{Attempted: 1, Delivered: 1}
}

func (n *fakeNotifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent)
}

// lifecycleLog collects lifecycle events.
type lifecycleLog struct {
	mu     sync.Mutex
	events []Lifecycle
}

func (l *lifecycleLog) on(_ context.Context, e Lifecycle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *lifecycleLog) types() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

// rig is an engine over a real watches.db with fakes around it.
type rig struct {
	t        *testing.T
	path     string
	clock    *fakeClock
	adapter  *fakeAdapter
	deliver  *fakeDeliverer
	notifier *fakeNotifier
	life     *lifecycleLog
	tools    []agent.Tool
	caps     *Registry
	extra    []Adapter
	e        *Engine
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "watches.db"), clock: newClock(), adapter: newFakeAdapter(),
		deliver: &fakeDeliverer{busy: map[string]bool{}}, notifier: &fakeNotifier{}, life: &lifecycleLog{}}
	return r
}

// open (re)starts the engine on the same database: a process restart.
func (r *rig) open(mod ...func(*Options)) *Engine {
	r.t.Helper()
	if r.e != nil {
		r.e.Close()
	}
	opts := Options{Path: r.path, Adapters: append([]Adapter{r.adapter}, r.extra...), Deliverer: r.deliver, Notifier: r.notifier,
		Capabilities: r.caps, Tools: func() []agent.Tool { return r.tools }, Clock: r.clock, OnLifecycle: r.life.on,
		ReadOnly: func(name string) bool { return strings.HasPrefix(name, "read_") }}
	for _, m := range mod {
		m(&opts)
	}
	e, err := Open(context.Background(), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = e
	r.t.Cleanup(func() { e.Close() })
	return e
}

func (r *rig) create(req CreateRequest) *Watch {
	r.t.Helper()
	if req.Source == "" {
		req.Source = "fake"
	}
	if req.Instruction == "" {
		req.Instruction = "tell me when it changes"
	}
	if req.ChatID == "" {
		req.ChatID = "chat_1"
	}
	w, err := r.e.Create(context.Background(), req)
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// cycle advances the clock past the base interval and runs one pass.
func (r *rig) cycle() Cycle {
	r.t.Helper()
	r.clock.Advance(DefaultPollInterval)
	c, err := r.e.RunOnce(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *rig) query(q string, args ...any) []string {
	r.t.Helper()
	rows, err := r.e.st.db.Query(q, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		rows.Scan(ptrs...)
		var parts []string
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			parts = append(parts, fmt.Sprint(v))
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}
