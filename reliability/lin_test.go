package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/reliability/workload"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var shared *embedded.Cluster

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	dir, err := os.MkdirTemp("", "reliability-")
	if err != nil {
		panic(err)
	}
	shared, err = embedded.Start(dir, 1, embedded.Options{})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	if err := stopKubePlane(); err != nil {
		fmt.Fprintln(os.Stderr, "kube control plane:", err)
		code = 1
	}
	shared.Close()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(append(ignoreEtcd(), kubetest.LingeringGoroutines()...)...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var prefixes atomic.Int64

func etcdStore(t testing.TB) (*etcdstore.Store, string) {
	t.Helper()
	cl, err := shared.Client()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	prefix := fmt.Sprintf("/rel-%d-%d/", os.Getpid(), prefixes.Add(1))
	s, err := etcdstore.New(cl, etcdstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return s, prefix
}

func boltStore(t testing.TB) *boltstore.Store {
	t.Helper()
	db, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := db.Store("executions")
	require.NoError(t, err)
	return s
}

// concurrently runs clients goroutine clients of body and records their
// operations.
func concurrently(t *testing.T, clients int, body func(client int, emit func(history.Op)) error) *history.Recorder {
	t.Helper()
	ops, err := workload.Concurrently(clients, body)
	require.NoError(t, err)
	var rec history.Recorder
	for _, op := range ops {
		rec.Add(op)
	}
	return &rec
}

func checkFire(t *testing.T, ops []history.Op, name string) {
	t.Helper()
	require.NoError(t, history.Check(history.FireModel(teraslice.Lifecycle()), ops, artifacts(), name, checkTimeout))
	changed := 0
	for _, op := range ops {
		if op.Outcome == history.Changed {
			changed++
		}
	}
	require.Greater(t, changed, len(ops)/20, "the history moved executions, not only refusals")
}

func TestFireIsLinearizableOnMemoryStore(t *testing.T) {
	store := storage.NewMemory()
	execs := ids("mem", 4)
	createAll(t, store, execs)
	rec := concurrently(t, 8, func(c int, emit func(history.Op)) error {
		return fireOps(context.Background(), store, c, execs, 150, 1, emit)
	})
	checkFire(t, rec.Ops(), "fire-memory")
}

func TestFireIsLinearizableOnBoltstore(t *testing.T) {
	store := boltStore(t)
	execs := ids("bolt", 4)
	createAll(t, store, execs)
	rec := concurrently(t, 6, func(c int, emit func(history.Op)) error {
		return fireOps(context.Background(), store, c, execs, 60, 2, emit)
	})
	checkFire(t, rec.Ops(), "fire-bolt")
}

// On etcd the clients are goroutines of this process and three other
// processes, all on one cluster.
func TestFireIsLinearizableOnEtcdAcrossProcesses(t *testing.T) {
	store, prefix := etcdStore(t)
	execs := ids("etcd", 3)
	createAll(t, store, execs)
	const processes, goroutines, ops = 3, 3, 60
	var all history.Recorder
	var wg sync.WaitGroup
	errs := make([]error, processes)
	for p := range processes {
		_, out := startChild(t, childSpec{Role: "fire-etcd", Etcd: shared.Endpoints(), Prefix: prefix, IDs: execs, Client: 100 + p, Ops: ops, Seed: 3})
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for out.Scan() {
				var op history.Op
				if err := json.Unmarshal(out.Bytes(), &op); err != nil {
					errs[p] = err
					return
				}
				all.Add(op)
				n++
			}
			if n != ops {
				errs[p] = fmt.Errorf("process %d reported %d operations, want %d", p, n, ops)
			}
		}()
	}
	local := concurrently(t, goroutines, func(c int, emit func(history.Op)) error {
		return fireOps(context.Background(), store, c, execs, ops, 3, emit)
	})
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	checkFire(t, append(all.Ops(), local.Ops()...), "fire-etcd-processes")
}

func TestStoreCompareAndSwapIsLinearizable(t *testing.T) {
	etcd, _ := etcdStore(t)
	for name, store := range map[string]storage.Store{
		"memory": storage.NewMemory(), "bolt": boltStore(t), "etcd": etcd,
	} {
		t.Run(name, func(t *testing.T) {
			keys := ids("cas", 3)
			revs := map[string]uint64{}
			for _, id := range keys {
				rec, err := store.Create(context.Background(), storage.Record{ID: id, Status: "a"})
				require.NoError(t, err)
				revs[id] = rec.Revision
			}
			rec := concurrently(t, 6, func(c int, emit func(history.Op)) error {
				return casOps(context.Background(), store, c, keys, 40, 4, emit)
			})
			require.NoError(t, history.Check(history.CASModel(revs, "a"), rec.Ops(), artifacts(), "cas-"+name, checkTimeout))
		})
	}
}

// The checker is only worth something if it can fail: a store that
// acknowledges a compare-and-swap and then loses it, and a history with a
// move applied twice, must both be caught, with a visualization written.
func TestTheCheckerCatchesLostAndDoubledWrites(t *testing.T) {
	lossy := &losingStore{Memory: storage.NewMemory()}
	execs := ids("lossy", 2)
	createAll(t, lossy, execs)
	rec := concurrently(t, 4, func(c int, emit func(history.Op)) error {
		return fireOps(context.Background(), lossy, c, execs, 80, 5, emit)
	})
	dir := t.TempDir()
	err := history.Check(history.FireModel(teraslice.Lifecycle()), rec.Ops(), dir, "lossy", checkTimeout)
	require.ErrorContains(t, err, "Illegal")
	_, statErr := os.Stat(filepath.Join(dir, "lossy.html"))
	require.NoError(t, statErr, "the failing history is written as a visualization")

	doubled := []history.Op{
		{Client: 0, ID: "x", Kind: "fire", To: "scheduling", Outcome: history.Changed, From: "pending", Call: 1, Return: 2},
		{Client: 1, ID: "x", Kind: "fire", To: "scheduling", Outcome: history.Changed, From: "pending", Call: 3, Return: 4},
	}
	require.Error(t, history.Check(history.FireModel(teraslice.Lifecycle()), doubled, dir, "doubled", checkTimeout))
	concurrent := []history.Op{doubled[0], doubled[1]}
	concurrent[1].Call, concurrent[1].Return = 1, 2
	require.Error(t, history.Check(history.FireModel(teraslice.Lifecycle()), concurrent, dir, "concurrent", checkTimeout),
		"even overlapping, one move cannot be taken twice from the same state")
}

// losingStore acknowledges every fifth compare-and-swap without keeping it.
type losingStore struct {
	*storage.Memory
	n atomic.Int64
}

func (s *losingStore) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if s.n.Add(1)%5 == 0 {
		cur, err := s.Get(ctx, id)
		if err != nil {
			return storage.Record{}, err
		}
		if cur.Revision != expect {
			return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
		}
		next.Revision = expect + 1_000_000 // acknowledged, never stored
		return next, nil
	}
	return s.Memory.CompareAndSwap(ctx, id, expect, next)
}

// ignoreEtcd ignores the goroutines an embedded etcd leaves idling.
func ignoreEtcd() []goleak.Option {
	var opts []goleak.Option
	for _, fn := range embedded.LingeringGoroutines {
		opts = append(opts, goleak.IgnoreAnyFunction(fn))
	}
	return opts
}
