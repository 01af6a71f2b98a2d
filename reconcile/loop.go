package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/storage/storekit/backoff"
)

// Backoff is the per-key retry delay after a failed Reconcile: Base,
// doubling with every consecutive failure up to Max, shortened by up to
// Jitter (a fraction, 0 to 1) at random so that keys failing together do
// not retry together.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// delay is the wait before retry number n (from 0), without jitter.
func (b Backoff) delay(n int) time.Duration {
	return backoff.Doubling{Base: b.Base, Max: b.Max}.Delay(n)
}

// DefaultBackoff is controller-runtime's: 5 ms doubling to 1000 s, plus
// 10% jitter.
func DefaultBackoff() Backoff {
	return Backoff{Base: 5 * time.Millisecond, Max: 1000 * time.Second, Jitter: 0.1}
}

// DefaultResync is how often a loop lists the world when Options.Resync
// is zero.
const DefaultResync = 10 * time.Minute

// Options configure a [Loop]. Only Reconciler is required.
type Options[K comparable] struct {
	// Reconciler is called for every key.
	Reconciler Reconciler[K]

	// World returns the items the world has now (running processes,
	// Kubernetes Jobs), with the identity the world keeps for them. The
	// adoption pass hands each to the Adopter, and reports the Known
	// keys it lacks as gone. Never add the controller's own records to
	// it: give those as Known, or nothing is ever gone.
	World func(ctx context.Context) ([]Item[K], error)

	// Known returns the keys the controller expects to control, from its
	// own store ([StoreKeys] lists a store's). With World, those it lacks
	// are gone; with or without it, each is reconciled in the first pass
	// and at every Resync (a deadline reaper's loop has Known alone).
	Known func(ctx context.Context) ([]K, error)

	// Adopter rebuilds the World's items in the adoption pass. Optional,
	// and only with World; if it also implements [GoneHandler] it hears
	// of gone keys.
	Adopter Adopter[K]

	// Events are keys to reconcile soon, from a store watch or an
	// informer. A closed channel just stops delivering. Optional.
	Events <-chan K

	// Resync is the period at which every key of World and Known is
	// reconciled again; zero is DefaultResync, a negative value disables
	// periodic resync (the first pass still runs).
	Resync time.Duration

	// Workers reconcile different keys concurrently; default 1.
	Workers int

	// AdoptWorkers call the Adopter for different items concurrently in
	// the adoption pass; default 1, one item after another. Above 1 the
	// Adopter must be safe for concurrent use. The pass still ends before
	// the first Reconcile call, and its report lists the adopted keys in
	// World's order. A controller restarted over 100k executions spends a
	// fifth of its recovery adopting them; more cores take that down.
	AdoptWorkers int

	// Backoff for failed keys; nil is DefaultBackoff.
	Backoff *Backoff

	// Limiter, if set, is a global rate limit on Reconcile calls (all
	// keys together), on top of per-key backoff; *rate.Limiter from
	// golang.org/x/time/rate is one. A worker waits on it before every
	// call. If Wait fails while the loop runs (the limiter cannot give a
	// token before the context's deadline), the key is retried after its
	// backoff and the worker carries on.
	Limiter Limiter

	// Logger receives errors (Error), retried failures (Warn), panics
	// (Error, with the key) and each adoption pass's result (Info). Nil
	// is slog.Default(), the process's default logger: a panicking
	// reconciler is never silent. To log nothing, give
	// slog.New(slog.DiscardHandler).
	Logger *slog.Logger

	// ReconcileObserver, if set, is told about every Reconcile call.
	ReconcileObserver ReconcileObserver[K]

	// AdoptionObserver, if set, is told the outcome of the adoption
	// pass.
	AdoptionObserver AdoptionObserver[K]

	// Clock is the time source for backoff, requeues and resync;
	// nil is the system clock.
	Clock Clock
}

// Limiter is a rate limit a worker waits on before each Reconcile call.
type Limiter interface {
	// Wait blocks until a call may be made, or fails when it cannot be
	// made before ctx ends.
	Wait(ctx context.Context) error
}

