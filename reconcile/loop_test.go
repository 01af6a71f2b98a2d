package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newLoop[K comparable](t *testing.T, opt reconcile.Options[K]) *reconcile.Loop[K] {
	t.Helper()
	l, err := reconcile.NewLoop(opt)
	require.NoError(t, err)
	return l
}

// calls records Reconcile calls.
type calls[K comparable] struct {
	mu   sync.Mutex
	keys []K
}

func (c *calls[K]) add(k K) {
	c.mu.Lock()
	c.keys = append(c.keys, k)
	c.mu.Unlock()
}

func (c *calls[K]) get() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.keys)
}

func TestLoopReconcilesEachQueuedKeyOnceHoweverOftenItIsQueued(t *testing.T) {
	var got calls[string]
	gate := make(chan struct{})
	l := newLoop(t, reconcile.Options[string]{Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
		<-gate
		got.add(k)
		return reconcile.Result{}, nil
	})})
	l.Add("a", "b", "a", "c", "b", "a")
	reconciletest.Start(t, l)
	close(gate)
	reconciletest.Idle(t, l)
	require.ElementsMatch(t, []string{"a", "b", "c"}, got.get())
}

// A key queued while it is being reconciled runs once more after the
// current pass, and never concurrently with it.
func TestLoopNeverRunsAKeyTwiceAtOnceAndRerunsWhatChangedDuringAPass(t *testing.T) {
	var inFlight, maxInFlight, passes atomic.Int32
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	l := newLoop(t, reconcile.Options[string]{Workers: 8, Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if passes.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		inFlight.Add(-1)
		return reconcile.Result{}, nil
	})})
	reconciletest.Start(t, l)
	l.Add("x")
	testwait.Recv(t, entered, "the reconcile to start")
	for range 100 {
		l.Add("x") // all folded into one more pass
	}
	close(release)
	reconciletest.Idle(t, l)
	require.Equal(t, int32(1), maxInFlight.Load())
	require.Equal(t, int32(2), passes.Load())
}

func TestLoopDifferentKeysRunConcurrently(t *testing.T) {
	const workers = 4
	var arrived sync.WaitGroup
	arrived.Add(workers)
	l := newLoop(t, reconcile.Options[int]{Workers: workers, Reconciler: reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) {
		arrived.Done()
		arrived.Wait() // only returns if all four run at once
		return reconcile.Result{}, nil
	})})
	l.Add(1, 2, 3, 4)
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
}

func TestLoopBackoffDoublesFromBaseToMaxWithoutSleeping(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	at := make(chan time.Time, 100)
	l := newLoop(t, reconcile.Options[string]{
		Clock:   clock,
		Backoff: &reconcile.Backoff{Base: 5 * time.Millisecond, Max: 100 * time.Millisecond},
		Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
			at <- clock.Now()
			return reconcile.Result{}, errors.New("still broken")
		}),
	})
	l.Add("k")
	reconciletest.Start(t, l)
	var gaps []time.Duration
	prev := testwait.Recv(t, at, "the first reconcile")
	for range 8 {
		clock.AdvanceToEarliest(t)
		next := testwait.Recv(t, at, "the next retry")
		gaps = append(gaps, next.Sub(prev))
		prev = next
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms, 100 * ms}, gaps)
	// The ninth failure is counted once its call has returned.
	require.Eventually(t, func() bool { return l.Stats().Errors == 9 }, 10*time.Second, time.Millisecond)
}

