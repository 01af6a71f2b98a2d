package reliability_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

const metaStep = "step"

// loadResult is what a load run measured.
type loadResult struct {
	transitions int
	elapsed     time.Duration
	latencies   []time.Duration // of each Fire
}

func (r loadResult) p(q float64) time.Duration {
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// runLoad drives executions × steps transitions through a recovery Loop:
// every reconcile of an execution moves it one step (running ⇄ paused,
// counting in its metadata) and asks to be called again until it has
// taken all its steps.
func runLoad(t testing.TB, store storage.Store, prefix string, executions, steps, workers int) loadResult {
	t.Helper()
	keys := make([]string, executions)
	for k := range keys {
		keys[k] = fmt.Sprintf("%s-%05d", prefix, k)
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, keys[k], transition.PersistedOptions{History: 4})
		require.NoError(t, err)
		_, err = p.Create(context.Background(), transition.To(state.Running).Set(metaStep, "0"))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var latencies []time.Duration
	handles := sync.Map{} // a controller keeps one handle per execution
	remaining := make(chan struct{}, executions)
	reconciler := reconcile.ReconcilerFunc[string](func(ctx context.Context, key string) (reconcile.Result, error) {
		h, _ := handles.LoadOrStore(key, nil)
		p, _ := h.(*transition.Persisted[state.Status])
		if p == nil {
			var err error
			if p, err = transition.NewPersisted(teraslice.Lifecycle(), store, key, transition.PersistedOptions{History: 4}); err != nil {
				return reconcile.Result{}, reconcile.TerminalError(err)
			}
			handles.Store(key, p)
		}
		done := false
		start := time.Now()
		_, _, err := p.Apply(ctx, func(cur state.Status, rec storage.Record) (transition.Update[state.Status], error) {
			n, _ := strconv.Atoi(rec.Meta[metaStep])
			if n >= steps {
				done = true
				return transition.To(cur), nil
			}
			to := state.Paused
			if cur == state.Paused {
				to = state.Running
			}
			done = n+1 >= steps
			return transition.To(to).Because("load").Set(metaStep, strconv.Itoa(n+1)), nil
		})
		if err != nil {
			return reconcile.Result{}, err
		}
		mu.Lock()
		latencies = append(latencies, time.Since(start))
		mu.Unlock()
		if done {
			remaining <- struct{}{}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
	})
	loop, err := reconcile.NewLoop(reconcile.Options[string]{Reconciler: reconciler, Workers: workers, Resync: -1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	loop.Add(keys...)
	for range executions {
		select {
		case <-remaining:
		case <-time.After(10 * time.Minute):
			t.Fatalf("load did not finish: %+v", loop.Stats())
		}
	}
	elapsed := time.Since(begin)
	cancel()
	require.NoError(t, <-done)
	require.Zero(t, loop.Stats().Errors, "no reconcile failed")

	for _, key := range keys {
		rec, err := store.Get(context.Background(), key)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(steps), rec.Meta[metaStep], "%s took every step, once", key)
		want := "running"
		if steps%2 == 1 {
			want = "paused"
		}
		require.Equal(t, want, rec.Status, key)
		requireLegalTrail(t, rec)
	}
	return loadResult{transitions: executions * steps, elapsed: elapsed, latencies: latencies}
}

// TestLoadThroughTheLoopTakesEveryStepExactlyOnce is the load run at a
// size CI affords; BenchmarkLoad is the full one.
func TestLoadThroughTheLoopTakesEveryStepExactlyOnce(t *testing.T) {
	etcd, _ := etcdStore(t)
	kube, _ := kubeStore(t)
	resource, _ := kubeResourceStore(t)
	for name, store := range map[string]storage.Store{"bolt": boltStore(t), "etcd": etcd, "kube": kube, "kuberesource": resource} {
		t.Run(name, func(t *testing.T) {
			r := runLoad(t, store, "load-"+name, 100, 20, 16)
			t.Logf("%d transitions in %v: %.0f/s, p99 %v", r.transitions, r.elapsed, float64(r.transitions)/r.elapsed.Seconds(), r.p(0.99))
		})
	}
}

// BenchmarkLoad drives executions × transitions through the Loop on bbolt
// and etcd and reports throughput and latency percentiles. The size is
// EXECFSM_LOAD (default 10000x100, the design's figure):
//
//	EXECFSM_LOAD=10000x100 go test ./reliability -run '^$' -bench Load -benchtime 1x
func BenchmarkLoad(b *testing.B) {
	benchmarkLoad(b, "EXECFSM_LOAD", 10000, 100, "bolt", "etcd")
}

// BenchmarkLoadKube drives executions × transitions through the Loop on
// the kube store (of ConfigMaps, then over a custom resource:
// kuberesource) and, for comparison, the same load on etcd, and reports
// what BenchmarkLoad does. The size is EXECFSM_LOAD_KUBE (default
// 1000x20: every transition is a write through the API server to its
// etcd, so the design's 10000x100 would take the better part of an
// hour):
//
//	EXECFSM_LOAD_KUBE=1000x20 go test ./reliability -run '^$' -bench LoadKube -benchtime 1x
func BenchmarkLoadKube(b *testing.B) {
	benchmarkLoad(b, "EXECFSM_LOAD_KUBE", 1000, 20, "etcd", "kube", "kuberesource")
}

// benchmarkLoad runs the load on each backend in turn, at the size the
// environment variable env gives (EXECUTIONSxSTEPS) or the default.
func benchmarkLoad(b *testing.B, env string, executions, steps int, backends ...string) {
	if v := os.Getenv(env); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &executions, &steps); err != nil {
			b.Fatalf("%s=%q: want EXECUTIONSxSTEPS: %v", env, v, err)
		}
	}
	for _, backend := range backends {
		b.Run(fmt.Sprintf("%s/%dx%d", backend, executions, steps), func(b *testing.B) {
			for i := range b.N {
				var store storage.Store
				switch backend {
				case "bolt":
					store = boltStore(b)
				case "etcd":
					store, _ = etcdStore(b)
				case "kube":
					store, _ = kubeStore(b)
				case "kuberesource":
					store, _ = kubeResourceStore(b)
				}
				r := runLoad(b, store, fmt.Sprintf("bench-%d", i), executions, steps, 32)
				b.ReportMetric(float64(r.transitions)/r.elapsed.Seconds(), "transitions/s")
				b.ReportMetric(float64(r.p(0.5).Microseconds()), "p50-µs")
				b.ReportMetric(float64(r.p(0.99).Microseconds()), "p99-µs")
			}
		})
	}
}
