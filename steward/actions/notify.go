package actions

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/agentstack/agentstack/steward/audit"
	"github.com/agentstack/agentstack/steward/push"
)

// Notifier sends a Web Push notification to the paired devices;
// *push.Service is one.
type Notifier interface {
	Send(ctx context.Context, n push.Notification) push.Report
}

// ActionURL is the address a notification about item id opens: the app
// consumes the parameter once, after an authenticated connection.
func ActionURL(id int64) string { return "/?action=" + strconv.FormatInt(id, 10) + "#/actions" }

// NotifyNew announces new items not yet announced. An item is marked
// dispatched when no subscription exists or at least one endpoint accepted
// it; when every endpoint failed it stays eligible for the next poll.
func (s *Store) NotifyNew(ctx context.Context, n Notifier) (sent int, err error) {
	items, err := s.Unnotified(ctx, MaxListLimit)
	if err != nil {
		return 0, err
	}
	for _, it := range items {
		id := strconv.FormatInt(it.ID, 10)
		rep := n.Send(ctx, push.Notification{Title: "Action: " + it.Title, Body: it.Summary, Tag: "action-" + id,
			URL: ActionURL(it.ID), Data: map[string]string{"actionId": id}})
		s.audit(ctx, "action.notified", fmt.Sprintf("Action %d notification: %d of %d endpoints", it.ID, rep.Delivered, rep.Attempted), audit.RiskLow,
			map[string]any{"id": it.ID, "attempted": rep.Attempted, "delivered": rep.Delivered, "failed": rep.Failed, "pruned": rep.Pruned})
		if !rep.Complete() {
			continue
		}
		if err := s.MarkNotified(ctx, it.ID); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

// NotifierLoop polls the store for new items (the scanner is another
// process) and announces them. A failed poll is logged and retried at the
// next tick; polls never overlap.
type NotifierLoop struct {
	Store    *Store
	Notifier Notifier
	Interval time.Duration // default 30 s
	Log      *slog.Logger

	mu sync.Mutex // the single-flight guard
}

// Poll runs one poll unless one is already running.
func (l *NotifierLoop) Poll(ctx context.Context) {
	if !l.mu.TryLock() {
		return
	}
	defer l.mu.Unlock()
	if _, err := l.Store.NotifyNew(ctx, l.Notifier); err != nil && l.Log != nil {
		l.Log.Warn("Action Center notification poll failed; retrying at the next poll", "err", err)
	}
}

// Run polls until ctx ends.
func (l *NotifierLoop) Run(ctx context.Context) {
	every := l.Interval
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		l.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
