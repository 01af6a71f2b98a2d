package reconcile

import (
	"sync/atomic"
	"time"
)

// Outcome is how one Reconcile call ended.
type Outcome uint8

// The reconcile outcomes.
const (
	OutcomeSucceeded Outcome = iota + 1 // nil error, no requeue
	OutcomeRequeued                     // nil error, Result.RequeueAfter > 0
	OutcomeErrored                      // an error: retried with backoff
	OutcomeTerminal                     // an error marked with TerminalError: not retried
	OutcomePanicked                     // Reconcile panicked: retried with backoff
)

func (o Outcome) String() string {
	switch o {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeRequeued:
		return "requeued"
	case OutcomeErrored:
		return "errored"
	case OutcomeTerminal:
		return "terminal"
	case OutcomePanicked:
		return "panicked"
	}
	return "unknown"
}

// ReconcileEvent describes one Reconcile call.
type ReconcileEvent[K comparable] struct {
	Key        K
	Outcome    Outcome
	Err        error
	Duration   time.Duration
	QueueDepth int           // keys waiting as this call ends, not counting its own retry
	RetryIn    time.Duration // when the key comes back (backoff or RequeueAfter), 0 if not scheduled
}

// AdoptionReport is the outcome of a loop's adoption pass.
type AdoptionReport[K comparable] struct {
	Listed  int // items the world has
	Adopted []K // items rebuilt by the Adopter
	Gone    []K // expected keys the world no longer has
	Errors  int // Adopt or Gone calls that failed
}

// ReconcileObserver is told about every Reconcile call, for metrics.
type ReconcileObserver[K comparable] interface {
	ObserveReconcile(ReconcileEvent[K])
}

// AdoptionObserver is told the outcome of the adoption pass.
type AdoptionObserver[K comparable] interface {
	ObserveAdoption(AdoptionReport[K])
}

// ReconcileObserverFunc adapts a function to [ReconcileObserver].
type ReconcileObserverFunc[K comparable] func(ReconcileEvent[K])

// ObserveReconcile calls f.
func (f ReconcileObserverFunc[K]) ObserveReconcile(ev ReconcileEvent[K]) { f(ev) }

// AdoptionObserverFunc adapts a function to [AdoptionObserver].
type AdoptionObserverFunc[K comparable] func(AdoptionReport[K])

// ObserveAdoption calls f.
func (f AdoptionObserverFunc[K]) ObserveAdoption(r AdoptionReport[K]) { f(r) }

// Stats are a loop's running totals, for a metrics adapter to read.
type Stats struct {
	Reconciles uint64 // calls of Reconcile
	Errors     uint64 // calls that returned an error (terminal ones included)
	Terminal   uint64
	Requeues   uint64 // calls that asked for RequeueAfter
	Panics     uint64
	Adopted    uint64
	Gone       uint64
	QueueDepth int // keys waiting now (with several workers, adds not yet deduplicated count once each)
}

// counters are the loop's running totals. The ones every reconcile
// writes are kept per shard, counted by the workers at home there: one
// counter written by every worker was a cache line the cores handed back
// and forth on every key.
type counters struct {
	adopted, gone atomic.Uint64
	byHome        []homeCounters
}

type homeCounters struct {
	reconciles, errors, terminal, requeues, panics atomic.Uint64
	_                                              [88]byte // 128 bytes: no two homes share a cache line
}

// sum adds up the totals of every home into s.
func (c *counters) sum(s *Stats) {
	s.Adopted, s.Gone = c.adopted.Load(), c.gone.Load()
	for i := range c.byHome {
		h := &c.byHome[i]
		s.Reconciles += h.reconciles.Load()
		s.Errors += h.errors.Load()
		s.Terminal += h.terminal.Load()
		s.Requeues += h.requeues.Load()
		s.Panics += h.panics.Load()
	}
}
