package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// world is the external world the controller manages (Kubernetes Jobs, child
// processes), played by the test: items with an identity and a state.
type world struct {
	mu    sync.Mutex
	items map[string]string // uuid → "running" or "paused"
}

func (w *world) list(context.Context) ([]reconcile.Item[string], error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var items []reconcile.Item[string]
	for _, k := range slices.Sorted(maps.Keys(w.items)) {
		items = append(items, reconcile.Item[string]{Key: k, Identity: reconcile.Identity{Labels: map[string]string{"uuid": k, "manager": "mgr-1"}}})
	}
	return items, nil
}

func (w *world) get(k string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.items[k]
	return s, ok
}

// controller is one life of a manager: an in-memory view that dies with
// it, and a durable store of the items it created.
type controller struct {
	table *transition.Table[string]
	store storage.Store
	world *world
	mu    sync.Mutex
	view  map[string]string
}

func simulatorTable(t require.TestingT) *transition.Table[string] {
	table, err := transition.New("idle").
		Allow("idle", "running", "paused", "gone").
		Allow("running", "paused", "gone").
		Allow("paused", "running", "gone").
		Terminal("gone").
		Build()
	require.NoError(t, err)
	return table
}

func (c *controller) Adopt(_ context.Context, it reconcile.Item[string]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.view[it.Identity.Labels["uuid"]] = "adopted"
	return nil
}

func (c *controller) known(ctx context.Context) ([]string, error) {
	// The store has no list; the manager's known set is the world it
	// last saw, kept in one record of metadata.
	rec, err := c.store.Get(ctx, "manager")
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(rec.Meta)), nil
}

func (c *controller) Reconcile(ctx context.Context, k string) (reconcile.Result, error) {
	exec, err := transition.NewPersisted(c.table, c.store, k, transition.PersistedOptions{})
	if err != nil {
		return reconcile.Result{}, err
	}
	want, exists := c.world.get(k)
	if !exists {
		if _, err := exec.Fire(ctx, "gone", "no longer in the world"); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return reconcile.Result{}, err
		}
		c.mu.Lock()
		delete(c.view, k)
		c.mu.Unlock()
		return reconcile.Result{}, c.remember(ctx, k, false)
	}
	if _, err := exec.Create(ctx, transition.To(want).Because("adopted")); err != nil && !errors.Is(err, storage.ErrExists) {
		return reconcile.Result{}, err
	}
	if _, err := exec.Fire(ctx, want, "world says so"); err != nil {
		return reconcile.Result{}, err
	}
	c.mu.Lock()
	c.view[k] = want
	c.mu.Unlock()
	return reconcile.Result{}, c.remember(ctx, k, true)
}

// remember keeps the set of items the manager knows in its store.
func (c *controller) remember(ctx context.Context, k string, known bool) error {
	mgr, err := transition.NewPersisted(c.table, c.store, "manager", transition.PersistedOptions{})
	if err != nil {
		return err
	}
	if _, err := mgr.Create(ctx, transition.To("running")); err != nil && !errors.Is(err, storage.ErrExists) {
		return err
	}
	_, _, err = mgr.Apply(ctx, func(cur string, _ storage.Record) (transition.Update[string], error) {
		u := transition.To(cur)
		if known {
			u.Meta = map[string]string{k: "1"}
		} else {
			u.Unset = []string{k}
		}
		return u, nil
	})
	return err
}

// TestLoopConvergesOnTheWorldAcrossControllerCrashes is a rapid
// state-machine test: items appear, vanish and change, sometimes while
// the controller is down; each restart is a new controller with an empty
// view. Whenever the controller is up and its loop is idle, its view and
// its store agree with the world: every item it has, with its state;
// every item that vanished, marked gone.
func TestLoopConvergesOnTheWorldAcrossControllerCrashes(t *testing.T) {
	table := simulatorTable(t)
	rapid.Check(t, func(rt *rapid.T) {
		w := &world{items: map[string]string{}}
		store := storage.NewMemory()
		everSeen := map[string]bool{}
		var (
			loop   *reconcile.Loop[string]
			ctrl   *controller
			cancel context.CancelFunc
			done   chan error
		)
		up := func() {
			ctrl = &controller{table: table, store: store, world: w, view: map[string]string{}}
			var err error
			loop, err = reconcile.NewLoop(reconcile.Options[string]{
				Reconciler: ctrl, Adopter: ctrl, World: w.list, Known: ctrl.known,
				Resync: -1, Workers: 3, Backoff: &reconcile.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond},
			})
			require.NoError(rt, err)
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.Background())
			done = make(chan error, 1)
			go func() { done <- loop.Run(ctx) }()
		}
		down := func() {
			cancel()
			require.NoError(rt, <-done)
			loop = nil
		}
		defer func() {
			if loop != nil {
				down()
			}
		}()
		up()
		next := 0
		change := func(f func()) {
			w.mu.Lock()
			f()
			w.mu.Unlock()
		}
		pick := func(rt *rapid.T) (string, bool) {
			w.mu.Lock()
			keys := slices.Sorted(maps.Keys(w.items))
			w.mu.Unlock()
			if len(keys) == 0 {
				return "", false
			}
			return rapid.SampledFrom(keys).Draw(rt, "key"), true
		}
		notify := func(k string) {
			if loop != nil { // events reach only a running controller
				loop.Add(k)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"appear": func(rt *rapid.T) {
				next++
				k := fmt.Sprintf("sim-%d", next)
				s := rapid.SampledFrom([]string{"running", "paused"}).Draw(rt, "state")
				change(func() { w.items[k] = s })
				everSeen[k] = true
				notify(k)
			},
			"vanish": func(rt *rapid.T) {
				if k, ok := pick(rt); ok {
					change(func() { delete(w.items, k) })
					notify(k)
				}
			},
			"flip": func(rt *rapid.T) {
				if k, ok := pick(rt); ok {
					change(func() {
						if w.items[k] == "running" {
							w.items[k] = "paused"
						} else {
							w.items[k] = "running"
						}
					})
					notify(k)
				}
			},
			"crash": func(rt *rapid.T) {
				if loop != nil {
					down()
				}
			},
			"start": func(rt *rapid.T) {
				if loop == nil {
					up()
				}
			},
			"": func(rt *rapid.T) {
				if loop == nil {
					return
				}
				ctx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancelWait()
				require.NoError(rt, loop.Idle(ctx))
				w.mu.Lock()
				want := maps.Clone(w.items)
				w.mu.Unlock()
				ctrl.mu.Lock()
				view := maps.Clone(ctrl.view)
				ctrl.mu.Unlock()
				require.Len(rt, view, len(want), "the view holds the world's items, no more")
				for k, s := range want {
					require.Equal(rt, s, view[k], "view of %s", k)
				}
				for k := range everSeen {
					rec, err := store.Get(ctx, k)
					if s, ok := want[k]; ok {
						require.NoError(rt, err)
						require.Equal(rt, s, rec.Status, "store of %s", k)
						continue
					}
					if err == nil {
						require.Equal(rt, "gone", rec.Status, "%s vanished", k)
					}
				}
			},
		})
	})
}
