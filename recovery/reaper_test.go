package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

func TestReaperMovesOverdueStatusesOnAndWaitsForTheOthers(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	for _, tc := range []struct {
		status state.Status
		age    time.Duration
		want   state.Status
		wait   time.Duration
	}{
		{state.Relocating, teraslice.RelocatingDeadline + time.Minute, state.Failed, 0},
		{state.Relocating, 4 * time.Minute, state.Relocating, teraslice.RelocatingDeadline - 4*time.Minute},
		{state.Stopping, 5 * time.Minute, state.Stopped, 0},
		{state.Stopping, time.Minute, state.Stopping, 4 * time.Minute},
		// Stranded: the master died placing it, or its controller died
		// in setup and nobody replaced it.
		{state.Scheduling, teraslice.StrandedAfter, state.Failed, 0},
		{state.Initializing, teraslice.StrandedAfter + time.Hour, state.Failed, 0},
		{state.Initializing, time.Minute, state.Initializing, teraslice.StrandedAfter - time.Minute},
		{state.Pending, 100 * time.Hour, state.Pending, 0}, // a queue may be long
		{state.Running, 100 * time.Hour, state.Running, 0},
		{state.Completed, time.Hour, state.Completed, 0},
	} {
		entered := clock.Now().Add(-tc.age)
		exec, store := newExecution(t, tc.status, func() time.Time { return entered })
		reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{Clock: clock})
		require.NoError(t, err)
		res, err := reaper.Reconcile(ctx, "ex-1")
		require.NoError(t, err)
		require.Equal(t, tc.wait, res.RequeueAfter, "%s for %v", tc.status, tc.age)
		cur, rec, err := exec.Load(ctx)
		require.NoError(t, err)
		require.Equal(t, tc.want, cur, "%s for %v", tc.status, tc.age)
		if tc.want == state.Failed {
			require.Contains(t, rec.Reason, "past its deadline")
			require.Equal(t, rec.Reason, rec.Meta[recovery.MetaFailure])
			require.Equal(t, "deadline-reaper", rec.History.Entries()[rec.History.Len()-1].Actor)
		}
	}
}

func TestReaperIgnoresExecutionsThatAreGone(t *testing.T) {
	_, store := newExecution(t, state.Running, time.Now)
	reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{})
	require.NoError(t, err)
	res, err := reaper.Reconcile(context.Background(), "nope")
	require.NoError(t, err)
	require.Zero(t, res)
}

// A reaper that could not work is refused when it is made, not at its
// first reconcile: in a Loop, that error would be retried for ever and
// no deadline enforced. (Deadlines the roles refuse are refused when the
// roles are built.)
func TestNewReaperRefusesWhatCouldNotWork(t *testing.T) {
	_, err := recovery.NewDecider[state.Status](nil, recovery.Policy{})
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	var typedNil *storage.Memory
	for name, store := range map[string]storage.Store{"nil store": nil, "typed nil store": typedNil} {
		reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{})
		require.Error(t, err, name)
		require.Nil(t, reaper, name)
	}
	var zeroDecider *recovery.Decider[state.Status]
	_, err = zeroDecider.NewReaper(storage.NewMemory(), recovery.ReaperOptions{})
	require.ErrorContains(t, err, "NewDecider")
	var zero recovery.Reaper[state.Status]
	_, err = zero.Reconcile(context.Background(), "ex-1")
	require.ErrorIs(t, err, reconcile.ErrTerminal, "a Reaper not made by a Decider says so")
	require.ErrorContains(t, err, "NewReaper")
}

// In a loop, the reaper's RequeueAfter makes the deadline hold exactly,
// with no resync in between.
func TestReaperInALoopFailsARelocationNobodyTookOverAtItsDeadline(t *testing.T) {
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	exec, store := newExecution(t, state.Relocating, clock.Now)
	l, err := reconcile.NewLoop(reconcile.Options[string]{
		Clock:      clock,
		Resync:     -1,
		Reconciler: mustReaper(t, store, recovery.ReaperOptions{Clock: clock}),
		Known:      reconcile.StoreKeys(store, teraslice.Lifecycle()),
	})
	require.NoError(t, err)
	reconciletest.Start(t, l)
	require.Equal(t, teraslice.RelocatingDeadline, clock.AdvanceToEarliest(t))
	reconciletest.Idle(t, l)
	cur, _, err := exec.Load(context.Background())
	require.NoError(t, err)
	require.Equal(t, state.Failed, cur)
}

// A reaped record keeps the audit trail its creator asked for.
func TestReaperKeepsTheRecordsTrailLength(t *testing.T) {
	ctx := context.Background()
	clock := reconciletest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	store := storage.NewMemory()
	then := clock.Now().Add(-time.Hour)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{History: 100, Clock: func() time.Time { return then }})
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.To(state.Running))
	require.NoError(t, err)
	for k := range 34 {
		to := state.Paused
		if k%2 == 1 {
			to = state.Running
		}
		_, err := exec.Fire(ctx, to, "progress")
		require.NoError(t, err)
	}
	_, err = exec.Fire(ctx, state.Relocating, "SIGTERM")
	require.NoError(t, err)
	_, rec, err := exec.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, 36, rec.History.Len())

	_, err = mustReaper(t, store, recovery.ReaperOptions{Clock: clock}).Reconcile(ctx, "ex-1")
	require.NoError(t, err)
	cur, rec, err := exec.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, state.Failed, cur)
	require.Equal(t, 37, rec.History.Len(), "the reaper kept every entry")
}

func mustReaper(t *testing.T, store storage.Store, opts recovery.ReaperOptions) *recovery.Reaper[state.Status] {
	t.Helper()
	reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).NewReaper(store, opts)
	require.NoError(t, err)
	return reaper
}
