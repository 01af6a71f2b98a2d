// Package recoverytest checks that a store keeps the ownership promises
// the recovery decisions rest on: a controller that starts owns the
// execution with its verdict written, or writes nothing; a retried start
// counts nothing; a live controller is never taken over; a controller
// whose ownership ended writes nothing more, and takes the execution back
// if nobody else did; an execution whose controller is gone for good is
// ended by its deadline. A store's tests run [RunOwnership] next to
// storagetest (see the example).
//
// RunOwnership ends ownerships by releasing them, which every store can.
// [WriteHeldInAGuard] and [TakeBackAfterOutages] take an [Outage], so a
// store's tests also check the ways the store itself loses a lease: etcd
// down, a lease revoked, a controller cut off from the API server.
package recoverytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// Options tune the suite.
type Options struct {
	// Rounds is how many times two controllers race to start one
	// execution; default 500, 50 under -short.
	Rounds int
}

// RunOwnership runs the suite as subtests; newStore returns a fresh,
// empty store for each.
func RunOwnership(t *testing.T, newStore func(t *testing.T) storage.Store, opts Options) {
	t.Helper()
	if opts.Rounds <= 0 {
		opts.Rounds = 500
		if testing.Short() {
			opts.Rounds = 50
		}
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, storage.Store)
	}{
		{"StartupOnAnUnownedRecordTakesOwnershipAndFencesTheEarlierWriter", startupOnUnownedTakesOwnership},
		{"NoAPITakesOverALiveHolder", noAPITakesOverALiveHolder},
		{"ASecondControllerStartingJustAfterTheFirstIsHeldAndCountsNoRestart", secondJustAfterFirstIsHeld},
		{"StartupWaitsForACrashedPredecessorAndCountsOneRestart", startupWaitsForCrashedPredecessor},
		{"ReleaseClosesLostAndFencesTheHandle", releaseClosesLostAndFences},
		{"AStartThatMeetsATerminalStatusWritesAndHoldsNothing", startMeetingTerminalWritesNothing},
		{"AStartWhoseVerdictCannotBeWrittenWritesAndHoldsNothing", startWithUnwritableVerdictWritesNothing},
		{"AStartRetriedByTheLiveHolderReturnsTheVerdictWrittenAndCountsNothing", retriedStartByLiveHolder},
		{"AStartRetriedAfterAnUnknownOutcomeTakesBackAndCountsNothing", retriedStartAfterUnknownOutcome},
		{"AWriteHeldInAGuardWhileTheOwnershipEndsLandsNothing", writeHeldInGuardWhileOwnershipEnds},
		{"TheHandleThatStartedCannotWriteOnceASuccessorOwnsIt", handleThatStartedIsFenced},
		{"AHandleUsedToTakeOverNeverWritesAsAnOutsideAuthority", handleUsedToTakeOverIsNoAuthority},
		{"TerminateAndFinishAfterLossLeaveWithoutReadingTheStore", terminateAndFinishAfterLossLeave},
		{"AHolderWhoseOwnershipEndedTakesItBackCountingNothing", holderTakesBackCountingNothing},
		{"ADeadHoldersRunningExecutionIsEndedByItsDeadline", deadHoldersExecutionIsEnded},
		{"AManagersExecutionsHeldUnderItsLeaseAreTakenOverWhenItEnds", managerLosesItsLease},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
	t.Run("TwoControllersStartingTogetherLeaveExactlyOneRunning", func(t *testing.T) {
		twoControllersStartingTogether(t, newStore(t), opts.Rounds)
	})
}

const testTTL = 30 * time.Second

func lease(holder string) storage.Lease {
	return storage.Lease{Holder: holder, TTL: testTTL}
}

// restartable is work that a new controller can pick up.
type restartable struct{}

func (restartable) IsRestartable() bool { return true }

func policy() recovery.Policy {
	return recovery.Policy{Platform: recovery.KubernetesJob, Work: restartable{}, Failovers: teraslice.Failovers}
}

// decide is the Decider of the canonical roles under p (policy() when
// none is given).
func decide(t *testing.T, p ...recovery.Policy) *recovery.Decider[state.Status] {
	t.Helper()
	d, err := recovery.NewDecider(teraslice.Roles(), append(p, policy())[0])
	require.NoError(t, err)
	return d
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// master creates execution id in status s, as a cluster master does:
// without a claim.
func master(t *testing.T, store storage.Store, id string, s state.Status) *transition.Persisted[state.Status] {
	t.Helper()
	m, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = m.Create(bounded(t), transition.To(s).Because("submitted"))
	require.NoError(t, err)
	return m
}

// controller is a controller process's own handle on the execution.
func controller(t *testing.T, store storage.Store, id, pod string) *transition.Persisted[state.Status] {
	t.Helper()
	c, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: pod})
	require.NoError(t, err)
	return c
}

// startup runs the README's startup path for pod, with a handle of its
// own; the handle is returned whatever happens.
func startup(t *testing.T, store storage.Store, id, pod string, l storage.Lease) (recovery.Verdict[state.Status], *transition.Persisted[state.Status], error) {
	t.Helper()
	exec := controller(t, store, id, pod)
	v, err := start(t, exec, pod, l)
	return v, exec, err
}

