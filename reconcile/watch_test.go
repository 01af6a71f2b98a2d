package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// breakingWatcher is a store whose watch connection the test breaks: the
// watch ends while the watcher's context is still live, as an etcd or
// Kubernetes watch does when its connection drops. While down, Watch
// fails.
type breakingWatcher struct {
	*storage.Memory

	mu      sync.Mutex
	down    bool
	current context.CancelFunc
	from    []uint64 // the revision of every Watch call
}

func (w *breakingWatcher) Watch(ctx context.Context, from uint64) (<-chan storage.WatchEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from = append(w.from, from)
	if w.down {
		return nil, errors.New("connection refused")
	}
	inner, cancel := context.WithCancel(ctx)
	w.current = cancel
	return w.Memory.Watch(inner, from)
}

func (w *breakingWatcher) breakConnection(down bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down = down
	w.current()
}

func (w *breakingWatcher) setDown(down bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down = down
}

func TestStoreEventsWatchesAgainFromTheLastRevisionWhenTheWatchEnds(t *testing.T) {
	w := &breakingWatcher{Memory: storage.NewMemory()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 16)
	keys, err := reconcile.StoreEvents(ctx, w, 0, func(err error) { errs <- err })
	require.NoError(t, err)

	a, err := w.Create(ctx, storagetest.Sample("ex-a"))
	require.NoError(t, err)
	require.Equal(t, "ex-a", testwait.Recv(t, keys, "the first write"))

	w.breakConnection(true) // the watch ends, and watching again fails for a while
	require.ErrorContains(t, testwait.Recv(t, errs, "the failed re-watch"), "connection refused")
	_, err = w.Create(ctx, storagetest.Sample("ex-b"))
	require.NoError(t, err)
	w.setDown(false)
	require.Equal(t, "ex-b", testwait.Recv(t, keys, "the write made while the watch was down"))

	w.mu.Lock()
	from := w.from
	w.mu.Unlock()
	require.Equal(t, uint64(0), from[0])
	require.Equal(t, a.Revision, from[len(from)-1], "watched again from the last revision delivered, not from the start")

	cancel()
	testwait.Closed(t, keys, "the keys channel after ctx ended")
}

func TestStoreEventsReturnsTheFirstWatchError(t *testing.T) {
	w := &breakingWatcher{Memory: storage.NewMemory(), down: true}
	_, err := reconcile.StoreEvents(context.Background(), w, 0, nil)
	require.ErrorContains(t, err, "connection refused")
	_, err = reconcile.StoreEvents(context.Background(), nil, 0, nil)
	require.Error(t, err)
}

// StoreEvents plugs into a Loop as its Events.
func TestStoreEventsDriveALoop(t *testing.T) {
	store := storage.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err := reconcile.StoreEvents(ctx, store, 0, nil)
	require.NoError(t, err)
	seen := make(chan string, 8)
	l := newLoop(t, reconcile.Options[string]{
		Events: keys,
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, id string) (reconcile.Result, error) {
			seen <- id
			return reconcile.Result{}, nil
		}),
	})
	reconciletest.Start(t, l)
	_, err = store.Create(ctx, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	require.Equal(t, "ex-1", testwait.Recv(t, seen, "the reconcile of the written record"))
}
