package host

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/agentstack/agentstack/llm"
	"github.com/agentstack/agentstack/steward/chats"
)

// journal persists one turn's transcript and session writes in order on its
// own goroutine, so that streaming to clients never waits for SQLite. The
// turn drains it before it reports turn.done, so a finished turn is always
// fully on disk.
type journal struct {
	store  *chats.Store
	chatID string
	log    *slog.Logger
	ctx    context.Context
	ops    chan func() error
	done   chan struct{}
	err    error
}

func newJournal(ctx context.Context, store *chats.Store, chatID string, log *slog.Logger) *journal {
	j := &journal{store: store, chatID: chatID, log: log, ctx: context.WithoutCancel(ctx),
		ops: make(chan func() error, 512), done: make(chan struct{})}
	go func() {
		defer close(j.done)
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

func (j *journal) append(e *chats.Entry) {
	j.ops <- func() error { return j.store.Append(j.ctx, j.chatID, e) }
}

func (j *journal) update(entryID string, data json.RawMessage) {
	j.ops <- func() error { return j.store.UpdateEntry(j.ctx, j.chatID, entryID, data) }
}

func (j *journal) session(msgs ...llm.Message) {
	j.ops <- func() error { return j.store.AppendSession(j.ctx, j.chatID, msgs...) }
}

// close waits for every queued write and returns the first failure.
func (j *journal) close() error {
	close(j.ops)
	<-j.done
	return j.err
}
