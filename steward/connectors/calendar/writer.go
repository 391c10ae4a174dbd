package calendar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/steward/writeops"
)

// Backend names, recorded in each plan before dispatch: a write never moves
// to another backend after it was journaled.
const (
	BackendVdir        = "vdir"
	BackendEventKit    = "eventkit"
	BackendAppleScript = "applescript"
)

// Backend performs a journaled plan.
type Backend interface {
	// Apply performs p. An error marked writeops.NotDone means nothing was
	// changed; any other error leaves the outcome uncertain.
	Apply(ctx context.Context, p *Plan) (*Outcome, error)
}

// Outcome is what a backend reports.
type Outcome struct {
	Backend string `json:"backend"`
	// UID is the event's UID after the write (a create's, or "" when the
	// backend did not return one); NewUID the split-off series'.
	UID    string `json:"uid,omitempty"`
	NewUID string `json:"newUid,omitempty"`
	Path   string `json:"path,omitempty"`
	// CompletedAt is when the backend finished; index evidence must come
	// from a sync that started after it.
	CompletedAt time.Time `json:"completedAt"`
}

// Journal records writes before they run; *writeops.Store is one.
type Journal interface {
	Execute(ctx context.Context, n writeops.NewOperation, ex writeops.Executor) (writeops.Operation, error)
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Config lists the sources (and with them the writable calendars).
	Config func(ctx context.Context) (*Config, error)
	// Index opens the read index; it may fail before the first sync, and
	// writes to vdir folders still work.
	Index func(ctx context.Context) (*Index, error)
	// Journal records every write before it runs.
	Journal Journal
	// Apple performs writes to Apple Calendar sources (macOS); nil refuses them.
	Apple AppleWriter
	// GOOS replaces runtime.GOOS.
	GOOS string
	// Now replaces time.Now.
	Now func() time.Time
	// Zone is the display zone (default: the configuration's).
	Zone *time.Location
}

// AppleWriter performs writes to Apple Calendar: it picks EventKit or the
// AppleScript compatibility path per plan (recording the choice in
// p.Backend) before anything is journaled, then runs it.
type AppleWriter interface {
	// Select records the backend in p.Backend or refuses the plan; all are
	// the calendars there are (title uniqueness matters to AppleScript).
	Select(p *Plan, all []Target) error
	Backend
}

// Writer serves create_event, update_event and delete_event.
type Writer struct {
	opts WriterOptions
	// mu guards the first setting of zone; every call path goes through
	// config (which takes it) before reading zone.
	mu   sync.Mutex
	zone *time.Location
	now  func() time.Time
	vdir *vdirBackend
}

// NewWriter returns a Writer.
func NewWriter(opts WriterOptions) *Writer {
	w := &Writer{opts: opts, now: opts.Now, zone: opts.Zone}
	if w.now == nil {
		w.now = time.Now
	}
	if w.opts.GOOS == "" {
		w.opts.GOOS = runtime.GOOS
	}
	w.vdir = &vdirBackend{now: w.now}
	return w
}

func (w *Writer) config(ctx context.Context) (*Config, error) {
	if w.opts.Config == nil {
		return nil, errors.New("calendar writes need calendar.yaml")
	}
	cfg, err := w.opts.Config(ctx)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.zone == nil {
		w.zone = cfg.Location()
	}
	w.vdir.zone = w.zone
	return cfg, nil
}

func (w *Writer) index(ctx context.Context) (*Index, error) {
	if w.opts.Index == nil {
		return nil, ErrNoIndex
	}
	return w.opts.Index(ctx)
}

// targets lists the calendars writes can name.
func (w *Writer) targets(ctx context.Context) ([]Target, error) {
	cfg, err := w.config(ctx)
	if err != nil {
		return nil, err
	}
	idx, err := w.index(ctx)
	if err != nil {
		idx = nil // vdir folders are listed from the files; Apple calendars need the index
	}
	return targets(ctx, cfg, idx, w.opts.GOOS)
}

// PreflightCreate validates create_event's arguments and returns them
// normalised (the calendar resolved to its id and title, times in the
// event's zone), as the approval card shows them.
func (w *Writer) PreflightCreate(ctx context.Context, p CreateEventParams) (*CreateEventParams, error) {
	plan, norm, err := w.planCreate(ctx, p)
	if err == nil {
		err = w.selectBackend(ctx, plan)
	}
	return norm, err
}

// PreflightUpdate validates update_event's arguments against the live event.
func (w *Writer) PreflightUpdate(ctx context.Context, p UpdateEventParams) (*UpdateEventParams, error) {
	plan, norm, err := w.planUpdate(ctx, p)
	if err == nil {
		err = w.selectBackend(ctx, plan)
	}
	return norm, err
}

// PreflightDelete validates delete_event's arguments against the live event.
func (w *Writer) PreflightDelete(ctx context.Context, p DeleteEventParams) (*DeleteEventParams, error) {
	plan, norm, err := w.planDelete(ctx, p)
	if err == nil {
		err = w.selectBackend(ctx, plan)
	}
	return norm, err
}

