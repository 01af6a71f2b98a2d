package recoverytest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// guarded is a table whose finish is held by a guard until the test lets
// it go: a write caught between its checks and its compare-and-swap.
func guarded(t *testing.T, entered chan<- struct{}, proceed <-chan struct{}) *transition.Table[string] {
	t.Helper()
	table, err := transition.New("queued").
		Allow("queued", "running").
		Allow("running", "done").
		Terminal("done").
		Guard("running", "done", func(ctx context.Context, _ transition.Change[string]) error {
			select {
			case entered <- struct{}{}:
			default: // entered again (a retry): the test is already told
			}
			select {
			case <-proceed:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}).
		Build()
	require.NoError(t, err)
	return table
}

// A Fire waits in a guard while the holder's ownership ends, with no
// successor; when the guard lets it go, nothing lands.
func writeHeldInGuardWhileOwnershipEnds(t *testing.T, store storage.Store) {
	entered, proceed := make(chan struct{}, 1), make(chan struct{})
	table := guarded(t, entered, proceed)
	m, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions[string]{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = m.Create(bounded(t), transition.Update[string]{To: "running", Reason: "submitted"})
	require.NoError(t, err)
	exec, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions[string]{Actor: "pod-a"})
	require.NoError(t, err)
	_, _, err = exec.Acquire(bounded(t), lease("pod-a"), nil)
	require.NoError(t, err)

	fired := make(chan error, 1)
	go func() {
		_, err := exec.Fire(bounded(t), "done", "the work finished")
		fired <- err
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached its guard")
	}
	require.NoError(t, exec.Ownership().Release(bounded(t)))
	before := get(t, store, "ex-1")
	close(proceed)
	select {
	case err := <-fired:
		require.ErrorIs(t, err, storage.ErrFenced, "a write whose ownership ended under it")
	case <-time.After(20 * time.Second):
		t.Fatal("the write did not return")
	}
	after := get(t, store, "ex-1")
	require.Equal(t, before.Revision, after.Revision, "nothing landed after Lost")
	require.Equal(t, "running", after.Status)
}

// pod-a starts through a handle, relocates; pod-b takes over. The very
// handle pod-a started with cannot write any more: there is no other.
func handleThatStartedIsFenced(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Initializing)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	_, err = podA.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)
	a, err := recovery.ApplyTerminate(bounded(t), state.Roles(), podA, policy(), nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	_, podB, err := startup(t, store, "ex-1", "pod-b", lease(""))
	require.NoError(t, err)
	before := get(t, store, "ex-1")
	for name, write := range map[string]func() error{
		"Fire":  func() error { _, err := podA.Fire(bounded(t), state.Failed, "late"); return err },
		"Apply": func() error { return probe(bounded(t), podA, "late") },
	} {
		require.ErrorIs(t, write(), storage.ErrFenced, name)
	}
	after := get(t, store, "ex-1")
	require.Equal(t, before.Revision, after.Revision)
	require.Equal(t, podB.Claim(), after.Claim())
}

// A handle whose take-over was refused, or that has not taken the record
// over yet, is a controller's: it never writes as an outside authority.
func handleUsedToTakeOverIsNoAuthority(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Running)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	_, podB, err := startup(t, store, "ex-1", "pod-b", lease(""))
	require.ErrorIs(t, err, storage.ErrHeld)
	require.False(t, podB.Authority())
	before := get(t, store, "ex-1")
	_, err = podB.Fire(bounded(t), state.Stopping, "as if it were the master")
	require.ErrorIs(t, err, storage.ErrFenced, "a refused controller")
	require.Equal(t, before.Revision, get(t, store, "ex-1").Revision)
	require.NoError(t, probe(bounded(t), podA, "the holder still writes"))
}

