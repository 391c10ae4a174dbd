package batchwrite_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentstack/agentstack/batchwrite"
)

type sink struct {
	mu      sync.Mutex
	batches [][]int
	fail    error
	hold    chan struct{}
}

func (s *sink) write(b []int) error {
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.batches = append(s.batches, append([]int(nil), b...))
	return nil
}

func (s *sink) all() (n int, batches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		n += len(b)
	}
	return n, len(s.batches)
}

func TestBatchesAndFlush(t *testing.T) {
	s := &sink{}
	w := batchwrite.New(batchwrite.Options[int]{Write: s.write, Window: time.Hour, MaxBatch: 10})
	for i := range 25 {
		if !w.Add(i) {
			t.Fatalf("Add(%d) dropped", i)
		}
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two full batches of ten; the Flush ends the third window early.
	if n, b := s.all(); n != 25 || b != 3 {
		t.Fatalf("%d records in %d batches", n, b)
	}
	if st := w.Stats(); st != (batchwrite.Stats{Queued: 25, Written: 25}) {
		t.Fatalf("stats %+v", st)
	}
	w.Close()
}

func TestNeverBlocksAndCountsDrops(t *testing.T) {
	s := &sink{hold: make(chan struct{})}
	w := batchwrite.New(batchwrite.Options[int]{Write: s.write, Window: time.Millisecond, MaxBatch: 1, QueueSize: 4})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			w.Add(i) // the writer is stuck: the queue fills and the rest drop
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Add blocked on a stuck writer")
	}
	close(s.hold)
	w.Close()
	st := w.Stats()
	if st.Queued+st.Dropped != 100 || st.Dropped < 90 || st.Written != st.Queued {
		t.Fatalf("stats %+v", st)
	}
}

func TestAfterCloseNothingPanics(t *testing.T) {
	s := &sink{}
	w := batchwrite.New(batchwrite.Options[int]{Write: s.write})
	w.Add(1)
	w.Close()
	w.Close()
	if w.Add(2) {
		t.Fatal("Add after Close accepted")
	}
	if err := w.Flush(context.Background()); !errors.Is(err, batchwrite.ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	if n, _ := s.all(); n != 1 {
		t.Fatalf("Close wrote %d records, want the queued one", n)
	}
	if st := w.Stats(); st.Dropped != 1 || st.Written != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFailedWriteWhileClosingDiscardsTheRest(t *testing.T) {
	s := &sink{hold: make(chan struct{}), fail: errors.New("disk gone")}
	calls := 0
	// The writer is held at its first batch until Close begins.
	w := batchwrite.New(batchwrite.Options[int]{Write: func(b []int) error { calls++; return s.write(b) }, MaxBatch: 5, Window: time.Hour,
		Closing: func() { close(s.hold) }})
	for i := range 50 {
		w.Add(i)
	}
	w.Close()
	if st := w.Stats(); st.Failed != 50 || st.Written != 0 {
		t.Fatalf("stats %+v", st)
	}
	if calls != 1 {
		t.Fatalf("%d writes attempted against a failing store, want 1", calls)
	}
}