// WriteResult is what a calendar write tool returns.
type WriteResult struct {
	OperationID string `json:"operationId"`
	// State is the journal state: script_returned (the backend returned;
	// confirmation pending), failed (nothing written) or unknown.
	State string `json:"state"`
	// PendingConfirmation: the backend returned; a later sync confirms.
	PendingConfirmation bool   `json:"pendingConfirmation,omitempty"`
	UID                 string `json:"uid,omitempty"`
	NewUID              string `json:"newUid,omitempty"`
	Backend             string `json:"backend"`
	Message             string `json:"message"`
}

// CreateEvent implements create_event.
func (w *Writer) CreateEvent(ctx context.Context, p CreateEventParams) (*WriteResult, error) {
	plan, _, err := w.planCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	return w.execute(ctx, plan, writeops.KindCalendarCreate, "create_event")
}

// UpdateEvent implements update_event.
func (w *Writer) UpdateEvent(ctx context.Context, p UpdateEventParams) (*WriteResult, error) {
	plan, _, err := w.planUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	return w.execute(ctx, plan, writeops.KindCalendarUpdate, "update_event")
}

// DeleteEvent implements delete_event.
func (w *Writer) DeleteEvent(ctx context.Context, p DeleteEventParams) (*WriteResult, error) {
	plan, _, err := w.planDelete(ctx, p)
	if err != nil {
		return nil, err
	}
	return w.execute(ctx, plan, writeops.KindCalendarDelete, "delete_event")
}

// selectBackend fixes the backend of a plan before it is journaled.
func (w *Writer) selectBackend(ctx context.Context, p *Plan) error {
	switch p.Target.Kind {
	case KindICS:
		p.Backend = BackendVdir
		return nil
	case KindApple:
		if w.opts.Apple == nil {
			return errors.New("Apple Calendar writes are not available in this process (macOS only)")
		}
		all, err := w.targets(ctx)
		if err != nil {
			return err
		}
		return w.opts.Apple.Select(p, all)
	}
	return fmt.Errorf("calendar source kind %q cannot be written", p.Target.Kind)
}

func (w *Writer) backend(p *Plan) (Backend, error) {
	switch p.Backend {
	case BackendVdir:
		return w.vdir, nil
	case BackendEventKit, BackendAppleScript:
		if w.opts.Apple != nil {
			return w.opts.Apple, nil
		}
	}
	return nil, fmt.Errorf("backend %q is not available in this process", p.Backend)
}

// execute journals the plan, runs it on its backend and records the outcome.
func (w *Writer) execute(ctx context.Context, plan *Plan, kind writeops.Kind, tool string) (*WriteResult, error) {
	if err := w.selectBackend(ctx, plan); err != nil {
		return nil, err
	}
	if w.opts.Journal == nil {
		return nil, errors.New("calendar writes need the write journal (STEWARD_HOME/write-ops/ops.db)")
	}
	be, err := w.backend(plan)
	if err != nil {
		return nil, err
	}
	op, execErr := w.opts.Journal.Execute(ctx, writeops.NewOperation{
		Kind: kind, Summary: plan.summary(w.zone), Input: plan, Expected: plan.expectation(), Tool: tool,
	}, writeops.ExecutorFunc(func(ctx context.Context, op writeops.Operation) (any, error) {
		var p Plan
		if err := op.Decode(&p); err != nil {
			return nil, writeops.NotDone(fmt.Errorf("decode journaled plan: %w", err))
		}
		return be.Apply(ctx, &p)
	}))
	if op.ID == "" {
		return nil, execErr
	}
	res := &WriteResult{OperationID: op.ID, State: string(op.State), Backend: plan.Backend, UID: plan.UID, NewUID: plan.NewUID}
	var out Outcome
	if len(op.Result) > 0 && json.Unmarshal(op.Result, &out) == nil && out.UID != "" {
		res.UID = out.UID
	}
	switch op.State {
	case writeops.StateFailed:
		res.Message = "NOT DONE: nothing was written: " + op.Error
	case writeops.StateUnknown:
		res.Message = "UNCERTAIN: the calendar backend did not say whether the change was made (" + op.Error +
			"). Do not retry; the next calendar sync will check (read_write_operation shows the evidence)."
	default:
		res.PendingConfirmation = true
		res.Message = "Written; pending confirmation: the next calendar sync checks that the calendar shows the change " +
			"(read_write_operation " + op.ID + " shows the state)."
	}
	return res, nil
}

// summary is the one-line review description.
func (p *Plan) summary(zone *time.Location) string {
	when := ""
	if p.After != nil {
		if p.After.AllDay {
			when = " " + p.After.StartDate
		} else {
			when = " " + p.After.Start.In(zone).Format("2006-01-02 15:04 MST")
		}
	}
	occ := ""
	if p.OccurrenceStart != nil {
		occ = " (occurrence " + p.OccurrenceStart.In(zone).Format("2006-01-02 15:04") + ", " + p.Scope + ")"
	}
	title := p.Title
	if p.Change.Title != nil && p.Op == OpUpdate && *p.Change.Title != p.Title {
		title = p.Title + " → " + *p.Change.Title
	}
	return strings.TrimSpace(fmt.Sprintf("calendar %s in %s: %s%s%s", p.Op, p.Target.Title, title, when, occ))
}