// A controller whose ownership has ended decides Leave on SIGTERM and at
// the end of its work from its own handle, with the store out of reach.
func terminateAndFinishAfterLossLeave(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Running)
	s := &interposed{Store: store}
	_, exec, err := startup(t, s, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	require.NoError(t, exec.Ownership().Release(bounded(t))) // lost
	s.cut.Store(true)
	calls := s.calls.Load()
	a, err := recovery.ApplyTerminate(bounded(t), state.Roles(), exec, policy(), nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	end, err := recovery.ApplyFinish(bounded(t), state.Roles(), exec, recovery.Ending{Finished: true}, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Equal(t, calls, s.calls.Load(), "neither asked the store")

	// A controller that never took the execution over leaves too.
	never := controller(t, s, "ex-1", "pod-b")
	_, _, _ = never.Acquire(bounded(t), lease("pod-b"), nil) // out of reach: a controller's handle now
	a, err = recovery.ApplyTerminate(bounded(t), state.Roles(), never, policy(), nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
}

// A live controller loses its ownership (a store outage outlasted its
// lease; here it is released, which looks the same to everyone else) and
// nobody takes the execution over: it takes it back at a new epoch,
// counting no restart, as often as that happens. Another process under
// the same name (a container restarted in place after an OOM kill) is a
// crash, and counts.
func holderTakesBackCountingNothing(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Initializing)
	exec := controller(t, store, "ex-1", "pod-a")
	_, err := start(t, exec, "pod-a", lease(""))
	require.NoError(t, err)
	_, err = exec.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)
	for outage := range 5 { // more than the restart budget
		require.NoError(t, exec.Ownership().Release(bounded(t)))
		require.ErrorIs(t, probe(bounded(t), exec, "during the outage"), storage.ErrFenced)
		before := get(t, store, "ex-1")
		v, err := start(t, exec, "pod-a", lease(""))
		require.NoError(t, err, "outage %d", outage)
		require.Equal(t, recovery.DecisionResume, v.Decision, "outage %d", outage)
		require.Equal(t, state.Running, v.To)
		require.Zero(t, v.Restarts)
		rec := get(t, store, "ex-1")
		require.Empty(t, rec.Meta[recovery.MetaRestarts], "outage %d counted a restart", outage)
		require.Equal(t, before.Epoch+1, rec.Epoch)
		require.Equal(t, "running", rec.Status)
		require.NoError(t, probe(bounded(t), exec, "drives it again"))
	}

	require.NoError(t, exec.Ownership().Release(bounded(t)))
	v, again, err := startup(t, store, "ex-1", "pod-a", lease("")) // the same name, another process
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, 1, v.Restarts, "a new process under the same name is a crash")
	require.NotEmpty(t, get(t, store, "ex-1").Meta[recovery.MetaRestarts])
	require.NoError(t, probe(bounded(t), again, "drives it"))
}

// A controller dies running and nobody takes the execution over: the
// reaper fails it once it has gone unheld for its Abandoned time, with
// the reason. A held execution is never ended, however long it runs.
func deadHoldersExecutionIsEnded(t *testing.T, store storage.Store) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	reaper := &recovery.Reaper[state.Status]{Roles: state.Roles(), Store: store, Clock: clock, Abandoned: 10 * time.Minute}

	master(t, store, "alive", state.Running)
	_, alive, err := startup(t, store, "alive", "pod-a", lease(""))
	require.NoError(t, err)
	master(t, store, "dead", state.Running)
	_, dead, err := startup(t, store, "dead", "pod-b", lease(""))
	require.NoError(t, err)
	crash(t, dead)

	res, err := reaper.Reconcile(bounded(t), "dead")
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, res.RequeueAfter, "the deadline counts from when the reaper saw it unheld")
	clock.Advance(9 * time.Minute)
	for _, id := range []string{"dead", "alive"} {
		_, err = reaper.Reconcile(bounded(t), id)
		require.NoError(t, err)
		require.Equal(t, "running", get(t, store, id).Status, "%s before the deadline", id)
	}
	clock.Advance(time.Minute)
	_, err = reaper.Reconcile(bounded(t), "dead")
	require.NoError(t, err)
	rec := get(t, store, "dead")
	require.Equal(t, "failed", rec.Status)
	require.True(t, strings.HasPrefix(rec.Reason, "abandoned:"), rec.Reason)
	require.Contains(t, rec.Reason, "pod-b")
	require.Equal(t, rec.Reason, rec.Meta[recovery.MetaFailure])

	clock.Advance(time.Hour)
	_, err = reaper.Reconcile(bounded(t), "alive")
	require.NoError(t, err)
	require.Equal(t, "running", get(t, store, "alive").Status, "a held execution runs on")
	require.NoError(t, probe(bounded(t), alive, "its holder drives it"))
}
