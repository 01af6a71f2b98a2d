package recovery_test

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
)

// fakeClock is the clock a test plays: time moves only when the test says.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

type fakeTimer struct {
	clock *fakeClock
	at    time.Time
	c     chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) recovery.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.signalLocked()
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
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

func (c *fakeClock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves time on by d and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
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

// WaitTimers blocks until at least n timers are pending.
func (c *fakeClock) WaitTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
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
		case <-deadline:
			t.Fatalf("fake clock: %d timers never became pending", n)
		}
	}
}

// AdvanceToEarliest waits for a pending timer, moves time to the earliest
// one and fires it, returning how far time moved.
func (c *fakeClock) AdvanceToEarliest(t testing.TB) time.Duration {
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