// start runs Decider.Start for pod through exec.
func start(t *testing.T, exec *transition.Persisted[state.Status], pod string, l storage.Lease) (recovery.Verdict[state.Status], error) {
	t.Helper()
	l.Holder = pod
	v, err := decide(t).Start(bounded(t), exec, l)
	if err == nil {
		releaseAtEnd(t, exec)
	}
	return v, err
}

// releaseAtEnd ends exec's ownership when the test ends.
func releaseAtEnd(t *testing.T, exec *transition.Persisted[state.Status]) {
	own := exec.Ownership()
	t.Cleanup(func() {
		if own != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = own.Release(ctx)
		}
	})
}

// crash plays a controller that died: its ownership ends as an expired
// lease would, at once (to the next holder the two look the same).
func crash(t *testing.T, exec *transition.Persisted[state.Status]) {
	t.Helper()
	require.NoError(t, exec.Ownership().Release(bounded(t)))
}

func get(t *testing.T, store storage.Store, id string) storage.Record {
	t.Helper()
	rec, err := store.Get(bounded(t), id)
	require.NoError(t, err)
	return rec
}

func probe(ctx context.Context, exec *transition.Persisted[state.Status], value string) error {
	_, _, err := exec.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
		return transition.Update[state.Status]{To: cur, Meta: map[string]string{"probe": value}}, nil
	})
	return err
}

// The reproduction of the issue: the master creates the record without a
// claim, pod-a starts, runs and is OOM-killed; pod-b starts; pod-a turns
// out to be alive and writes.
func startupOnUnownedTakesOwnership(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Initializing) // the master placed a controller
	v, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStart, v.Decision)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, podA.Claim(), "a controller that starts owns the execution")
	rec := get(t, store, "ex-1")
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, storage.Claim{Owner: rec.Owner, Epoch: rec.Epoch})
	_, err = podA.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)

	crash(t, podA) // OOM kill: the status stays running, the lease ends
	v, podB, err := startup(t, store, "ex-1", "pod-b", lease(""))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, state.Running, v.To)
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, podB.Claim())

	before := get(t, store, "ex-1")
	_, err = podA.Fire(bounded(t), state.Failed, "late write of a pod that was alive after all")
	require.ErrorIs(t, err, storage.ErrFenced)
	after := get(t, store, "ex-1")
	require.Equal(t, before.Revision, after.Revision, "the late write wrote nothing")
	require.Equal(t, "running", after.Status)
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, storage.Claim{Owner: after.Owner, Epoch: after.Epoch})
	require.NoError(t, probe(bounded(t), podB, "pod-b drives it"))
}

// While pod-a lives, nothing takes its execution: not Decider.Start, not
// Persisted.Acquire, not the store's Acquire, not a raw compare-and-swap.
func noAPITakesOverALiveHolder(t *testing.T, store storage.Store) {
	m := master(t, store, "ex-1", state.Running)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	before := get(t, store, "ex-1")

	v, _, err := startup(t, store, "ex-1", "pod-b", lease(""))
	require.ErrorIs(t, err, storage.ErrHeld, "Decider.Start")
	var held *storage.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, "pod-a", held.Holder, "the error names the holder")
	require.Equal(t, "running", held.Status, "and the status found")
	require.Equal(t, state.Running, v.From, "the verdict says what was found")
	require.Zero(t, v.Decision, "and that nothing was decided")
	_, _, err = controller(t, store, "ex-1", "pod-b").Acquire(bounded(t), lease("pod-b"), nil)
	require.ErrorIs(t, err, storage.ErrHeld, "Persisted.Acquire")
	_, _, err = store.Acquire(bounded(t), "ex-1", lease("pod-b"))
	require.ErrorIs(t, err, storage.ErrHeld, "Store.Acquire")
	forged := before
	forged.Owner, forged.Epoch = "pod-b", before.Epoch+1
	_, err = store.CompareAndSwap(bounded(t), "ex-1", before.Revision, forged)
	require.ErrorIs(t, err, storage.ErrInvalidRecord, "CompareAndSwap")

	after := get(t, store, "ex-1")
	require.Equal(t, before.Revision, after.Revision, "nothing was written")
	require.Equal(t, before.Meta[recovery.MetaFailovers], after.Meta[recovery.MetaFailovers], "no restart was counted")
	select {
	case <-podA.Ownership().Lost():
		t.Fatal("pod-a lost its ownership")
	default:
	}
	require.NoError(t, probe(bounded(t), podA, "pod-a still drives it"))
	// The master, an outside authority, still writes without owning.
	_, err = m.Fire(bounded(t), state.Stopping, "user stop")
	require.NoError(t, err)
	require.Equal(t, "pod-a", get(t, store, "ex-1").Owner)
}

