package recoverytest

import (
	"context"
	"errors"
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
		Guard("running", "done", func(ctx context.Context, _ transition.Change[string], _ transition.View) error {
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

// An Outage ends a live holder's ownership the way a store loses it:
// released (every store), a lease revoked in etcd, etcd down or the
// holder cut off from the API server for longer than its lease.
type Outage struct {
	// TTL is the holder's lease's; zero is 30 seconds.
	TTL time.Duration
	// End ends own's ownership while its holder lives. It returns once
	// the store has ended it (the holder need not know yet) and can be
	// reached again.
	End func(t *testing.T, own storage.Ownership)
	// Times is how many outages TakeBackAfterOutages plays in a row;
	// zero is four, more than teraslice.Failovers allows.
	Times int
}

func (o Outage) lease(holder string) storage.Lease {
	l := lease(holder)
	if o.TTL > 0 {
		l.TTL = o.TTL
	}
	return l
}

// released is the outage every store has: the holder's ownership
// released, which looks to everyone else as if it expired.
var released = Outage{End: func(t *testing.T, own storage.Ownership) { require.NoError(t, own.Release(bounded(t))) }}

// WriteHeldInAGuard checks on store that a write caught in a guard while
// its holder's ownership ends (outage.End), with no successor, lands
// nothing when the guard lets it go: it fails with ErrFenced and the
// record is as it was. RunOwnership runs it with the ownership released;
// a store's tests run it with the ways the store itself loses one.
func WriteHeldInAGuard(t *testing.T, store storage.Store, outage Outage) {
	t.Helper()
	entered, proceed := make(chan struct{}, 1), make(chan struct{})
	table := guarded(t, entered, proceed)
	m, err := transition.NewPersisted(table, store, "ex-guarded", transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = m.Create(bounded(t), transition.To("running").Because("submitted"))
	require.NoError(t, err)
	exec, err := transition.NewPersisted(table, store, "ex-guarded", transition.PersistedOptions{Actor: "pod-a"})
	require.NoError(t, err)
	_, _, err = exec.Acquire(bounded(t), outage.lease("pod-a"), nil)
	require.NoError(t, err)
	own := exec.Ownership()
	t.Cleanup(func() { _ = own.Release(context.Background()) })

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
	outage.End(t, own)
	before := get(t, store, "ex-guarded")
	close(proceed)
	select {
	case err := <-fired:
		require.ErrorIs(t, err, storage.ErrFenced, "a write whose ownership ended under it")
	case <-time.After(20 * time.Second):
		t.Fatal("the write did not return")
	}
	after := get(t, store, "ex-guarded")
	require.Equal(t, before.Revision, after.Revision, "nothing landed after the ownership ended")
	require.Equal(t, "running", after.Status)
}

func writeHeldInGuardWhileOwnershipEnds(t *testing.T, store storage.Store) {
	WriteHeldInAGuard(t, store, released)
}

// pod-a starts through a handle, relocates; pod-b takes over. The very
// handle pod-a started with cannot write any more: there is no other.
func handleThatStartedIsFenced(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Initializing)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	_, err = podA.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)
	a, err := decide(t).Terminate(bounded(t), podA, nil)
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
	a, err := decide(t).Terminate(bounded(t), exec, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	end, err := decide(t).End(bounded(t), exec, recovery.Ending{Finished: true}, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Equal(t, calls, s.calls.Load(), "neither asked the store")

	// A controller that never took the execution over leaves too.
	never := controller(t, s, "ex-1", "pod-b")
	_, _, _ = never.Acquire(bounded(t), lease("pod-b"), nil) // out of reach: a controller's handle now
	a, err = decide(t).Terminate(bounded(t), never, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
}

// TakeBackAfterOutages checks on store that a live controller whose
// ownership outage.End ends, and that nobody takes over meanwhile, takes
// its execution back at a new epoch without counting a restart, outage
// after outage, past the failover allowance, and drives it again each time.
// It returns the controller's handle, owning the execution "ex-1".
func TakeBackAfterOutages(t *testing.T, store storage.Store, outage Outage) *transition.Persisted[state.Status] {
	t.Helper()
	times := outage.Times
	if times == 0 {
		times = 4
	}
	l := outage.lease("pod-a")
	l.Wait = true // an ownership etcd still holds for a while after the holder gave it up
	master(t, store, "ex-1", state.Initializing)
	exec := controller(t, store, "ex-1", "pod-a")
	_, err := start(t, exec, "pod-a", l)
	require.NoError(t, err)
	_, err = exec.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)
	for k := range times {
		own := exec.Ownership()
		outage.End(t, own)
		select {
		case <-own.Lost():
		case <-time.After(time.Minute):
			t.Fatalf("outage %d: the controller never learned it lost its ownership", k)
		}
		require.ErrorIs(t, probe(bounded(t), exec, "during the outage"), storage.ErrFenced)
		before := get(t, store, "ex-1")
		v, err := start(t, exec, "pod-a", l)
		require.NoError(t, err, "outage %d", k)
		require.Equal(t, recovery.DecisionResume, v.Decision, "outage %d", k)
		require.Equal(t, state.Running, v.To)
		require.Zero(t, v.Failovers)
		rec := get(t, store, "ex-1")
		require.Empty(t, rec.Meta[recovery.MetaFailovers], "outage %d counted a restart", k)
		require.Greater(t, rec.Epoch, before.Epoch, "outage %d: taken back at a new epoch", k)
		require.Equal(t, "running", rec.Status)
		require.NoError(t, probe(bounded(t), exec, "drives it again"))
	}
	return exec
}

// A live controller loses its ownership (here: released, which looks the
// same to everyone else as a lease an outage ended) and nobody takes the
// execution over: it takes it back, counting nothing, as often as that
// happens. Another process under the same name (a container restarted in
// place after an OOM kill) is a crash, and counts.
func holderTakesBackCountingNothing(t *testing.T, store storage.Store) {
	exec := TakeBackAfterOutages(t, store, released)
	require.NoError(t, exec.Ownership().Release(bounded(t)))
	v, again, err := startup(t, store, "ex-1", "pod-a", lease("")) // the same name, another process
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, 1, v.Failovers, "a new process under the same name is a crash")
	require.NotEmpty(t, get(t, store, "ex-1").Meta[recovery.MetaFailovers])
	require.NoError(t, probe(bounded(t), again, "drives it"))
}

// A controller dies running and nobody takes the execution over: the
// reaper fails it once it has gone unheld for its Abandoned time, with
// the reason. A held execution is never ended, however long it runs.
func deadHoldersExecutionIsEnded(t *testing.T, store storage.Store) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	reaper, err := decide(t).NewReaper(store, recovery.ReaperOptions{Clock: clock, Abandoned: 10 * time.Minute})
	require.NoError(t, err)

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

// ManagerLosesItsLease checks on store one lease for all of a manager's
// executions (storage.Lease.Under): a manager takes its own record over,
// then starts three executions under that ownership
// (recovery.Policy.Manager). When outage.End ends the manager's
// ownership, every execution's handle is fenced and the next manager
// takes each over, at a new epoch, in its status, counting nothing, as
// soon as the store lets it (at once where the outage freed the
// records). RunOwnership runs it with the ownership released; a store's
// tests run it with the ways the store itself loses one.
func ManagerLosesItsLease(t *testing.T, store storage.Store, outage Outage) {
	t.Helper()
	d := decide(t, recovery.Policy{Manager: true})
	lead := func(holder string) storage.Ownership {
		t.Helper()
		id := "manager-" + holder
		if _, err := store.Get(bounded(t), id); errors.Is(err, storage.ErrNotFound) {
			_, err = store.Create(bounded(t), storage.Record{ID: id, Status: "leading"})
			require.NoError(t, err)
		}
		l := outage.lease(holder)
		l.Wait = true
		own, _, err := store.Acquire(bounded(t), id, l)
		require.NoError(t, err)
		t.Cleanup(func() { _ = own.Release(context.Background()) })
		return own
	}
	statuses := map[string]state.Status{"ex-1": state.Running, "ex-2": state.Paused, "ex-3": state.Initializing}
	ids := []string{"ex-1", "ex-2", "ex-3"}
	mgrA := lead("mgr-a")
	var execs []*transition.Persisted[state.Status]
	for _, id := range ids {
		master(t, store, id, statuses[id])
		exec := controller(t, store, id, "mgr-a")
		v, err := d.Start(bounded(t), exec, storage.Lease{Holder: "mgr-a", Under: mgrA})
		require.NoError(t, err, id)
		require.Zero(t, v.Failovers)
		require.NoError(t, probe(bounded(t), exec, "driven under the manager's lease"), id)
		_, held, err := store.Held(bounded(t), id)
		require.NoError(t, err)
		require.True(t, held, id)
		execs = append(execs, exec)
	}

	outage.End(t, mgrA)
	for k, exec := range execs {
		select {
		case <-exec.Ownership().Lost():
		case <-time.After(time.Minute):
			t.Fatalf("%s: the manager's ownership ended, and this one never did", ids[k])
		}
		require.ErrorIs(t, probe(bounded(t), exec, "after the manager's lease ended"), storage.ErrFenced, ids[k])
	}
	mgrB := lead("mgr-b")
	for _, id := range ids {
		before := get(t, store, id)
		exec := controller(t, store, id, "mgr-b")
		v, err := d.Start(bounded(t), exec, storage.Lease{Holder: "mgr-b", Under: mgrB, Wait: true})
		require.NoError(t, err, id)
		require.Equal(t, statuses[id], v.To, "%s stays in its status", id)
		require.Zero(t, v.Failovers)
		rec := get(t, store, id)
		require.Equal(t, "mgr-b", rec.Owner)
		require.Greater(t, rec.Epoch, before.Epoch)
		require.Empty(t, rec.Meta[recovery.MetaFailovers], "%s: a manager's end counts nothing", id)
		require.NoError(t, probe(bounded(t), exec, "the next manager drives it"), id)
	}
}

// A manager's ownership released (the way every store loses one).
func managerLosesItsLease(t *testing.T, store storage.Store) {
	ManagerLosesItsLease(t, store, released)
}
