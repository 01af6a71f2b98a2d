package main

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// comingUp plays a simulator that comes up (takes its lock, writes its
// label and its state) right after the manager's first look at the world.
type comingUp struct {
	reads int
	l     label
}

func (w *comingUp) up() bool { w.reads++; return w.reads > 1 }

func (w *comingUp) labelled(string) bool { return w.up() }

func (w *comingUp) state(string) (string, bool) {
	if w.up() {
		return "running", true
	}
	return "", false
}

func (w *comingUp) labels(string) ([]label, error) {
	if w.up() {
		return []label{w.l}, nil
	}
	return nil, nil
}

// newTestManager returns a manager of world whose store holds simulator
// l's record, created in state at.
func newTestManager(t *testing.T, ctx context.Context, w worldView, l label, at SimState) (*manager, *storage.Memory) {
	t.Helper()
	store := storage.NewMemory()
	m, err := newManager(managerConfig{UUID: "mgr-1-manager"}, w, store)
	require.NoError(t, err)
	exec, err := m.exec(l.UUID)
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.Update[SimState]{To: at, Meta: identityMeta(l)})
	require.NoError(t, err)
	return m, store
}

// A simulator that comes up while the manager reconciles its just-created
// record is never written off as gone: its label and its liveness are read
// in an order where a race can only delay the verdict.
func TestReconcileNeverWritesOffASimulatorComingUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := label{UUID: "sim-1", Manager: "mgr-1", Name: "dpsim-grid"}
	m, store := newTestManager(t, ctx, &comingUp{l: l}, l, Starting)

	res, err := m.Reconcile(ctx, l.UUID)
	require.NoError(t, err)
	rec, err := store.Get(ctx, l.UUID)
	require.NoError(t, err)
	require.NotEqual(t, "gone", rec.Status, "a simulator coming up was written off")
	if rec.Status == "starting" {
		require.Positive(t, res.RequeueAfter, "not up yet: look again soon")
	}
}

// A record the world contradicts with no legal way back (gone, while the
// simulator runs) is an error the loop reports, not a silent success.
func TestReconcileReportsARecordThatCannotFollowTheWorld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := label{UUID: "sim-1", Manager: "mgr-1", Name: "dpsim-grid"}
	m, _ := newTestManager(t, ctx, &comingUp{l: l, reads: 1}, l, Gone) // up from the start
	_, err := m.Reconcile(ctx, l.UUID)
	require.ErrorContains(t, err, "the record says gone, the world running")
	require.Empty(t, m.view, "the view does not claim what the store cannot hold")
}

// Creating a simulator takes it over while the loop, having listed its
// record, may be reconciling it: the manager takes it over once, and
// every caller gets that one handle. (Two take-overs are two owners to
// the store: the second waited for the first's lease until it gave up,
// and the manager exited before it was ready.)
func TestConcurrentTakeOversOfOneSimulatorShareOneHandle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := label{UUID: "sim-1", Manager: "mgr-1", Name: "dpsim-grid"}
	m, _ := newTestManager(t, ctx, &comingUp{l: l}, l, Idle)
	const callers = 8
	type outcome struct {
		h   *transition.Persisted[SimState]
		err error
	}
	outcomes := make(chan outcome, callers)
	start := make(chan struct{})
	for range callers {
		go func() {
			<-start
			h, err := m.own(ctx, l.UUID)
			outcomes <- outcome{h, err}
		}()
	}
	close(start)
	var first *transition.Persisted[SimState]
	for k := range callers {
		select {
		case o := <-outcomes:
			require.NoError(t, o.err)
			if first == nil {
				first = o.h
			}
			require.Same(t, first, o.h, "one handle for the simulator")
		case <-time.After(10 * time.Second):
			t.Fatalf("take-over %d of %d: no outcome within 10s", k+1, callers)
		}
	}
}