func TestLoopJitterOnlyShortensTheDelay(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var seen []reconcile.ReconcileEvent[string]
	var mu sync.Mutex
	obs := reconcile.ReconcileObserverFunc[string](func(ev reconcile.ReconcileEvent[string]) { mu.Lock(); seen = append(seen, ev); mu.Unlock() })
	failed := make(chan struct{}, 100)
	l := newLoop(t, reconcile.Options[string]{
		Clock: clock, ReconcileObserver: obs, Workers: 4,
		Backoff: &reconcile.Backoff{Base: time.Second, Max: time.Hour, Jitter: 0.5},
		Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
			failed <- struct{}{}
			return reconcile.Result{}, errors.New("no")
		}),
	})
	for k := range 50 {
		l.Add(fmt.Sprint(k))
	}
	reconciletest.Start(t, l)
	for range 50 {
		testwait.Recv(t, failed, "a failed reconcile")
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 50 }, 10*time.Second, time.Millisecond)
	distinct := map[time.Duration]bool{}
	for _, ev := range seen {
		require.Equal(t, reconcile.OutcomeErrored, ev.Outcome)
		require.LessOrEqual(t, ev.RetryIn, time.Second)
		require.GreaterOrEqual(t, ev.RetryIn, time.Second/2)
		distinct[ev.RetryIn] = true
	}
	require.Greater(t, len(distinct), 1, "keys failing together do not retry together")
}

func TestLoopRequeueAfterResetsTheBackoff(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	at := make(chan time.Time, 100)
	n := 0
	l := newLoop(t, reconcile.Options[string]{
		Clock:   clock,
		Backoff: &reconcile.Backoff{Base: 5 * time.Millisecond, Max: time.Second},
		Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
			n++
			at <- clock.Now()
			switch n {
			case 1, 2, 3, 5:
				return reconcile.Result{}, errors.New("flaky")
			case 4:
				return reconcile.Result{RequeueAfter: time.Minute}, nil
			}
			return reconcile.Result{}, nil
		}),
	})
	l.Add("k")
	reconciletest.Start(t, l)
	var gaps []time.Duration
	prev := testwait.Recv(t, at, "the first reconcile")
	for range 5 {
		clock.AdvanceToEarliest(t)
		next := testwait.Recv(t, at, "the next retry")
		gaps = append(gaps, next.Sub(prev))
		prev = next
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{5 * ms, 10 * ms, 20 * ms, time.Minute, 5 * ms}, gaps, "after the requeue the backoff starts over")
	reconciletest.Idle(t, l)
	st := l.Stats()
	require.EqualValues(t, 6, st.Reconciles)
	require.EqualValues(t, 1, st.Requeues)
}

func TestLoopDoesNotRetryTerminalErrors(t *testing.T) {
	var got calls[string]
	l := newLoop(t, reconcile.Options[string]{Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
		got.add(k)
		return reconcile.Result{}, reconcile.TerminalError(errors.New("bad spec"))
	})})
	l.Add("k")
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	require.Equal(t, []string{"k"}, got.get())
	st := l.Stats()
	require.EqualValues(t, 1, st.Terminal)
	require.Zero(t, st.QueueDepth)
	require.Nil(t, reconcile.TerminalError(nil))
	require.ErrorIs(t, reconcile.TerminalError(context.Canceled), context.Canceled)
}

func TestLoopRecoversAPanicAndRetries(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var n atomic.Int32
	l := newLoop(t, reconcile.Options[string]{Clock: clock, Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
		if n.Add(1) == 1 {
			panic("reconciler bug")
		}
		return reconcile.Result{}, nil
	})})
	l.Add("k")
	reconciletest.Start(t, l)
	clock.AdvanceToEarliest(t)
	reconciletest.Idle(t, l)
	require.EqualValues(t, 2, n.Load())
	require.EqualValues(t, 1, l.Stats().Panics)
}

