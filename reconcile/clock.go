package reconcile

import "time"

// Clock is the time source of a [Loop]: backoff, requeues and resyncs wait
// on its timers. The default is the system clock; tests pass a fake one
// and move time by hand, so backoff is tested without sleeping.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a [Clock]'s timer, like [time.Timer].
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock returns the system clock: what every Clock setting left
// nil means.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
