package recovery_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	volcanojob "github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

// Phase is a Volcano batch Job's phase, the preset's (package volcano).
type Phase = volcanojob.Phase

const (
	Pending     = volcanojob.Pending
	Running     = volcanojob.Running
	Restarting  = volcanojob.Restarting
	Aborting    = volcanojob.Aborting
	Aborted     = volcanojob.Aborted
	Completing  = volcanojob.Completing
	Completed   = volcanojob.Completed
	Terminating = volcanojob.Terminating
	Terminated  = volcanojob.Terminated
	Failed      = volcanojob.Failed
)

// volcano returns the roles of Volcano's Job lifecycle (the preset's),
// with timers added.
func volcano(t testing.TB, timers ...recovery.Timer[Phase]) *recovery.Roles[Phase] {
	t.Helper()
	roles, err := volcanojob.RolesBuilder().Timer(timers...).Build()
	require.NoError(t, err)
	return roles
}

// A controller restarted in any of Volcano's drains continues that drain
// to its own end; one restarted with a job aborted starts nothing.
func TestStartupContinuesEachDrainAndWaitsInAParkedState(t *testing.T) {
	roles := volcano(t)
	for _, tc := range []struct {
		in       Phase
		decision recovery.Decision
		to       Phase
	}{
		{Pending, recovery.DecisionStart, Pending},
		{Terminating, recovery.DecisionStop, Terminating},
		{Aborting, recovery.DecisionStop, Aborting},
		{Completing, recovery.DecisionStop, Completing},
		{Restarting, recovery.DecisionStop, Restarting},
		{Aborted, recovery.DecisionWait, Aborted},
		{Completed, recovery.DecisionRefuse, Completed},
	} {
		rec := storage.Record{ID: "job-1", Status: string(tc.in), UpdatedAt: t0, Since: t0}
		v, err := recovery.Startup(roles, rec, recovery.Policy{}, t0.Add(time.Minute))
		require.NoError(t, err, "%s", tc.in)
		require.Equal(t, tc.decision, v.Decision, "%s", tc.in)
		require.Equal(t, tc.to, v.To, "%s", tc.in)
	}
}

// Shut down in a drain, a controller writes that drain's end; a parked
// job keeps its state.
func TestFinishWritesEachDrainsOwnEnd(t *testing.T) {
	roles := volcano(t)
	claim := storage.Claim{Owner: "ctl", Epoch: 1}
	for drain, end := range map[Phase]Phase{Terminating: Terminated, Aborting: Aborted, Completing: Completed, Restarting: Pending} {
		e, err := recovery.End(roles, storage.Record{ID: "job-1", Status: string(drain), Owner: "ctl", Epoch: 1}, claim, recovery.Ending{})
		require.NoError(t, err, "%s", drain)
		require.Equal(t, recovery.EndWrite, e.Kind, "%s", drain)
		require.Equal(t, end, e.To, "%s", drain)
	}
	e, err := recovery.End(roles, storage.Record{ID: "job-1", Status: string(Aborted), Owner: "ctl", Epoch: 1}, claim, recovery.Ending{})
	require.NoError(t, err)
	require.Equal(t, recovery.EndKeep, e.Kind)
	a, err := recovery.Terminate(roles, storage.Record{ID: "job-1", Status: string(Aborted), Owner: "ctl", Epoch: 1}, claim, recovery.Policy{})
	require.NoError(t, err)
	require.Equal(t, recovery.ActionShutdown, a.Kind)
}

// No deadline ends a parked job unless the roles give one; a drain given
// one ends in its own end at it.
func TestTheReaperLeavesAParkedJobAndEndsEachDrainInItsEnd(t *testing.T) {
	roles := volcano(t, recovery.Timer[Phase]{State: Completing, After: 5 * time.Minute, Then: Completed})
	require.Empty(t, roles.TimersOf(Aborted))
	clock := reconciletest.NewClock(t0)
	store := storage.NewMemory()
	master, err := transition.NewPersisted(roles.Table(), store, "job-1", transition.PersistedOptions{Actor: "user", Clock: clock.Now})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(Pending))
	require.NoError(t, err)
	_, err = master.Walk(bg, Aborted, "vcctl job suspend")
	require.NoError(t, err)
	other, err := transition.NewPersisted(roles.Table(), store, "job-2", transition.PersistedOptions{Actor: "user", Clock: clock.Now})
	require.NoError(t, err)
	_, err = other.Create(bg, transition.To(Pending))
	require.NoError(t, err)
	_, err = other.Fire(bg, Completing, "vcctl job complete")
	require.NoError(t, err)

	clock.Advance(100 * time.Hour)
	reaper, err := decider(t, roles, recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{Clock: clock})
	require.NoError(t, err)
	for _, id := range []string{"job-1", "job-2"} {
		_, err := reaper.Reconcile(bg, id)
		require.NoError(t, err)
	}
	rec, err := store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, string(Aborted), rec.Status, "parked for as long as nobody resumes it")
	rec, err = store.Get(bg, "job-2")
	require.NoError(t, err)
	require.Equal(t, string(Completed), rec.Status, "the drain's own end")
}

// A job whose run is over and whose end is not yet written (a CI job's
// succeeding and failing steps): a restarted controller writes the end,
// in its start's one write, and never runs the work again.
func TestAFinishingStateIsEndedNeverRerun(t *testing.T) {
	table, err := transition.New("queued").
		Allow("queued", "running").
		Allow("running", "succeeding", "failing", "failed").
		Allow("succeeding", "passed").Allow("failing", "failed").
		Terminal("passed", "failed").Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("queued").Running("running").
		Finishing("succeeding", "passed").Finishing("failing", "failed").Failed("failed").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	master, err := transition.NewPersisted(table, store, "ci-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	_, err = master.Walk(bg, "succeeding", "the tests passed")
	require.NoError(t, err)

	exec, err := transition.NewPersisted(table, store, "ci-1", transition.PersistedOptions{Actor: "runner"})
	require.NoError(t, err)
	v, err := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob}).Start(bg, exec, storage.Lease{Holder: "runner", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionFinish, v.Decision)
	require.Equal(t, "passed", v.To)
	rec, err := store.Get(bg, "ci-1")
	require.NoError(t, err)
	require.Equal(t, "passed", rec.Status)

	e, err := recovery.End(roles, storage.Record{ID: "ci-2", Status: "failing"}, storage.Claim{}, recovery.Ending{Finished: true})
	require.NoError(t, err)
	require.Equal(t, "failed", e.To, "the end the state names, whatever the ending says")
}

// A table may relocate its running states to relocating states of their
// own; SIGTERM writes the one that returns to the state it leaves.
func TestSeveralRelocatingStatesEachReturnToTheirOwn(t *testing.T) {
	table, err := transition.New("idle").
		Allow("idle", "serving", "batch").
		Allow("serving", "moving-serving", "error").Allow("batch", "moving-batch", "error").
		Return("moving-serving", "serving").Return("moving-batch", "batch").
		Allow("moving-serving", "idle", "error").Allow("moving-batch", "idle", "error").
		Allow("error", "gone").Terminal("gone").Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("idle", "error").Running("serving", "batch").
		Relocating("moving-serving", "idle").Relocating("moving-batch", "idle").Failed("error").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
	for running, moving := range map[string]string{"serving": "moving-serving", "batch": "moving-batch"} {
		id := "sim-" + running
		master, err := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)
		_, err = master.Create(bg, transition.To("idle"))
		require.NoError(t, err)
		_, err = master.Fire(bg, running, "")
		require.NoError(t, err)
		exec, err := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: "manager"})
		require.NoError(t, err)
		d := decider(t, roles, p)
		_, err = d.Start(bg, exec, storage.Lease{Holder: "manager", TTL: time.Minute})
		require.NoError(t, err)
		a, err := d.Terminate(bg, exec, nil)
		require.NoError(t, err)
		require.Equal(t, recovery.ActionRelocate, a.Kind)
		rec, err := store.Get(bg, id)
		require.NoError(t, err)
		require.Equal(t, moving, rec.Status)
		rel, ok := roles.RelocatingFor(running)
		require.True(t, ok)
		require.Equal(t, moving, rel)
	}
	_, err = recovery.DefineRoles(table).NotStarted("idle", "error").Running("serving", "batch").
		Relocating("moving-serving", "idle").Failed("error").Build()
	require.ErrorContains(t, err, `"moving-batch" has no role`)
}