func TestLoopAdoptionPassAdoptsTheWorldAndReportsWhatItLost(t *testing.T) {
	world := []reconcile.Item[string]{
		{Key: "sim-1", Identity: reconcile.Identity{Labels: map[string]string{"uuid": "sim-1", "manager": "mgr-a"}, Annotations: map[string]string{"location": "lab", "realm": "eu", "owner": "alice"}}},
		{Key: "sim-3", Identity: reconcile.Identity{Labels: map[string]string{"uuid": "sim-3", "manager": "mgr-a"}}},
	}
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var report reconcile.AdoptionReport[string]
	adopter := &recordingAdopter{note: note}
	l := newLoop(t, reconcile.Options[string]{
		World:            func(context.Context) ([]reconcile.Item[string], error) { return world, nil },
		Known:            func(context.Context) ([]string, error) { return []string{"sim-1", "sim-2"}, nil },
		Adopter:          adopter,
		AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(r reconcile.AdoptionReport[string]) { report = r }),
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
			note("reconcile " + k)
			return reconcile.Result{}, nil
		}),
	})
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	require.Equal(t, []string{"adopt sim-1 alice", "adopt sim-3 ", "gone sim-2"}, order[:3], "adoption happens before any reconcile")
	require.ElementsMatch(t, []string{"reconcile sim-1", "reconcile sim-2", "reconcile sim-3"}, order[3:])
	require.Equal(t, reconcile.AdoptionReport[string]{Listed: 2, Adopted: []string{"sim-1", "sim-3"}, Gone: []string{"sim-2"}}, report)
	st := l.Stats()
	require.EqualValues(t, 2, st.Adopted)
	require.EqualValues(t, 1, st.Gone)
}

type recordingAdopter struct{ note func(string) }

func (a *recordingAdopter) Adopt(_ context.Context, it reconcile.Item[string]) error {
	a.note("adopt " + it.Identity.Labels["uuid"] + " " + it.Identity.Annotations["owner"])
	return nil
}

func (a *recordingAdopter) Gone(_ context.Context, k string) error {
	a.note("gone " + k)
	return nil
}

// With AdoptWorkers the Adopter runs for several items at once, every
// item once; the report keeps World's order, and no Reconcile call comes
// before the pass is over.
func TestLoopAdoptsWithSeveralWorkersBeforeItReconciles(t *testing.T) {
	const n, workers = 1000, 4
	var world []reconcile.Item[string]
	for i := range n {
		world = append(world, reconcile.Item[string]{Key: fmt.Sprintf("ex-%04d", i)})
	}
	var adopted sync.Map
	var inFlight, most, done atomic.Int64
	// The first two calls wait for each other: one worker alone would
	// never get past the first.
	both := make(chan struct{})
	var first atomic.Int64
	var report reconcile.AdoptionReport[string]
	var early atomic.Int64
	l := newLoop(t, reconcile.Options[string]{
		World:        func(context.Context) ([]reconcile.Item[string], error) { return world, nil },
		AdoptWorkers: workers,
		Adopter: reconcile.AdopterFunc[string](func(ctx context.Context, it reconcile.Item[string]) error {
			now := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			switch first.Add(1) {
			case 1:
				select {
				case <-both:
				case <-time.After(10 * time.Second):
					return errors.New("no second Adopt call ran beside the first")
				}
			case 2:
				close(both)
			}
			if _, again := adopted.LoadOrStore(it.Key, true); again {
				return fmt.Errorf("%s adopted twice", it.Key)
			}
			done.Add(1)
			return nil
		}),
		AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(r reconcile.AdoptionReport[string]) { report = r }),
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
			if done.Load() != n {
				early.Add(1)
			}
			return reconcile.Result{}, nil
		}),
	})
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	require.Zero(t, report.Errors)
	keys := make([]string, n)
	for i, it := range world {
		keys[i] = it.Key
	}
	require.Equal(t, keys, report.Adopted, "every item adopted, in World's order")
	require.Greater(t, most.Load(), int64(1), "several Adopt calls at once")
	require.LessOrEqual(t, most.Load(), int64(workers))
	require.Zero(t, early.Load(), "no Reconcile before the adoption pass is over")
	require.EqualValues(t, n, l.Stats().Reconciles)
}

