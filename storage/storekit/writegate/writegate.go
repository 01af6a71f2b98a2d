// Package writegate is the gate a holder's writes pass through in every
// store: a write runs only while the ownership lasts, and the ownership
// ends (its Lost channel closes) only once the writes in flight have
// returned, so none lands after a caller was told the ownership ended.
package writegate

import "sync"

// Gate is one ownership's gate. Make it with New.
type Gate struct {
	// mu is held for reading by every write and for writing while the
	// ownership ends.
	mu    sync.RWMutex
	ended bool // guarded by mu
	lost  chan struct{}
}

// New returns the gate of an ownership that has not ended.
func New() *Gate { return &Gate{lost: make(chan struct{})} }

// Lost is closed when the ownership ends.
func (g *Gate) Lost() <-chan struct{} { return g.lost }

// Write runs write while the ownership lasts and reports true, or
// reports false without running it once the ownership has ended. The
// ownership cannot end while write runs.
func (g *Gate) Write(write func()) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.ended {
		return false
	}
	write()
	return true
}

// End ends the ownership, once the writes in flight have returned; it is
// idempotent. It must not be called from inside a write.
func (g *Gate) End() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.ended = true
		close(g.lost)
	}
}
