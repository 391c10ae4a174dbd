// Package mcptool serves a connector's MCP tools from a service that is
// opened on first use. A connector is started by the host before the user
// may have built its index; its tools then report how to build it, and
// answer as soon as the index exists, without a restart.
package mcptool

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentstack/agentstack/mcpbridge"
)

// Lazy holds a value that is opened on the first Get that succeeds and kept
// until Close; a failed open is retried by the next Get.
type Lazy[T any] struct {
	open  func(context.Context) (T, error)
	close func(T) error

	mu     sync.Mutex
	v      T
	opened bool
}

// NewLazy returns a Lazy that opens its value with open and releases it with
// close.
func NewLazy[T any](open func(context.Context) (T, error), close func(T) error) *Lazy[T] {
	return &Lazy[T]{open: open, close: close}
}

// Get returns the value, opening it first if no earlier Get succeeded.
func (l *Lazy[T]) Get(ctx context.Context) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened {
		return l.v, nil
	}
	v, err := l.open(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	l.v, l.opened = v, true
	return v, nil
}

// Close releases the value if it was opened; a later Get opens it again.
func (l *Lazy[T]) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.opened {
		return nil
	}
	var zero T
	v := l.v
	l.v, l.opened = zero, false
	return l.close(v)
}

// OnIndex returns the opener and closer of a service built on an index that
// is opened on first use and kept (a Lazy): until the index exists, every
// call returns openIndex's error (the connector's "not built yet"), and the
// first call after it was built opens it, without a restart. release closes
// the service's index.
func OnIndex[I, S any](openIndex func(context.Context) (I, error), serve func(context.Context, I) S, release func(S) error) (open func(context.Context) (S, error), close func() error) {
	l := NewLazy(func(ctx context.Context) (S, error) {
		idx, err := openIndex(ctx)
		if err != nil {
			var zero S
			return zero, err
		}
		return serve(ctx, idx), nil
	}, release)
	return l.Get, l.Close
}

// Handler adapts call, usually a method expression such as
// (*Service).SearchEvents, to an MCP tool handler that gets the service
// from get on every call. An error from get or call is returned to the
// model as the tool's error result.
func Handler[S, In, Out any](get func(context.Context) (S, error), call func(S, context.Context, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		svc, err := get(ctx)
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		out, err := call(svc, ctx, in)
		return nil, out, err
	}
}

// AddGated adds a write tool that the host gates behind the user's approval,
// with a hidden preflight companion ("<name>_preflight", see
// mcpbridge.MetaPreflight): before the approval card is shown, and again on
// the user's edited arguments, the gate calls preflight, which validates the
// arguments against live state and returns them normalised (what the card
// shows and the tool then runs with) or an error saying what is wrong.
func AddGated[S, In, Out any](s *mcp.Server, t *mcp.Tool, get func(context.Context) (S, error),
	preflight func(S, context.Context, In) (*In, error), call func(S, context.Context, In) (Out, error)) {
	companion := t.Name + "_preflight"
	if t.Meta == nil {
		t.Meta = mcp.Meta{}
	}
	t.Meta[mcpbridge.MetaPreflight] = companion
	mcp.AddTool(s, t, Handler(get, call))
	mcp.AddTool(s, &mcp.Tool{
		Name:        companion,
		Description: "Validates and normalises the arguments of " + t.Name + " (called by the approval gate, not the agent).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
		Meta:        mcp.Meta{mcpbridge.MetaHidden: true},
	}, Handler(get, preflight))
}
