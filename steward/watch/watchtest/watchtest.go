// Package watchtest holds fakes for tests that run the watch engine.
package watchtest

import (
	"sync"
	"time"
)

// Clock is a watch.Clock that moves only when the test advances it; its
// After never fires, so the engine's loop waits until the test acts.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// After returns a channel that never delivers.
func (c *Clock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }
