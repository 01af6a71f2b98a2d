package recovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// observed records what an Observer is told.
type observed struct {
	verdicts []recovery.Verdict[state.Status]
	vErrs    []error
	actions  []recovery.Action
	aErrs    []error
	enforced []recovery.Enforced[state.Status]
}

func (o *observed) observer() recovery.Observer[state.Status] {
	return recovery.Observer[state.Status]{
		Startup: func(v recovery.Verdict[state.Status], err error) {
			o.verdicts, o.vErrs = append(o.verdicts, v), append(o.vErrs, err)
		},
		Terminate: func(a recovery.Action, err error) { o.actions, o.aErrs = append(o.actions, a), append(o.aErrs, err) },
		Enforced:  func(e recovery.Enforced[state.Status]) { o.enforced = append(o.enforced, e) },
	}
}

// Every startup is told to the observer once, with the restarts it
// counted against the budget: 1, 2, 3 of 3, then 4 of 3 (failed), then
// a refusal that counts nothing.
func TestObserverSeesEveryStartupWithTheRestartsItCounted(t *testing.T) {
	now := t0
	exec, _ := newExecution(t, state.Running, func() time.Time { return now })
	var o observed
	for k := range 5 {
		now = now.Add(time.Second)
		p := recovery.Policy{Clock: func() time.Time { return now }, Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}
		owned := controllerOf(t, exec, fmt.Sprintf("pod-%d", k))
		_, _ = decider(t, teraslice.Roles(), p).WithObserver(o.observer()).Start(context.Background(), owned, lease(fmt.Sprintf("pod-%d", k)))
		if own := owned.Ownership(); own != nil {
			require.NoError(t, own.Release(context.Background())) // OOM-killed
		}
	}
	require.Len(t, o.verdicts, 5)
	for k, want := range []struct {
		decision recovery.Decision
		restarts int
	}{
		{recovery.DecisionResume, 1}, {recovery.DecisionResume, 2}, {recovery.DecisionResume, 3},
		{recovery.DecisionFail, 4}, {recovery.DecisionRefuse, 0},
	} {
		require.Equal(t, want.decision, o.verdicts[k].Decision, "startup %d", k)
		require.Equal(t, want.restarts, o.verdicts[k].Failovers, "startup %d", k)
		if want.restarts > 0 {
			require.Equal(t, teraslice.Failovers, o.verdicts[k].FailoverAllowance)
		}
	}
	require.NoError(t, o.vErrs[3])
	require.ErrorIs(t, o.vErrs[4], recovery.ErrTerminalStatus)
}

// A startup refused by a live holder is told with ErrHeld and counts no
// restart: nothing was written.
func TestObserverSeesAStartupALiveHolderRefused(t *testing.T) {
	exec, _ := newExecution(t, state.Running, time.Now)
	owner(t, exec, "pod-a")
	var o observed
	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}
	_, err := decider(t, teraslice.Roles(), p).WithObserver(o.observer()).Start(context.Background(), controllerOf(t, exec, "pod-b"), lease("pod-b"))
	require.ErrorIs(t, err, storage.ErrHeld)
	require.Len(t, o.verdicts, 1)
	require.ErrorIs(t, o.vErrs[0], storage.ErrHeld)
	require.Zero(t, o.verdicts[0].Failovers)
}

// Each SIGTERM handled is told once: a relocation, a shutdown, and a
// fenced controller leaving.
func TestObserverSeesEverySIGTERMAction(t *testing.T) {
	var o observed
	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}

	exec, _ := newExecution(t, state.Running, time.Now)
	_, err := decider(t, teraslice.Roles(), p).WithObserver(o.observer()).Terminate(context.Background(), owner(t, exec, "pod-a"), nil)
	require.NoError(t, err)

	stopping, _ := newExecution(t, state.Stopping, time.Now)
	_, err = decider(t, teraslice.Roles(), p).WithObserver(o.observer()).Terminate(context.Background(), owner(t, stopping, "pod-a"), nil)
	require.NoError(t, err)

	taken, _ := newExecution(t, state.Running, time.Now)
	stale := crashed(t, taken, "pod-0")
	owner(t, taken, "pod-1")
	_, err = decider(t, teraslice.Roles(), p).WithObserver(o.observer()).Terminate(context.Background(), stale, nil)
	require.NoError(t, err)

	require.Len(t, o.actions, 3)
	require.Equal(t, recovery.ActionRelocate, o.actions[0].Kind)
	require.Equal(t, recovery.ActionShutdown, o.actions[1].Kind)
	require.Equal(t, recovery.ActionLeave, o.actions[2].Kind)
	require.Equal(t, []error{nil, nil, nil}, o.aErrs)
}

// The Reaper tells of the deadlines it enforced, and only those.
func TestObserverSeesEveryDeadlineTheReaperEnforced(t *testing.T) {
	clock := reconciletest.NewClock(t0)
	var o observed
	overdue := teraslice.RelocatingDeadline + time.Minute
	entered := clock.Now().Add(-overdue)
	_, store := newExecution(t, state.Relocating, func() time.Time { return entered })
	reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).WithObserver(o.observer()).NewReaper(store, recovery.ReaperOptions{Clock: clock})
	require.NoError(t, err)
	_, err = reaper.Reconcile(context.Background(), "ex-1")
	require.NoError(t, err)
	_, err = reaper.Reconcile(context.Background(), "ex-1") // failed now: nothing to enforce
	require.NoError(t, err)
	require.Equal(t, []recovery.Enforced[state.Status]{{ID: "ex-1", From: state.Relocating, To: state.Failed,
		Cause: recovery.CauseTimer, Reason: "relocating for 16m0s, past its deadline of 15m0s",
		Timer: recovery.Timer[state.Status]{State: state.Relocating, After: teraslice.RelocatingDeadline, Then: state.Failed},
		Due:   entered.Add(teraslice.RelocatingDeadline), Overdue: time.Minute}}, o.enforced)
}
