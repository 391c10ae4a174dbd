// Package searchprep is the host's start-up search preparation: one serial
// queue (Mail → local embeddings → Calendar → Contacts) that warms each
// connector's search through its private steward/prepareSearch request and
// loads the local embedding model, one heavy task at a time, after any
// interactive tool call in flight.
package searchprep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/search"
)

// Method is the private request each index-backed connector answers.
const Method = "steward/prepareSearch"

// StartupText is the only text model preparation ever sends.
const StartupText = "Steward startup preparation."

// Task states.
const (
	Queued  = "queued"
	Running = "running"
	Done    = "done"
	Skipped = "skipped"
	Failed  = "failed"
)

// Connectors is what preparation needs from the host's MCP connections.
type Connectors interface {
	// Ready waits until the connector is connected.
	Ready(ctx context.Context, server string) error
	// CallCustom sends a private request and returns its raw result.
	CallCustom(ctx context.Context, server, method string) (json.RawMessage, error)
	// WaitIdle returns once no tool call is in flight.
	WaitIdle(ctx context.Context) error
}

// Endpoint is an embedding endpoint model preparation may warm.
type Endpoint struct {
	// Setting names where it comes from (MAIL_EMBED_ENDPOINT, …).
	Setting string
	BaseURL string // OpenAI-compatible base, e.g. http://127.0.0.1:4000/v1
	Model   string
	APIKey  string
}

