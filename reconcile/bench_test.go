package reconcile_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
)

var noop = reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) { return reconcile.Result{}, nil })

func keysUpTo(n int) []int {
	keys := make([]int, n)
	for k := range keys {
		keys[k] = k
	}
	return keys
}

func startBench(b *testing.B, opt reconcile.Options[int]) (*reconcile.Loop[int], func()) {
	l, err := reconcile.NewLoop(opt)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return l, func() {
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

func waitIdle(b *testing.B, l *reconcile.Loop[int]) {
	if err := l.Idle(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoopResync reconciles every key once through the loop, as a
// resync does, with a no-op reconciler, and reports the ratio to a bare
// for-loop calling Reconcile directly on the same keys (target ≤ 2).
func BenchmarkLoopResync(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			keys := keysUpTo(n)
			ctx := context.Background()
			bareStart := time.Now()
			const bareRounds = 20
			for range bareRounds {
				for _, k := range keys {
					if _, err := noop.Reconcile(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
			}
			bare := time.Since(bareStart) / bareRounds
			l, stop := startBench(b, reconcile.Options[int]{Reconciler: noop, Resync: -1})
			defer stop()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l.Add(keys...)
				waitIdle(b, l)
			}
			b.StopTimer()
			perPass := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perPass.Nanoseconds())/float64(n), "ns/key")
			b.ReportMetric(float64(perPass)/float64(max(bare, 1)), "x-bare")
		})
	}
}

// BenchmarkLoopEvent is one event among n tracked keys: each key waits
// for a RequeueAfter, so the loop holds all n while the event is handled.
// The cost must not grow with n.
func BenchmarkLoopEvent(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tracked=%d", n), func(b *testing.B) {
			requeue := reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) {
				return reconcile.Result{RequeueAfter: time.Hour}, nil
			})
			done := make(chan struct{}, 1)
			hot := n + 1 // never among the tracked keys
			obs := eventObserver{key: hot, done: done}
			l, stop := startBench(b, reconcile.Options[int]{Reconciler: requeue, Resync: -1, ReconcileObserver: obs})
			defer stop()
			l.Add(keysUpTo(n)...)
			for l.Stats().Reconciles < uint64(n) {
				time.Sleep(time.Millisecond)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l.Add(hot)
				<-done
			}
		})
	}
}

type eventObserver struct {
	key  int
	done chan struct{}
}

func (o eventObserver) ObserveReconcile(ev reconcile.ReconcileEvent[int]) {
	if ev.Key == o.key {
		o.done <- struct{}{}
	}
}

// BenchmarkLoopMemoryPerTrackedKey reports the bytes the loop holds per
// key waiting for a requeue (its delayed set and heap).
func BenchmarkLoopMemoryPerTrackedKey(b *testing.B) {
	const n = 100_000
	requeue := reconcile.ReconcilerFunc[int](func(context.Context, int) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Hour}, nil
	})
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, stop := startBench(b, reconcile.Options[int]{Reconciler: requeue, Resync: -1})
		l.Add(keysUpTo(n)...)
		for l.Stats().Reconciles < n {
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "B/key")
		stop()
	}
}
