package host

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
)

// journal persists one turn's transcript and session writes in order on its
// own goroutine, so that streaming to clients never waits for SQLite. The
// turn drains it before it reports turn.done, so a finished turn is always
// fully on disk.
//
// Its first write waits until the turn's first model output is on its way to
// the clients (release) and then until no other turn of the host is waiting
// for its first output (startGate), each wait ending at maxJournalHold after
// the turn began or when the turn closes the journal. A turn's SQLite
// transactions cost more CPU than everything else the host does for it; run
// at once they compete with the model requests that decide every chat's
// time to first token.
type journal struct {
	store  *chats.Store
	chatID string
	log    *slog.Logger
	ctx    context.Context
	ops    chan func() error
	done   chan struct{}
	err    error

	hold     chan struct{} // closed by release
	released sync.Once
	closing  chan struct{} // closed by close

	mu      sync.Mutex
	pending []chats.Entry // transcript entries queued and not yet written
}

// maxJournalHold bounds how long a turn's first writes wait.
const maxJournalHold = 250 * time.Millisecond

// newJournal starts a turn's journal; gate may be nil.
func newJournal(ctx context.Context, store *chats.Store, chatID string, log *slog.Logger, gate *startGate) *journal {
	j := &journal{store: store, chatID: chatID, log: log, ctx: context.WithoutCancel(ctx),
		ops: make(chan func() error, 128), done: make(chan struct{}), hold: make(chan struct{}), closing: make(chan struct{})}
	go func() {
		defer close(j.done)
		j.waitToStart(gate)
		for op := range j.ops {
			if err := op(); err != nil {
				j.log.Error("could not save part of a chat", "chat", j.chatID, "err", err)
				if j.err == nil {
					j.err = err
				}
			}
		}
	}()
	return j
}

func (j *journal) waitToStart(gate *startGate) {
	deadline := time.NewTimer(maxJournalHold)
	defer deadline.Stop()
	select {
	case <-j.hold:
	case <-deadline.C:
		return
	case <-j.closing:
		return
	}
	if gate == nil {
		return
	}
	select {
	case <-gate.clear():
	case <-deadline.C:
	case <-j.closing:
	}
}

func (j *journal) append(e *chats.Entry) {
	if e.ID == "" {
		e.ID = chats.NewID(e.Kind)
	}
	if e.At.IsZero() {
		e.At = time.Now() // when it happened, not when the journal got to it
	}
	j.mu.Lock()
	j.pending = append(j.pending, *e)
	j.mu.Unlock()
	j.ops <- func() error {
		err := j.store.Append(j.ctx, j.chatID, e)
		j.mu.Lock()
		j.pending = slices.DeleteFunc(j.pending, func(p chats.Entry) bool { return p.ID == e.ID })
		j.mu.Unlock()
		return err
	}
}

// unwritten returns the transcript entries queued but not yet written, in
// order: a client opening the chat now must see them too.
func (j *journal) unwritten() []chats.Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.pending)
}

func (j *journal) update(entryID string, data json.RawMessage) {
	j.ops <- func() error { return j.store.UpdateEntry(j.ctx, j.chatID, entryID, data) }
}

func (j *journal) session(msgs ...llm.Message) {
	j.ops <- func() error { return j.store.AppendSession(j.ctx, j.chatID, msgs...) }
}

// replaceSession replaces the chat's whole session (after a compaction).
func (j *journal) replaceSession(msgs ...llm.Message) {
	j.ops <- func() error { return j.store.ReplaceSession(j.ctx, j.chatID, msgs...) }
}

// release says the turn's first output has gone out; it may be called more
// than once.
func (j *journal) release() {
	j.released.Do(func() { close(j.hold) })
}

// close waits for every queued write and returns the first failure.
func (j *journal) close() error {
	close(j.closing)
	close(j.ops)
	<-j.done
	return j.err
}

// startGate counts the host's turns that are waiting for their first model
// output; journals hold their writes while there are any.
type startGate struct {
	mu    sync.Mutex
	n     int
	empty chan struct{} // closed while n == 0
}

func newStartGate() *startGate {
	g := &startGate{empty: make(chan struct{})}
	close(g.empty)
	return g
}

// enter counts a turn that starts; it must leave exactly once.
func (g *startGate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		g.empty = make(chan struct{})
	}
	g.n++
}

func (g *startGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 {
		close(g.empty)
	}
}

// clear returns a channel closed once no turn is waiting for its first output.
func (g *startGate) clear() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.empty
}