// An Adopt that panics fails that item's adoption, with one worker or
// several; the others are adopted and every key is still reconciled.
func TestLoopAdoptThatPanicsFailsItsItemAlone(t *testing.T) {
	for _, workers := range []int{0, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			var world []reconcile.Item[string]
			for i := range 300 {
				world = append(world, reconcile.Item[string]{Key: fmt.Sprintf("ex-%03d", i)})
			}
			var report reconcile.AdoptionReport[string]
			var reconciled atomic.Int64
			l := newLoop(t, reconcile.Options[string]{
				World:        func(context.Context) ([]reconcile.Item[string], error) { return world, nil },
				AdoptWorkers: workers,
				Adopter: reconcile.AdopterFunc[string](func(_ context.Context, it reconcile.Item[string]) error {
					if it.Key == "ex-123" {
						panic("cannot rebuild " + it.Key)
					}
					return nil
				}),
				AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(r reconcile.AdoptionReport[string]) { report = r }),
				Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
					reconciled.Add(1)
					return reconcile.Result{}, nil
				}),
			})
			reconciletest.Start(t, l)
			reconciletest.Idle(t, l)
			require.Equal(t, 1, report.Errors)
			require.Len(t, report.Adopted, 299)
			require.NotContains(t, report.Adopted, "ex-123")
			require.EqualValues(t, 300, reconciled.Load())
		})
	}
}

func TestNewLoopRefusesAdoptWorkersOutOfRange(t *testing.T) {
	for _, workers := range []int{-1, 10001} {
		_, err := reconcile.NewLoop(reconcile.Options[string]{
			Reconciler:   reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			AdoptWorkers: workers,
		})
		require.ErrorContains(t, err, "AdoptWorkers")
	}
}

func TestLoopAdoptionPassRetriesListingTheWorld(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var lists atomic.Int32
	var got calls[string]
	l := newLoop(t, reconcile.Options[string]{
		Clock: clock, Resync: -1,
		World: func(context.Context) ([]reconcile.Item[string], error) {
			if lists.Add(1) < 3 {
				return nil, errors.New("api server unreachable")
			}
			return []reconcile.Item[string]{{Key: "a"}}, nil
		},
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
			got.add(k)
			return reconcile.Result{}, nil
		}),
	})
	reconciletest.Start(t, l)
	require.Equal(t, 5*time.Millisecond, clock.AdvanceToEarliest(t))
	require.Equal(t, 10*time.Millisecond, clock.AdvanceToEarliest(t))
	reconciletest.Idle(t, l)
	require.EqualValues(t, 3, lists.Load())
	require.Equal(t, []string{"a"}, got.get())
}

func TestLoopResyncReconcilesEveryItemPeriodically(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var got calls[string]
	l := newLoop(t, reconcile.Options[string]{
		Clock: clock, Resync: time.Minute,
		World: func(context.Context) ([]reconcile.Item[string], error) {
			return []reconcile.Item[string]{{Key: "a"}, {Key: "b"}}, nil
		},
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
			got.add(k)
			return reconcile.Result{}, nil
		}),
	})
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	require.Len(t, got.get(), 2)
	for round := 2; round <= 4; round++ {
		require.Equal(t, time.Minute, clock.AdvanceToEarliest(t))
		require.Eventually(t, func() bool { return len(got.get()) == 2*round }, 10*time.Second, time.Millisecond)
	}
}

// The controller's own keys (Known) are reconciled with the world's at the
// first pass and at every resync, and are gone only from a world that
// lacks them; with no World at all (a deadline reaper), nothing is gone
// and the known keys are simply reconciled.
func TestLoopResyncReconcilesTheKnownKeysTooAndNothingIsGoneWithoutAWorld(t *testing.T) {
	for _, withWorld := range []bool{true, false} {
		t.Run(fmt.Sprintf("world %v", withWorld), func(t *testing.T) {
			clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
			var got calls[string]
			var reports []reconcile.AdoptionReport[string]
			opt := reconcile.Options[string]{
				Clock: clock, Resync: time.Minute,
				Known: func(context.Context) ([]string, error) { return []string{"a", "stored-only"}, nil },
				Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
					got.add(k)
					return reconcile.Result{}, nil
				}),
				AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(r reconcile.AdoptionReport[string]) { reports = append(reports, r) }),
			}
			if withWorld {
				opt.World = func(context.Context) ([]reconcile.Item[string], error) {
					return []reconcile.Item[string]{{Key: "a"}, {Key: "world-only"}}, nil
				}
			}
			l := newLoop(t, opt)
			reconciletest.Start(t, l)
			reconciletest.Idle(t, l)
			want := []string{"a", "stored-only"}
			if withWorld {
				want = []string{"a", "stored-only", "world-only"}
			}
			require.ElementsMatch(t, want, got.get())
			require.Len(t, reports, 1)
			if withWorld {
				require.Equal(t, []string{"stored-only"}, reports[0].Gone)
			} else {
				require.Empty(t, reports[0].Gone, "no world, nothing gone from it")
			}
			require.Equal(t, time.Minute, clock.AdvanceToEarliest(t))
			require.Eventually(t, func() bool { return len(got.get()) == 2*len(want) }, 10*time.Second, time.Millisecond)
			require.ElementsMatch(t, append(want, want...), got.get(), "the resync reconciles the known keys as well as the world's")
		})
	}
}