// Two controllers start one after the other, not overlapping: the second
// finds the first's freshly resumed status, which on the record alone
// looks like a crash. The first's lease says it is not.
func secondJustAfterFirstIsHeld(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Running) // its previous controller crashed
	v, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	before := get(t, store, "ex-1")
	require.Contains(t, before.Meta, recovery.MetaFailovers, "the crash before pod-a counted once")

	_, podB, err := startup(t, store, "ex-1", "pod-b", lease(""))
	require.ErrorIs(t, err, storage.ErrHeld)
	require.Nil(t, podB.Ownership(), "pod-b holds nothing")
	after := get(t, store, "ex-1")
	require.Equal(t, before.Revision, after.Revision)
	require.Equal(t, before.Meta[recovery.MetaFailovers], after.Meta[recovery.MetaFailovers], "pod-b counted no restart")
	require.NoError(t, probe(bounded(t), podA, "pod-a was not fenced"))
}

// A controller restarted after a crash waits for its dead predecessor's
// lease, then takes over and counts the crash.
func startupWaitsForCrashedPredecessor(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Initializing)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	_, err = podA.Fire(bounded(t), state.Running, "slicer ready")
	require.NoError(t, err)

	type result struct {
		v    recovery.Verdict[state.Status]
		exec *transition.Persisted[state.Status]
		err  error
	}
	got := make(chan result, 1)
	go func() {
		l := lease("")
		l.Wait = true
		v, exec, err := startup(t, store, "ex-1", "pod-b", l)
		got <- result{v, exec, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("pod-b started while pod-a lived: %v %v", r.v.Decision, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	crash(t, podA)
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, recovery.DecisionResume, r.v.Decision)
		require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, r.exec.Claim())
		restarts := get(t, store, "ex-1").Meta[recovery.MetaFailovers]
		require.NotEmpty(t, restarts, "the crash was counted")
	case <-time.After(30 * time.Second):
		t.Fatal("pod-b did not take over after pod-a's ownership ended")
	}
}

func releaseClosesLostAndFences(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Pending)
	_, podA, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.NoError(t, err)
	own := podA.Ownership()
	require.NotNil(t, own)
	require.NoError(t, own.Release(bounded(t)))
	select {
	case <-own.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("Lost was not closed by Release")
	}
	before := get(t, store, "ex-1")
	err = probe(bounded(t), podA, "after release")
	require.ErrorIs(t, err, storage.ErrFenced)
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced)
	require.True(t, fenced.Lost)
	require.Equal(t, before.Revision, get(t, store, "ex-1").Revision)
}

// Two controllers for one relocated execution start within the same
// moment, rounds times: exactly one runs it, the other is told it is
// held, the execution was taken over once and no restart was counted.
func twoControllersStartingTogether(t *testing.T, store storage.Store, rounds int) {
	wins := map[string]int{}
	for round := range rounds {
		id := fmt.Sprintf("ex-%d", round)
		master(t, store, id, state.Running)
		_, pod0, err := startup(t, store, id, "pod-0", lease(""))
		require.NoError(t, err)
		_, _, err = controller(t, store, id, "pod-0").Acquire(bounded(t), lease("pod-x"), nil)
		require.ErrorIs(t, err, storage.ErrHeld)
		a, err := decide(t).Terminate(bounded(t), pod0, nil)
		require.NoError(t, err)
		require.Equal(t, recovery.ActionRelocate, a.Kind)
		require.NoError(t, a.ReleaseErr)
		before := get(t, store, id)
		require.Equal(t, "relocating", before.Status)

		var wg sync.WaitGroup
		pods := []string{"pod-1", "pod-2"}
		execs := make([]*transition.Persisted[state.Status], len(pods))
		verdicts := make([]recovery.Verdict[state.Status], len(pods))
		errs := make([]error, len(pods))
		start := make(chan struct{})
		for k, pod := range pods {
			c := controller(t, store, id, pod) // each its own process, with its own handle
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				execs[k] = c
				verdicts[k], errs[k] = decide(t).Start(bounded(t), c, lease(pod))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for k := range pods {
			switch {
			case errs[k] == nil:
				require.Equal(t, -1, winner, "round %d: both started", round)
				winner = k
			case !errors.Is(errs[k], storage.ErrHeld):
				t.Fatalf("round %d: %s: %v", round, pods[k], errs[k])
			}
		}
		require.NotEqual(t, -1, winner, "round %d: neither started: %v", round, errs)
		releaseAtEnd(t, execs[winner])
		wins[pods[winner]]++
		require.Equal(t, recovery.DecisionResume, verdicts[winner].Decision)
		rec := get(t, store, id)
		require.Equal(t, "running", rec.Status)
		require.Equal(t, storage.Claim{Owner: pods[winner], Epoch: before.Epoch + 1}, storage.Claim{Owner: rec.Owner, Epoch: rec.Epoch},
			"round %d: taken over exactly once", round)
		require.Equal(t, before.Meta[recovery.MetaFailovers], rec.Meta[recovery.MetaFailovers], "round %d: no restart counted", round)
		require.NoError(t, probe(bounded(t), execs[winner], "the winner drives it"))
		require.NoError(t, execs[winner].Ownership().Release(bounded(t)))
	}
	t.Logf("%d rounds: %v", rounds, wins)
}