// isNilLimiter reports whether l is nil, or a nil pointer in the
// interface.
func isNilLimiter(l Limiter) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// checkLimiter refuses a limiter that says (through the Limit and Burst
// methods x/time/rate's *rate.Limiter has, found without importing it:
// the module depends on the standard library alone) that no call could
// ever pass, or none after its burst.
func checkLimiter(l Limiter) error {
	if l == nil {
		return nil
	}
	bursts, ok := l.(interface{ Burst() int })
	if !ok {
		return nil
	}
	limit, ok := limitOf(l)
	if !ok || limit == math.MaxFloat64 { // rate.Inf: no limit at all
		return nil
	}
	switch {
	case bursts.Burst() < 1:
		return errors.New("reconcile: NewLoop: Limiter has a burst below 1, so no call could ever pass")
	case limit <= 0:
		return fmt.Errorf("reconcile: NewLoop: Limiter has a rate of %v, so no call could pass after its burst of %d", limit, bursts.Burst())
	}
	return nil
}

// limitOf calls l's Limit method, if it has one returning a number of
// events a second.
func limitOf(l Limiter) (float64, bool) {
	m := reflect.ValueOf(l).MethodByName("Limit")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Float64 {
		return 0, false
	}
	return m.Call(nil)[0].Float(), true
}

// Loop runs a [Reconciler] over the keys of the world: first an adoption
// pass that adopts what the world has and reports what it lost, then
// reconciles driven by events and periodic resyncs, with dedup, per-key
// exclusivity, per-key exponential backoff, an optional global rate limit
// and panic recovery. Build one with [NewLoop] and call Run once.
type Loop[K comparable] struct {
	opt       Options[K]
	backoff   Backoff
	clock     Clock
	log       *slog.Logger
	reconcile ReconcileObserver[K]
	adoption  AdoptionObserver[K]
	q         *queue[K]
	stats     counters
	started   atomic.Bool
	recovered chan struct{}
}

