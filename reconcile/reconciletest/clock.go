// Package reconciletest helps test code that runs on a [reconcile.Loop]:
// a clock the test moves by hand, so backoffs, requeues, resyncs and
// deadlines happen when the test says and never after a real wait.
package reconciletest

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
)

// waitTimersBound is how long WaitTimers waits before failing the test:
// a regression is a named failure, not a hung test binary.
const waitTimersBound = 20 * time.Second

// Clock is a [reconcile.Clock] whose time moves only when the test says.
// It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{}
}

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

type timer struct {
	clock *Clock
	at    time.Time
	c     chan time.Time
}

// Now implements [reconcile.Clock].
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements [reconcile.Clock]: the timer fires when Advance
// moves the time to or past its due time.
func (c *Clock) NewTimer(d time.Duration) reconcile.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.signalLocked()
	return t
}

func (t *timer) C() <-chan time.Time { return t.c }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, other := range c.timers {
		if other == t {
			c.timers = append(c.timers[:k], c.timers[k+1:]...)
			c.signalLocked()
			return true
		}
	}
	return false
}

func (c *Clock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves time on by d and fires the timers due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *Clock) fireLocked() {
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.c <- c.now
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.signalLocked()
}

// WaitTimers blocks until at least n timers are pending, and fails the
// test if that does not happen within 20 seconds.
func (c *Clock) WaitTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(waitTimersBound)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("reconciletest.Clock: %d timers never became pending within %v", n, waitTimersBound)
		}
	}
}

// AdvanceToEarliest waits for a pending timer, moves time to the earliest
// one and fires it, returning how far time moved.
func (c *Clock) AdvanceToEarliest(t testing.TB) time.Duration {
	t.Helper()
	c.WaitTimers(t, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	earliest := c.timers[0].at
	for _, tm := range c.timers {
		if tm.at.Before(earliest) {
			earliest = tm.at
		}
	}
	d := earliest.Sub(c.now)
	c.now = earliest
	c.fireLocked()
	return d
}
