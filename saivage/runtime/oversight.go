package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/agent"
	"github.com/agentstack/agentstack/saivage/cards"
	"github.com/agentstack/agentstack/saivage/state"
	"github.com/agentstack/agentstack/saivage/tools"
	"github.com/agentstack/agentstack/saivage/workflow"
)

// Clock is the Oversight schedule's time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// maxOversightWait bounds one timer of a long Oversight deadline: the
// deadline is waited for in chained bounded timeouts, never by ticking.
const maxOversightWait = 24 * time.Hour

// oversight owns the one monotonic deadline of the current eligible Run
// epoch (status running) and the check it starts: nothing is persisted.
// Each epoch waits the full configured interval; a finished check re-arms
// only while the epoch lasts; Pause, Stop, the Run's end and close disarm
// the deadline and cancel the running check. Missed deadlines are never
// caught up.
type oversight struct {
	rt       *Runtime
	agent    string
	interval time.Duration
	clock    Clock
	mu       sync.Mutex
	cancel   context.CancelFunc // the current epoch's, nil when disarmed
	closed   bool
	wg       sync.WaitGroup
	checks   int
}

// newOversight returns nil when Oversight is not configured or disabled.
func newOversight(rt *Runtime, clock Clock) *oversight {

	cfg := rt.p.Config.Oversight
	name := rt.p.Workflows.Oversight()
	if cfg == nil || !cfg.Enabled || cfg.IntervalSeconds <= 0 || name == "" {
		return nil
	}
	if clock == nil {
		clock = realClock{}
	}
	return &oversight{rt: rt, agent: name, interval: time.Duration(cfg.IntervalSeconds) * time.Second, clock: clock}
}

// statusChanged arms a new epoch when the runtime becomes running and
// disarms otherwise. It is called with rt.mu held and never blocks.
func (o *oversight) statusChanged(s Status) {

	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	if s != StatusRunning || o.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	o.wg.Add(1)
	go o.epoch(ctx)
}

// close disarms and joins the current epoch and its check.
func (o *oversight) close() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.closed = true
	if o.cancel != nil {
		o.cancel()
		o.cancel = nil
	}
	o.mu.Unlock()
	o.wg.Wait()
}

func (o *oversight) epoch(ctx context.Context) {
	defer o.wg.Done()
	for {
		deadline := o.clock.Now().Add(o.interval)
		for {
			rem := deadline.Sub(o.clock.Now())
			if rem <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-o.clock.After(min(rem, maxOversightWait)):
			}
		}
		if ctx.Err() != nil {
			return
		}
		o.mu.Lock()
		o.checks++
		n := o.checks
		o.mu.Unlock()
		o.rt.oversightCheck(ctx, o.agent, n)
		if ctx.Err() != nil || o.rt.Failure() != nil {
			return
		}
	}
}

// oversightCheck runs one check: a fresh conversation turn over the
// retained Oversight session with the generated vocabulary, the Oversight
// allow-list only. No action is a success; an expected failure (provider,
// tool, an unbound route) settles the check failed. A failure of the check
// itself (its session cannot be established, read or written, or a panic)
// settles it failed and is an unexpected owner failure: admissions close
// and the process exits 1 (ownerFailed). The outcome is an app log event.
func (rt *Runtime) oversightCheck(ctx context.Context, name string, n int) {
	id := state.NewUUID()
	outcome, reason := "ok", ""
	defer func() {
		if r := recover(); r != nil {
			outcome, reason = "failed", fmt.Sprintf("panic: %v", r)
			rt.ownerFailed("oversight check "+strconv.Itoa(n), errors.New(reason))
		}
		if ctx.Err() != nil && outcome != "failed" {
			outcome = "cancelled"
		}
		rt.logEvent("oversight_check", map[string]any{"check": n, "turn": id, "outcome": outcome, "reason": reason})
	}()
	fail := func(err error) { outcome, reason = "failed", rt.redact(err.Error()) }
	ownerFail := func(err error) {
		fail(err)
		rt.ownerFailed("oversight check "+strconv.Itoa(n), err)
	}
	ag, _ := rt.p.Workflows.Agent(name)
	route, ok := rt.models.Route(ag.ModelRoute)
	if !ok {
		fail(fmt.Errorf("oversight route %q is not bound", ag.ModelRoute))
		return
	}
	sess := rt.globalSession(name)
	if _, err := os.Stat(filepath.Join(sess.dir, "index.json")); errors.Is(err, fs.ErrNotExist) {
		// Oversight's session is established lazily by its first check.
		if err := rt.p.Sessions.Establish(sess.dir, sess.id); err != nil {
			ownerFail(err)
			return
		}
	}
	if _, err := sess.settle(false); err != nil {
		ownerFail(err)
		return
	}
	if err := sess.append(markerRow(id, markerOversight, map[string]any{"check": n}), userRow(id, "", rt.oversightVocabulary(ctx, n))); err != nil {
		ownerFail(err)
		return
	}
	names := slices.DeleteFunc(slices.Clone(ag.Tools), func(t string) bool { return !workflow.OversightAllowed(t) })
	env := &tools.Env{Root: rt.root(), StateDir: rt.p.StateDir, Cards: rt.p.Cards, Workflows: rt.p.Workflows, Config: rt.p.Config,
		Processes: rt.procs, RecordMu: &rt.recordMu, Hints: rt.opts.Hints, Events: rt, Evidence: evidence{rt}, Redact: rt.redact,
		Caller: tools.Caller{Agent: name, Tools: names}}
	bound, buildErr := tools.Build(names, env)
	for i, t := range bound {
		if t.Spec().Name == "queue_notification" {
			bound[i] = rt.oversightNotify(ctx, t)
		}
	}
	out := rt.globalTurn(ctx, sess, id, route, bound, buildErr, "You run a periodic Oversight check: observe, and intervene only through queue_notification.")
	if out.Error != "" {
		outcome, reason = "failed", out.Error
	}
	if out.sessionErr != nil {
		rt.ownerFailed("oversight check "+strconv.Itoa(n), out.sessionErr)
	}
}