// StoreKeys lists the id of every execution that has not ended; the
// ended ones are left out. A store that lists in pages is asked for the
// live statuses only, so a record in a status the table lacks (a newer
// table's) is not listed; one that lists only whole lists it too.
func TestStoreKeysListsEveryExecutionThatHasNotEnded(t *testing.T) {
	table, err := transition.New("pending").Allow("pending", "running").Allow("running", "done").Terminal("done").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	for id, status := range map[string]string{"ex-2": "pending", "ex-1": "running", "ex-0": "done", "ex-9": "of-a-newer-table"} {
		_, err := store.Create(context.Background(), storage.Record{ID: id, Status: status})
		require.NoError(t, err)
	}
	ids, err := reconcile.StoreKeys(store, table)(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"ex-1", "ex-2"}, ids)
	ids, err = reconcile.StoreKeys(wholeLister{store}, table)(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"ex-1", "ex-2", "ex-9"}, ids)
	_, err = reconcile.StoreKeys[string](nil, table)(context.Background())
	require.Error(t, err)
	_, err = reconcile.StoreKeys[string](store, nil)(context.Background())
	require.Error(t, err)
}

// wholeLister is a store that lists only whole, as a store of a user's
// may.
type wholeLister struct{ m *storage.Memory }

func (l wholeLister) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	return l.m.List(ctx)
}

func TestLoopTakesKeysFromEventsAndSurvivesAClosedChannel(t *testing.T) {
	events := make(chan string)
	var got calls[string]
	l := newLoop(t, reconcile.Options[string]{Events: events, Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
		got.add(k)
		return reconcile.Result{}, nil
	})})
	reconciletest.Start(t, l)
	events <- "a"
	events <- "b"
	close(events)
	require.Eventually(t, func() bool { return len(got.get()) == 2 }, 10*time.Second, time.Millisecond)
	l.Add("c")
	reconciletest.Idle(t, l)
	require.Equal(t, []string{"a", "b", "c"}, got.get())
}

func TestLoopGlobalRateLimitHoldsCallsBackAndCancelReleasesThem(t *testing.T) {
	var n atomic.Int32
	l := newLoop(t, reconcile.Options[int]{
		Workers: 2,
		Limiter: rate.NewLimiter(rate.Every(time.Hour), 3),
		Reconciler: reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) {
			n.Add(1)
			return reconcile.Result{}, nil
		}),
	})
	l.Add(1, 2, 3, 4, 5, 6)
	stop := reconciletest.Start(t, l)
	require.Eventually(t, func() bool { return n.Load() == 3 }, 10*time.Second, time.Millisecond)
	// Both workers now wait for a token, holding keys 4 and 5; 6 waits in the queue.
	require.Eventually(t, func() bool { return l.Stats().QueueDepth == 1 }, 10*time.Second, time.Millisecond)
	stop()
	require.EqualValues(t, 3, n.Load(), "no call got past the limiter")
}

