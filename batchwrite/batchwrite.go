// Package batchwrite is the batched ledger writer both products' ledgers
// use: records are queued without ever blocking the caller and one
// background goroutine stores them a window at a time, so that a ledger
// never sits on a request's or a turn's path.
//
// A full queue or a closed writer drops the record, counting it (and
// logging the first and then every power-of-two-th drop, so that an
// overload cannot flood the log); Add never panics, even after Close. A
// failed write loses its batch, counted as failed; a write that fails while
// closing discards the rest of the queue rather than retrying a broken
// database batch after batch, so shutdown is never held for long.
package batchwrite

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultWindow    = 20 * time.Millisecond
	DefaultMaxBatch  = 256
	DefaultQueueSize = 4096
)

// ErrClosed reports a Flush on a closed writer.
var ErrClosed = errors.New("the ledger writer is closed")

// Options configures a Writer.
type Options[T any] struct {
	// Write stores one batch, normally in one transaction; an error means
	// none of it was stored.
	Write func(batch []T) error
	// Window is how long the writer gathers records into one batch
	// (default DefaultWindow); MaxBatch bounds a batch (DefaultMaxBatch);
	// QueueSize bounds the queue (DefaultQueueSize).
	Window    time.Duration
	MaxBatch  int
	QueueSize int
	// Name says what is written in log lines ("usage ledger"); Noun what a
	// record is ("rows").
	Name, Noun string
	Logger     *slog.Logger
	// BeforeWrite, when set, runs before each batch is written (tests hold
	// the writer with it); Closing runs when Close begins, once a failed
	// write would discard the rest.
	BeforeWrite, Closing func()
}

// Stats counts what happened to the records given to Add.
type Stats struct {
	Queued, Written, Dropped, Failed int64
}

// Writer queues records and writes them in batches.
type Writer[T any] struct {
	opts Options[T]

	mu      sync.RWMutex // guards closed against Add racing Close
	closed  bool
	closing atomic.Bool
	queue   chan item[T]
	done    chan struct{}
	once    sync.Once

	queued, written, dropped, failed atomic.Int64
}

// item is a record or, when flush is set, a Flush waiting for the records
// before it.
type item[T any] struct {
	rec   T
	flush chan struct{}
}

// New starts a writer.
func New[T any](opts Options[T]) *Writer[T] {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = "ledger"
	}
	if opts.Noun == "" {
		opts.Noun = "records"
	}
	w := &Writer[T]{opts: opts, queue: make(chan item[T], opts.QueueSize), done: make(chan struct{})}
	go w.run()
	return w
}

// Add queues rec. It never blocks and never panics: a full queue or a
// closed writer drops the record and reports false.
func (w *Writer[T]) Add(rec T) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.Drop("closed")
		return false
	}
	select {
	case w.queue <- item[T]{rec: rec}:
		w.queued.Add(1)
		return true
	default:
		w.Drop("queue full")
		return false
	}
}

// Drop counts a record refused before it reached the queue (Add calls it;
// a caller whose record could not even be prepared may too), logging the
// first and then every power-of-two-th drop.
func (w *Writer[T]) Drop(reason string, attrs ...any) {
	n := w.dropped.Add(1)
	if n&(n-1) == 0 {
		w.opts.Logger.Warn(w.opts.Name+" record dropped", append([]any{"reason", reason, "dropped_total", n}, attrs...)...)
	}
}

// Flush waits until every record queued before the call has been written
// (or has failed to be). Unlike Add it waits: it is for shutdown, reports
// and tests.
func (w *Writer[T]) Flush(ctx context.Context) error {
	done := make(chan struct{})
	// The read lock is never held while waiting, so that Close, and the
	// Adds queued behind Close's lock, never wait on a slow Flush.
	for {
		w.mu.RLock()
		if w.closed {
			w.mu.RUnlock()
			return ErrClosed
		}
		sent := false
		select {
		case w.queue <- item[T]{flush: done}:
			sent = true
		default:
		}
		w.mu.RUnlock()
		if sent {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued and stops the writer; later Adds are dropped.
// It may be called more than once.
func (w *Writer[T]) Close() {
	w.once.Do(func() {
		w.closing.Store(true)
		if w.opts.Closing != nil {
			w.opts.Closing()
		}
		w.mu.Lock()
		w.closed = true
		close(w.queue)
		w.mu.Unlock()
	})
	<-w.done
}

// Stats reports what has happened to the records since New.
func (w *Writer[T]) Stats() Stats {
	return Stats{Queued: w.queued.Load(), Written: w.written.Load(), Dropped: w.dropped.Load(), Failed: w.failed.Load()}
}

func (w *Writer[T]) run() {
	defer close(w.done)
	batch := make([]T, 0, w.opts.MaxBatch)
	var flushes []chan struct{}
	for it := range w.queue {
		batch, flushes = batch[:0], flushes[:0]
		flushing := w.take(it, &batch, &flushes)
		window := time.NewTimer(w.opts.Window)
	gather:
		for !flushing && len(batch) < w.opts.MaxBatch {
			select {
			case it, ok := <-w.queue:
				if !ok {
					break gather
				}
				flushing = w.take(it, &batch, &flushes)
			case <-window.C:
				break gather
			}
		}
		window.Stop()
		var err error
		if len(batch) > 0 {
			if w.opts.BeforeWrite != nil {
				w.opts.BeforeWrite()
			}
			if err = w.opts.Write(batch); err != nil {
				w.failed.Add(int64(len(batch)))
				w.opts.Logger.Error(w.opts.Name+" write failed; these "+w.opts.Noun+" are lost", w.opts.Noun, len(batch), "err", err)
			} else {
				w.written.Add(int64(len(batch)))
			}
		}
		for _, f := range flushes {
			close(f)
		}
		if err != nil && w.closing.Load() {
			w.discardRest()
			return
		}
	}
}

func (w *Writer[T]) take(it item[T], batch *[]T, flushes *[]chan struct{}) bool {
	if it.flush != nil {
		*flushes = append(*flushes, it.flush)
		return true
	}
	*batch = append(*batch, it.rec)
	return false
}

// discardRest empties the queue after a failed write during Close.
func (w *Writer[T]) discardRest() {
	for it := range w.queue {
		if it.flush != nil {
			close(it.flush)
			continue
		}
		w.failed.Add(1)
	}
}