// NewLoop checks opt and returns a loop ready to Run.
func NewLoop[K comparable](opt Options[K]) (*Loop[K], error) {
	var errs []error
	if opt.Reconciler == nil {
		errs = append(errs, errors.New("reconcile: NewLoop: Reconciler is required"))
	}
	if opt.Adopter != nil && opt.World == nil {
		errs = append(errs, errors.New("reconcile: NewLoop: an Adopter needs World, the items it adopts"))
	}
	if opt.Workers < 0 || opt.Workers > 10000 {
		errs = append(errs, fmt.Errorf("reconcile: NewLoop: Workers %d, want 0 (default 1) to 10000", opt.Workers))
	}
	if opt.AdoptWorkers < 0 || opt.AdoptWorkers > 10000 {
		errs = append(errs, fmt.Errorf("reconcile: NewLoop: AdoptWorkers %d, want 0 (default 1) to 10000", opt.AdoptWorkers))
	}
	b := DefaultBackoff()
	if opt.Backoff != nil {
		b = *opt.Backoff
		switch {
		case b.Base <= 0 || b.Max < b.Base:
			errs = append(errs, fmt.Errorf("reconcile: NewLoop: Backoff from %v to %v, want 0 < Base <= Max", b.Base, b.Max))
		case b.Jitter < 0 || b.Jitter > 1:
			errs = append(errs, fmt.Errorf("reconcile: NewLoop: Backoff jitter %v, want 0 to 1", b.Jitter))
		}
	}
	if isNilLimiter(opt.Limiter) {
		opt.Limiter = nil // a typed nil is no limiter, not a crash
	}
	if err := checkLimiter(opt.Limiter); err != nil {
		errs = append(errs, err)
	}
	l := &Loop[K]{opt: opt, backoff: b, clock: opt.Clock, log: opt.Logger, recovered: make(chan struct{})}
	if l.clock == nil {
		l.clock = systemClock{}
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.reconcile, l.adoption = opt.ReconcileObserver, opt.AdoptionObserver
	if l.opt.Workers == 0 {
		l.opt.Workers = 1
	}
	l.q = newQueue[K](l.opt.Workers)
	l.stats.byHome = make([]homeCounters, len(l.q.shards))
	if l.opt.Resync == 0 {
		l.opt.Resync = DefaultResync
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return l, nil
}

// Add queues keys for reconciliation, as an event would. It may be called
// before and during Run. On a zero Loop (not made by NewLoop) it does
// nothing.
func (l *Loop[K]) Add(keys ...K) {
	if l.q != nil {
		l.q.add(keys...)
	}
}

// errZeroLoop is what the methods of a zero Loop return.
var errZeroLoop = errors.New("reconcile: zero Loop: make one with NewLoop")

// Stats returns the running totals.
func (l *Loop[K]) Stats() Stats {
	s := Stats{QueueDepth: l.depth()}
	l.stats.sum(&s)
	return s
}

func (l *Loop[K]) depth() int {
	if l.q == nil {
		return 0
	}
	return l.q.depth()
}

// Idle blocks until the adoption pass is over and nothing is queued,
// being reconciled or waiting for a retry; or until the loop stops or ctx
// is done. Every Reconcile call made by then has been told to the
// ReconcileObserver. It is for tests and for an orderly handover, not for
// the hot path.
func (l *Loop[K]) Idle(ctx context.Context) error {
	if l.q == nil {
		return errZeroLoop
	}
	if ctx == nil {
		return errors.New("reconcile: Idle: nil context")
	}
	select {
	case <-l.recovered:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.q.waitIdle(ctx)
}

// Run runs the loop until ctx is done, then waits for the Reconcile calls
// in flight (their context is cancelled) and returns nil. Keys still
// queued are dropped: the next run's adoption pass finds them again. A
// Loop runs once.
func (l *Loop[K]) Run(ctx context.Context) error {
	if l.q == nil {
		return errZeroLoop
	}
	if ctx == nil {
		return errors.New("reconcile: Run: nil context")
	}
	if !l.started.CompareAndSwap(false, true) {
		return errors.New("reconcile: Run: the loop has run already")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goroutine := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	defer func() {
		l.q.stop()
		wg.Wait()
	}()
	goroutine(func() { l.delayer(ctx) })
	if l.opt.Events != nil {
		goroutine(func() { l.events(ctx) })
	}
	if l.opt.World != nil || l.opt.Known != nil {
		if !l.adopt(ctx) {
			close(l.recovered)
			return nil
		}
		if l.opt.Resync > 0 {
			goroutine(func() { l.resync(ctx) })
		}
	}
	close(l.recovered)
	for home := range l.opt.Workers {
		goroutine(func() { l.work(ctx, home%len(l.q.shards)) })
	}
	<-ctx.Done()
	return nil
}

// adopt runs the first pass: the adoption pass over World, and every
// key of World and Known queued; listing is retried with backoff until it
// works. False means ctx ended first.
func (l *Loop[K]) adopt(ctx context.Context) bool {
	var items []Item[K]
	var known []K
	for attempt := 0; ; attempt++ {
		var err error
		items, known, err = l.list(ctx)
		if err == nil {
			break
		}
		wait := l.backoff.delay(attempt)
		l.log.Error("adoption pass: cannot list the world; retrying", "err", err, "retry_in", wait)
		if !l.sleep(ctx, wait) {
			return false
		}
	}
	report := AdoptionReport[K]{Listed: len(items)}
	var world map[K]struct{} // only to find the gone among known keys
	if len(known) > 0 {
		world = make(map[K]struct{}, len(items))
	}
	keys := make([]K, 0, len(items)+len(known))
	if l.opt.Adopter != nil && len(items) > 0 {
		report.Adopted = make([]K, 0, len(items))
	}
	errs := l.adoptAll(ctx, items)
	for i, it := range items {
		if world != nil {
			world[it.Key] = struct{}{}
		}
		keys = append(keys, it.Key)
		if l.opt.Adopter == nil {
			continue
		}
		if errs != nil && errs[i] != nil {
			report.Errors++
			l.log.Error("adoption pass: adopt failed", "key", it.Key, "err", errs[i])
			continue
		}
		report.Adopted = append(report.Adopted, it.Key)
	}
	gone, _ := l.opt.Adopter.(GoneHandler[K])
	for _, k := range known {
		if _, ok := world[k]; ok {
			continue
		}
		keys = append(keys, k)
		if l.opt.World == nil {
			continue // no world to be gone from: a key to reconcile
		}
		report.Gone = append(report.Gone, k)
		if gone != nil {
			if err := gone.Gone(ctx, k); err != nil {
				report.Errors++
				l.log.Error("adoption pass: gone handler failed", "key", k, "err", err)
			}
		}
	}
	l.stats.adopted.Add(uint64(len(report.Adopted)))
	l.stats.gone.Add(uint64(len(report.Gone)))
	l.log.Info("adoption pass done", "listed", report.Listed, "adopted", len(report.Adopted), "gone", len(report.Gone), "errors", report.Errors)
	if l.adoption != nil {
		l.adoption.ObserveAdoption(report)
	}
	l.q.add(keys...)
	return ctx.Err() == nil
}

// adoptChunk is how many items an adoption worker takes at a time: few
// enough to share the work evenly, enough that the workers do not write
// next to each other's results.
const adoptChunk = 64

// adoptAll calls the Adopter for every item, AdoptWorkers at a time, and
// returns what each call returned, by the item's index; nil if every
// call succeeded one after another.
func (l *Loop[K]) adoptAll(ctx context.Context, items []Item[K]) []error {
	if l.opt.Adopter == nil {
		return nil
	}
	workers := min(l.opt.AdoptWorkers, (len(items)+adoptChunk-1)/adoptChunk)
	if workers <= 1 {
		var errs []error // made at the first failure
		for i, it := range items {
			if err := l.adoptOne(ctx, it); err != nil {
				if errs == nil {
					errs = make([]error, len(items))
				}
				errs[i] = err
			}
		}
		return errs
	}
	errs := make([]error, len(items))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(adoptChunk)) - adoptChunk
				if lo >= len(items) {
					return
				}
				for i := lo; i < min(lo+adoptChunk, len(items)); i++ {
					errs[i] = l.adoptOne(ctx, items[i])
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// adoptOne calls the Adopter for it, turning a panic into an error: one
// item the Adopter cannot handle fails its own adoption, as a Reconcile
// that panics fails its own call.
func (l *Loop[K]) adoptOne(ctx context.Context, it Item[K]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile: Adopt(%v) panicked: %v\n%s", it.Key, r, debug.Stack())
		}
	}()
	return l.opt.Adopter.Adopt(ctx, it)
}

func (l *Loop[K]) resync(ctx context.Context) {
	for l.sleep(ctx, l.opt.Resync) {
		items, known, err := l.list(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Error("resync: cannot list", "err", err)
			}
			continue
		}
		keys := make([]K, 0, len(items)+len(known))
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		l.q.add(append(keys, known...)...)
	}
}

// list calls World and Known, those given.
func (l *Loop[K]) list(ctx context.Context) ([]Item[K], []K, error) {
	var items []Item[K]
	var known []K
	var err error
	if l.opt.World != nil {
		if items, err = l.opt.World(ctx); err != nil {
			return nil, nil, fmt.Errorf("listing the world: %w", err)
		}
	}
	if l.opt.Known != nil {
		if known, err = l.opt.Known(ctx); err != nil {
			return nil, nil, fmt.Errorf("listing the known keys: %w", err)
		}
	}
	return items, known, nil
}

func (l *Loop[K]) events(ctx context.Context) {
	for {
		select {
		case k, ok := <-l.opt.Events:
			if !ok {
				return
			}
			l.q.add(k)
		case <-ctx.Done():
			return
		}
	}
}

// delayer moves delayed keys into the queue when they are due.
func (l *Loop[K]) delayer(ctx context.Context) {
	for {
		next, ok := l.q.promote(l.clock.Now())
		var timer Timer
		var fire <-chan time.Time
		if ok {
			timer = l.clock.NewTimer(next.Sub(l.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-fire:
		case <-l.q.wake:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// work is one worker; home is the queue shard it takes keys from first.
func (l *Loop[K]) work(ctx context.Context, home int) {
	for {
		k, ok := l.q.get(home)
		// While keys are queued, finishing one and taking the next from
		// the same shard is one trip through that shard's lock.
		for ok {
			if l.opt.Limiter != nil {
				if err := l.opt.Limiter.Wait(ctx); err != nil {
					if ctx.Err() != nil {
						l.q.done(k)
						return
					}
					// The limiter cannot give a token now: the key waits its
					// backoff and this worker goes on, so neither is lost.
					retry := l.q.backoff(k, l.backoff)
					l.log.Error("rate limiter refused a reconcile; retrying the key", "key", k, "err", err, "retry_in", retry)
					k, ok = l.q.finishNext(k, home, false, retry, l.clock.Now())
					continue
				}
			}
			k, ok = l.process(ctx, k, home)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// process reconciles k, finishes it and returns the next queued key, if
// any.
func (l *Loop[K]) process(ctx context.Context, k K, home int) (K, bool) {
	var start time.Time
	if l.reconcile != nil {
		start = l.clock.Now()
	}
	res, err, panicked := l.call(ctx, k)
	ev := ReconcileEvent[K]{Key: k, Err: err}
	tally := &l.stats.byHome[home]
	tally.reconciles.Add(1)
	forget := true
	switch {
	case err == nil && res.RequeueAfter <= 0:
		ev.Outcome = OutcomeSucceeded
	case err == nil:
		tally.requeues.Add(1)
		ev.Outcome, ev.RetryIn = OutcomeRequeued, res.RequeueAfter
	case panicked:
		tally.panics.Add(1)
		tally.errors.Add(1)
		forget = false
		ev.Outcome, ev.RetryIn = OutcomePanicked, l.q.backoff(k, l.backoff)
		l.log.Error("reconcile panicked", "key", k, "err", err, "retry_in", ev.RetryIn)
	case errors.Is(err, ErrTerminal):
		tally.terminal.Add(1)
		tally.errors.Add(1)
		ev.Outcome = OutcomeTerminal
		l.log.Error("reconcile failed for good", "key", k, "err", err)
	default:
		tally.errors.Add(1)
		forget = false
		ev.Outcome, ev.RetryIn = OutcomeErrored, l.q.backoff(k, l.backoff)
		if ctx.Err() == nil {
			l.log.Warn("reconcile failed; retrying", "key", k, "err", err, "retry_in", ev.RetryIn)
		}
	}
	var now time.Time
	if ev.RetryIn > 0 || l.reconcile != nil {
		now = l.clock.Now()
	}
	if l.reconcile != nil {
		ev.Duration = now.Sub(start)
		ev.QueueDepth = l.q.depth()
		// Before the key is finished: once it is, the loop may be idle,
		// and Idle's caller then reads the observer's counts. Observed
		// after, the last call of a pass was sometimes not yet counted.
		l.reconcile.ObserveReconcile(ev)
	}
	return l.q.finishNext(k, home, forget, ev.RetryIn, now)
}

// call runs Reconcile, turning a panic into an error.
func (l *Loop[K]) call(ctx context.Context, k K) (res Result, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			res, err, panicked = Result{}, fmt.Errorf("reconcile: Reconcile(%v) panicked: %v\n%s", k, r, debug.Stack()), true
		}
	}()
	res, err = l.opt.Reconciler.Reconcile(ctx, k)
	return res, err, false
}

// sleep waits d on the loop's clock; false means ctx ended first.
func (l *Loop[K]) sleep(ctx context.Context, d time.Duration) bool {
	t := l.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