// failingLimiter refuses its first n waits, as a limiter whose next token
// comes after the context's deadline does.
type failingLimiter struct{ n atomic.Int32 }

func (f *failingLimiter) Wait(context.Context) error {
	if f.n.Add(-1) >= 0 {
		return errors.New("rate: Wait(n=1) would exceed context deadline")
	}
	return nil
}

// A limiter that fails while the loop runs costs the keys it refused a
// retry, never the worker or the key.
func TestLoopLimiterThatFailsLosesNeitherWorkersNorKeys(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	lim := &failingLimiter{}
	lim.n.Store(20)
	l := newLoop(t, reconcile.Options[int]{
		Workers: 2,
		Limiter: lim,
		Backoff: &reconcile.Backoff{Base: time.Millisecond, Max: time.Millisecond},
		Reconciler: reconcile.ReconcilerFunc[int](func(_ context.Context, k int) (reconcile.Result, error) {
			mu.Lock()
			seen[k]++
			mu.Unlock()
			return reconcile.Result{}, nil
		}),
	})
	l.Add(1, 2, 3, 4, 5, 6)
	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}, seen, "every key reconciled once the limiter let it")
	require.LessOrEqual(t, lim.n.Load(), int32(0), "the limiter refused 20 times")
	require.Zero(t, l.Stats().QueueDepth)
}

// Idle returns only once the observer has been told of every call: a
// caller reading metrics after Idle (prom's golden test) sometimes missed
// the last call's, which was observed after its key was finished.
func TestLoopIdleWaitsForTheObserverOfTheLastCall(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	l := newLoop(t, reconcile.Options[int]{
		Reconciler: reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
		ReconcileObserver: reconcile.ReconcileObserverFunc[int](func(reconcile.ReconcileEvent[int]) {
			entered <- struct{}{}
			<-release
		}),
	})
	l.Add(1)
	reconciletest.Start(t, l)
	t.Cleanup(releaseOnce) // runs before Start's: the loop can stop
	testwait.Recv(t, entered, "the observer of the only call")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l.Idle(ctx), context.DeadlineExceeded, "idle while the observer still counts the call")
	releaseOnce()
	reconciletest.Idle(t, l)
}

// Keys Run dropped when it returned are not counted as waiting.
func TestLoopQueueDepthIsZeroAfterRunReturns(t *testing.T) {
	block := make(chan struct{})
	l := newLoop(t, reconcile.Options[int]{
		Reconciler: reconcile.ReconcilerFunc[int](func(ctx context.Context, k int) (reconcile.Result, error) {
			if k == 0 {
				select {
				case <-block:
				case <-ctx.Done():
				}
				return reconcile.Result{}, nil
			}
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}),
	})
	l.Add(0, 1, 2, 3)
	stop := reconciletest.Start(t, l)
	require.Eventually(t, func() bool { return l.Stats().QueueDepth == 3 }, 10*time.Second, time.Millisecond)
	stop()
	require.Zero(t, l.Stats().QueueDepth, "Run dropped them")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, l.Idle(ctx), "and Idle agrees")
}

func TestLoopRunWaitsForInFlightPassesAndTheirContextIsCancelled(t *testing.T) {
	entered := make(chan struct{})
	var finished atomic.Bool
	l := newLoop(t, reconcile.Options[string]{Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, _ string) (reconcile.Result, error) {
		close(entered)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // cleanup after cancellation
		finished.Store(true)
		return reconcile.Result{}, ctx.Err()
	})})
	l.Add("k")
	stop := reconciletest.Start(t, l)
	testwait.Closed(t, entered, "the reconcile to start")
	stop()
	require.True(t, finished.Load(), "Run returned only after the in-flight pass")
}

