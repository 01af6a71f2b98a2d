// Package backoff is the one exponential backoff of this repository's
// loops: the reconcile Loop's per-key retries and its rewatch of a store,
// and the stores' own re-list after a broken watch. One implementation,
// so that the doubling, its cap and its overflow guard are written and
// tested once.
package backoff

import (
	"context"
	"time"
)

// Rewatch is the backoff a watch that broke waits with before it is
// taken up again: 100 ms doubling to 5 s. The stores' watches and the
// Loop's StoreEvents share it, so a store outage is retried at one pace.
var Rewatch = Doubling{Base: 100 * time.Millisecond, Max: 5 * time.Second}

// Doubling waits Base, doubling with every consecutive failure, up to
// Max.
type Doubling struct {
	Base, Max time.Duration
}

// Delay is the wait before retry n (counted from 0).
func (d Doubling) Delay(n int) time.Duration {
	// Base<<n only when it cannot pass Max: a shift that overflows wraps
	// round to any value, small and positive included.
	if n < 0 || n >= 63 || d.Base > d.Max>>n {
		return d.Max
	}
	return d.Base << n
}

// Sleep waits Delay(n), or until ctx is done: it reports whether the
// wait ran its course.
func (d Doubling) Sleep(ctx context.Context, n int) bool {
	t := time.NewTimer(d.Delay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