// oversightNotify admits the one Oversight intervention under the active
// check's signal, and only for a card whose designated recipient node is
// run by an agent that can create children (it can act on the advice).
func (rt *Runtime) oversightNotify(check context.Context, t agent.Tool) agent.Tool {
	return agent.ToolFunc{ToolSpec: t.Spec(), Fn: func(ctx context.Context, raw json.RawMessage) (agent.ToolResult, error) {
		if check.Err() != nil {
			return agent.ToolResult{Content: "Error: this Oversight check is no longer active", IsError: true}, nil
		}
		var a struct {
			CardID string `json:"card_id"`
		}
		_ = json.Unmarshal(raw, &a)
		if err := rt.notificationEligible(ctx, a.CardID); err != nil {
			return agent.ToolResult{Content: "Error: " + err.Error(), IsError: true}, nil
		}
		return t.Call(ctx, raw)
	}}
}

// notificationEligible checks that a card may receive a notification now:
// an admitting status and a compiled child-capable designated recipient.
func (rt *Runtime) notificationEligible(ctx context.Context, id string) error {
	c, err := rt.p.Cards.Get(ctx, id)
	if err != nil {
		return err
	}
	switch c.Status {
	case cards.Backlog, cards.Changed, cards.Running, cards.Blocked, cards.Stopped:
	default:
		return fmt.Errorf("%s is %s; notifications go only to backlog, changed, running, blocked or stopped cards", id, c.Status)
	}
	if c.Tombstoned() {
		return fmt.Errorf("%s is deleted", id)
	}
	tbl, ok := rt.p.Workflows.Table(c.Type)
	if !ok || tbl.NotificationRecipient() == "" {
		return fmt.Errorf("card type %s has no notification recipient", c.Type)
	}
	nd, _ := tbl.Node(tbl.NotificationRecipient())
	if ag, ok := rt.p.Workflows.Agent(nd.Agent); !ok || !ag.CanCreateChildren {
		return fmt.Errorf("the recipient of %s (%s) cannot create children, so it cannot act on Oversight advice", id, nd.Agent)
	}
	return nil
}

// oversightVocabulary is the generated input of a check: what to compare,
// which card types can receive advice and how to finish.
func (rt *Runtime) oversightVocabulary(ctx context.Context, n int) string {
	var types []string
	for _, typ := range rt.p.Workflows.CardTypes() {
		tbl, _ := rt.p.Workflows.Table(typ)
		if r := tbl.NotificationRecipient(); r != "" {
			nd, _ := tbl.Node(r)
			if ag, ok := rt.p.Workflows.Agent(nd.Agent); ok && ag.CanCreateChildren {
				types = append(types, fmt.Sprintf("%s (delivered to its %s node)", typ, r))
			}
		}
	}
	st := rt.Status()
	return fmt.Sprintf("Oversight check %d. Runtime %s, active cards: %s.\n"+
		"Compare the delivery so far with the root card's objective and with earlier evidence. "+
		"If a recurring delivery gap is not explained by local progress, queue one bounded, useful notification "+
		"(queue_notification) for the card that can act on it. Card types that accept your notification: %s. "+
		"Notifications go only to backlog, changed, running, blocked or stopped cards. "+
		"Otherwise answer with a one-line no-action summary: taking no action is a good outcome.",
		n, st.Status, strings.Join(append([]string{}, st.Activations...), " → "), strings.Join(types, ", "))
}