// Task is one step of the queue.
type Task struct {
	Name       string     `json:"name"` // mail, local embeddings, calendar, contacts
	State      string     `json:"state"`
	Detail     string     `json:"detail,omitempty"`
	Error      string     `json:"error,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	Ended      *time.Time `json:"ended,omitempty"`
	DurationMS int64      `json:"durationMs,omitempty"`
}

// State is GET /system/preparation's answer.
type State struct {
	State string `json:"state"` // queued, running, done (finished, whatever each task's result)
	Tasks []Task `json:"tasks"`
}

// Options configures a Queue.
type Options struct {
	Connectors Connectors
	// Servers are the connectors to prepare, in order around the model step
	// (default mail, then the model, then calendar and contacts).
	Before, After []string
	// Endpoints are the embedding endpoints of the enabled settings; only
	// loopback ones are contacted.
	Endpoints []Endpoint
	// HTTPClient calls the endpoints (default: a plain client).
	HTTPClient *http.Client
	// TaskTimeout bounds each step once its connector is up (default 30 s).
	TaskTimeout time.Duration
	// ConnectWait bounds the wait for a connector that is still starting
	// (default 2 min: a slow machine may need a restart or two).
	ConnectWait time.Duration
	Logger      *slog.Logger
}

// Queue runs the preparation once.
type Queue struct {
	opts  Options
	log   *slog.Logger
	mu    sync.Mutex
	tasks []Task
	state string
}

// ModelTask is the name of the model preparation step.
const ModelTask = "local embeddings"

// New returns a queue with every task queued.
func New(opts Options) *Queue {
	if opts.Before == nil && opts.After == nil {
		opts.Before, opts.After = []string{"mail"}, []string{"calendar", "contacts"}
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = 30 * time.Second
	}
	if opts.ConnectWait <= 0 {
		opts.ConnectWait = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{opts: opts, log: opts.Logger, state: Queued}
	for _, n := range opts.Before {
		q.tasks = append(q.tasks, Task{Name: n, State: Queued})
	}
	q.tasks = append(q.tasks, Task{Name: ModelTask, State: Queued})
	for _, n := range opts.After {
		q.tasks = append(q.tasks, Task{Name: n, State: Queued})
	}
	return q
}

// State returns a snapshot of the queue.
func (q *Queue) State() State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return State{State: q.state, Tasks: append([]Task(nil), q.tasks...)}
}

// Run prepares each task in order, one at a time, each after the tool calls
// in flight have finished. A failure is recorded and the queue moves on.
func (q *Queue) Run(ctx context.Context) {
	q.set(func() { q.state = Running })
	for i := range q.tasks {
		if err := q.opts.Connectors.WaitIdle(ctx); err != nil {
			return
		}
		start := time.Now()
		q.set(func() { q.tasks[i].State, q.tasks[i].Started = Running, &start })
		var state, detail string
		var err error
		if q.tasks[i].Name == ModelTask {
			tctx, cancel := context.WithTimeout(ctx, q.opts.TaskTimeout)
			state, detail, err = q.prepareModel(tctx)
			cancel()
		} else {
			state, detail, err = q.prepareConnector(ctx, q.tasks[i].Name)
		}
		if ctx.Err() != nil {
			return
		}
		end := time.Now()
		q.set(func() {
			t := &q.tasks[i]
			t.State, t.Detail, t.Ended, t.DurationMS = state, detail, &end, end.Sub(start).Milliseconds()
			if err != nil {
				t.State, t.Error = Failed, err.Error()
			}
		})
		if err != nil {
			q.log.Warn("search preparation failed; the connector's tools stay available", "task", q.tasks[i].Name, "err", err)
		}
	}
	q.set(func() { q.state = Done })
	q.log.Info("search preparation finished")
}

func (q *Queue) set(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
}

// connectorResult is what the connectors' prepareSearch answers (mail's
// PrepareStats and mcptool.PrepareResult share these fields).
type connectorResult struct {
	Skipped string `json:"skipped"`
	Vectors int    `json:"vectors"`
	Lookups int    `json:"lookups"`
}

func (q *Queue) prepareConnector(ctx context.Context, name string) (state, detail string, err error) {
	wctx, cancel := context.WithTimeout(ctx, q.opts.ConnectWait)
	err = q.opts.Connectors.Ready(wctx, name)
	cancel()
	switch {
	case errors.Is(err, ErrNoPreparation):
		return Skipped, "no such connector", nil
	case err != nil:
		return "", "", fmt.Errorf("%s did not connect within %s: %w", name, q.opts.ConnectWait, err)
	}
	tctx, cancel := context.WithTimeout(ctx, q.opts.TaskTimeout)
	defer cancel()
	raw, err := q.opts.Connectors.CallCustom(tctx, name, Method)
	switch {
	case errors.Is(err, ErrNoPreparation):
		return Skipped, "the connector has no search to prepare", nil
	case err != nil:
		return "", "", err
	}
	var r connectorResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", "", fmt.Errorf("read %s's preparation result: %w", name, err)
	}
	if r.Skipped != "" {
		return Skipped, r.Skipped, nil
	}
	if r.Lookups == 0 {
		return Done, fmt.Sprintf("%d vectors warmed", r.Vectors), nil
	}
	return Done, fmt.Sprintf("%d lookups, %d vectors warmed", r.Lookups, r.Vectors), nil
}

// ErrNoPreparation is what Connectors.CallCustom wraps for a connector that
// does not answer the request (not configured, or no such method): the task
// is skipped, not failed.
var ErrNoPreparation = errors.New("no search preparation")

// prepareModel sends StartupText once to each distinct loopback endpoint,
// in order. Remote endpoints are never contacted. An endpoint where no
// model server is listening (the gateway's local-embed provider not
// started) is not reachable, which skips the task rather than failing it;
// a model that answers with an error (missing model, auth, an invalid
// response) fails it.
func (q *Queue) prepareModel(ctx context.Context) (state, detail string, err error) {
	seen := map[string]bool{}
	var warmed, remote, unreachable []string
	var errs []error
	for _, e := range q.opts.Endpoints {
		key := strings.TrimRight(e.BaseURL, "/") + "|" + e.Model
		if seen[key] {
			continue
		}
		seen[key] = true
		if !IsLoopback(e.BaseURL) {
			remote = append(remote, e.Setting)
			continue
		}
		emb := search.NewEmbedder(search.EmbedderOptions{BaseURL: e.BaseURL, APIKey: e.APIKey, Model: e.Model, HTTPClient: q.opts.HTTPClient,
			Attribution: llm.Attribution{Service: "host", Action: "startup-embedding"}})
		if _, err := emb.Embed(ctx, []string{StartupText}); err != nil {
			if llm.IsUnreachable(err) {
				unreachable = append(unreachable, fmt.Sprintf("%s (%s, model %s): %s", e.Setting, e.BaseURL, e.Model, unreachableReason(err)))
				continue
			}
			errs = append(errs, fmt.Errorf("%s (%s, model %s): %w", e.Setting, e.BaseURL, e.Model, err))
			continue
		}
		warmed = append(warmed, e.Setting)
	}
	var parts []string
	if len(warmed) > 0 {
		parts = append(parts, "warmed "+strings.Join(warmed, ", "))
	}
	if len(unreachable) > 0 {
		parts = append(parts, "not reachable: "+strings.Join(unreachable, "; "))
	}
	if len(remote) > 0 {
		parts = append(parts, "not contacted (remote): "+strings.Join(remote, ", "))
	}
	if err := errors.Join(errs...); err != nil {
		return "", strings.Join(parts, "; "), err
	}
	if len(warmed) == 0 {
		if len(parts) == 0 {
			parts = append(parts, "not configured: embeddings are off")
		}
		return Skipped, strings.Join(parts, "; "), nil
	}
	return Done, strings.Join(parts, "; "), nil
}

// unreachableReason is why an endpoint could not be reached, without the
// client's wrapping: what the gateway said, or the failed dial.
func unreachableReason(err error) string {
	var ae *llm.APIError
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) {
		return op.Error()
	}
	return err.Error()
}

// IsLoopback reports whether base's host is a loopback address or
// localhost.
func IsLoopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