func TestLoopRunsOnceAndRefusesBadOptions(t *testing.T) {
	noop := reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	l := newLoop(t, reconcile.Options[string]{Reconciler: noop})
	stop := reconciletest.Start(t, l)
	reconciletest.Idle(t, l) // the first Run is under way
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, l.Run(ctx), "a second Run")
	stop()

	for name, opt := range map[string]reconcile.Options[string]{
		"no reconciler":          {},
		"negative workers":       {Reconciler: noop, Workers: -1},
		"zero backoff base":      {Reconciler: noop, Backoff: &reconcile.Backoff{Max: time.Second}},
		"max below base":         {Reconciler: noop, Backoff: &reconcile.Backoff{Base: time.Second, Max: time.Millisecond}},
		"jitter above 1":         {Reconciler: noop, Backoff: &reconcile.Backoff{Base: 1, Max: 2, Jitter: 1.5}},
		"limiter never":          {Reconciler: noop, Limiter: rate.NewLimiter(1, 0)},
		"limiter stops at burst": {Reconciler: noop, Limiter: rate.NewLimiter(0, 3)},
		"limiter negative rate":  {Reconciler: noop, Limiter: rate.NewLimiter(-1, 3)},
		"adopter without world":  {Reconciler: noop, Adopter: reconcile.AdopterFunc[string](func(context.Context, reconcile.Item[string]) error { return nil })},
	} {
		_, err := reconcile.NewLoop(opt)
		require.Error(t, err, name)
	}
	// Limiters the loop accepts: a typed nil is no limiter, an unlimited
	// one or one of the caller's own with nothing to say is taken as is.
	for name, lim := range map[string]reconcile.Limiter{
		"typed nil":        (*rate.Limiter)(nil),
		"unlimited":        rate.NewLimiter(rate.Inf, 0),
		"one of its own":   ownLimiter{},
		"a rate and burst": rate.NewLimiter(10, 1),
	} {
		_, err := reconcile.NewLoop(reconcile.Options[string]{Reconciler: noop, Limiter: lim})
		require.NoError(t, err, name)
	}
}

// ownLimiter is a limiter that is not x/time/rate's.
type ownLimiter struct{}

func (ownLimiter) Wait(context.Context) error { return nil }

func TestLoopObserverSeesEveryOutcome(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	outcomes := map[string]reconcile.Outcome{}
	l := newLoop(t, reconcile.Options[string]{
		Clock: clock,
		ReconcileObserver: reconcile.ReconcileObserverFunc[string](func(ev reconcile.ReconcileEvent[string]) {
			mu.Lock()
			outcomes[ev.Key] = ev.Outcome
			mu.Unlock()
		}),
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, k string) (reconcile.Result, error) {
			switch k {
			case "error":
				return reconcile.Result{}, errors.New("e")
			case "terminal":
				return reconcile.Result{}, reconcile.TerminalError(errors.New("t"))
			case "requeue":
				return reconcile.Result{RequeueAfter: time.Hour}, nil
			case "panic":
				panic("p")
			}
			return reconcile.Result{}, nil
		}),
	})
	l.Add("ok", "error", "terminal", "requeue", "panic")
	reconciletest.Start(t, l)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(outcomes) == 5 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]reconcile.Outcome{
		"ok": reconcile.OutcomeSucceeded, "error": reconcile.OutcomeErrored, "terminal": reconcile.OutcomeTerminal,
		"requeue": reconcile.OutcomeRequeued, "panic": reconcile.OutcomePanicked,
	}, outcomes)
	keys := make([]string, 0)
	for k := range outcomes {
		keys = append(keys, outcomes[k].String())
	}
	sort.Strings(keys)
	require.Equal(t, []string{"errored", "panicked", "requeued", "succeeded", "terminal"}, keys)
}

// A zero Loop says to use NewLoop: Run returns at once (it used to kill
// the process from a goroutine the caller could not recover), Idle does
// not hang, Add and Stats do nothing.
func TestZeroLoopFailsWithAnErrorNotAPanicOrAHang(t *testing.T) {
	var l reconcile.Loop[string]
	require.ErrorContains(t, l.Run(context.Background()), "NewLoop")
	require.ErrorContains(t, l.Idle(context.Background()), "NewLoop")
	l.Add("k")
	require.Equal(t, reconcile.Stats{}, l.Stats())
}
