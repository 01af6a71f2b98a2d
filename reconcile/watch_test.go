package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/transition"
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
	keys, err := reconcile.StoreEvents(ctx, w, reconcile.StoreEventsOptions{OnError: func(err error) { errs <- err }})
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
	_, err := reconcile.StoreEvents(context.Background(), w, reconcile.StoreEventsOptions{})
	require.ErrorContains(t, err, "connection refused")
	_, err = reconcile.StoreEvents(context.Background(), nil, reconcile.StoreEventsOptions{})
	require.Error(t, err)
}

// StoreEvents plugs into a Loop as its Events.
func TestStoreEventsDriveALoop(t *testing.T) {
	store := storage.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err := reconcile.StoreEvents(ctx, store, reconcile.StoreEventsOptions{})
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

// With SkipWritesBy, the controller's own writes do not come back as
// work: a reconcile that writes and asks to be called again in a minute
// is called again in a minute, not at once. Writes by anyone else still
// come through, and so does a write of its own that another followed.
func TestStoreEventsLeaveOutTheControllersOwnWrites(t *testing.T) {
	store := storage.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err := reconcile.StoreEvents(ctx, store, reconcile.StoreEventsOptions{SkipWritesBy: "ctl"})
	require.NoError(t, err)
	table, err := transition.New("idle").Allow("idle", "busy").Allow("busy", "idle", "done").Terminal("done").Build()
	require.NoError(t, err)
	handle := func(id, actor string) *transition.Persisted[string] {
		p, err := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: actor})
		require.NoError(t, err)
		return p
	}
	master := handle("ex-1", "master")
	_, err = master.Create(ctx, transition.To("idle"))
	require.NoError(t, err)
	require.Equal(t, "ex-1", testwait.Recv(t, keys, "the master's creation"))

	ctl := handle("ex-1", "ctl")
	_, err = ctl.Fire(ctx, "busy", "working")
	require.NoError(t, err)
	_, _, err = ctl.Apply(ctx, func(cur string, _ storage.Record) (transition.Update[string], error) {
		return transition.Update[string]{To: cur, Meta: map[string]string{"progress": "50%"}}, nil
	})
	require.NoError(t, err)
	_, err = master.Fire(ctx, "idle", "paused by the master")
	require.NoError(t, err)
	require.Equal(t, "ex-1", testwait.Recv(t, keys, "the master's write, after the controller's two"))

	// The controller's next write comes back no more than the first,
	// however soon the master's follows it.
	_, err = ctl.Fire(ctx, "busy", "working again")
	require.NoError(t, err)
	_, err = master.Fire(ctx, "done", "stopped by the master")
	require.NoError(t, err)
	require.Equal(t, "ex-1", testwait.Recv(t, keys, "the master's second write"))
	other := handle("ex-2", "master") // a barrier: events come in revision order
	_, err = other.Create(ctx, transition.To("idle"))
	require.NoError(t, err)
	require.Equal(t, "ex-2", testwait.Recv(t, keys, "the barrier"))

	_, err = reconcile.StoreEvents(ctx, watchOnly{store}, reconcile.StoreEventsOptions{SkipWritesBy: "ctl"})
	require.ErrorContains(t, err, "storage.Store", "skipping needs to read the records")
}

// watchOnly is a Watcher that is nothing else.
type watchOnly struct{ w storage.Watcher }

func (o watchOnly) Watch(ctx context.Context, from uint64) (<-chan storage.WatchEvent, error) {
	return o.w.Watch(ctx, from)
}

// The user's case: a reconciler that writes its execution and asks to be
// called again in a minute is called again in a minute, not at once by
// its own write.
func TestALoopOnItsOwnWritesHonoursRequeueAfter(t *testing.T) {
	store := storage.NewMemory()
	clock := reconciletest.NewClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table, err := transition.New("idle").Allow("idle", "busy").Allow("busy", "idle", "done").Terminal("done").Build()
	require.NoError(t, err)
	master, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(ctx, transition.To("idle"))
	require.NoError(t, err)
	keys, err := reconcile.StoreEvents(ctx, store, reconcile.StoreEventsOptions{From: 1, SkipWritesBy: "ctl"})
	require.NoError(t, err)
	ctl, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Actor: "ctl"})
	require.NoError(t, err)
	var seen calls[string]
	l := newLoop(t, reconcile.Options[string]{
		Clock: clock, Resync: -1, Events: keys,
		Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, id string) (reconcile.Result, error) {
			seen.add(id)
			if id != "ex-1" {
				return reconcile.Result{}, nil
			}
			_, _, err := ctl.Apply(ctx, func(cur string, _ storage.Record) (transition.Update[string], error) {
				return transition.Update[string]{To: cur, Meta: map[string]string{"step": fmt.Sprint(len(seen.get()))}}, nil
			})
			return reconcile.Result{RequeueAfter: time.Minute}, err
		}),
	})
	reconciletest.Start(t, l)
	l.Add("ex-1")
	require.Eventually(t, func() bool { return len(seen.get()) == 1 }, 10*time.Second, time.Millisecond)
	// A barrier: another record's write, whose event comes after the
	// controller's own; one worker reconciles in the order keys come.
	_, err = store.Create(ctx, storagetest.Sample("barrier"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return slices.Contains(seen.get(), "barrier") }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"ex-1", "barrier"}, seen.get(), "ex-1 was not called again for its own write")
	require.Equal(t, time.Minute, clock.AdvanceToEarliest(t))
	require.Eventually(t, func() bool { return len(seen.get()) == 3 }, 10*time.Second, time.Millisecond, "called again after RequeueAfter")
	require.Equal(t, "ex-1", seen.get()[2])
}
