package recovery_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// rolledBack is the trial's rollback: a job version 3 relocated from
// held, then a version 1 controller's handle on it, owning it (as the
// controller that drove it in running before a version 3 authority
// parked it, see the caller), and the store.
type rolledBack struct {
	store   *storage.Memory
	old     *transition.Persisted[string]
	before  storage.Record
	v1, v3  *recovery.Roles[string]
	clock   *reconciletest.Clock
	decider *recovery.Decider[string]
}

// rollback makes the trial's job: a version 1 controller took it over in
// running; an operator of version 3 held it and a version 3 authority
// wrote migrating (a relocation of the held job). The version 1
// controller still owns it, and its table knows migrating but not held.
func rollback(t *testing.T) rolledBack {
	t.Helper()
	clock := reconciletest.NewClock(t0)
	store := storage.NewMemory()
	v1, v3 := schematest.CIJobs(t, ""), schematest.CIJobs(t, "held")
	master, err := transition.NewPersisted(v3.Table(), store, "job-1", transition.PersistedOptions{Actor: "master", Clock: clock.Now})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	_, err = master.Walk(bg, "running", "placed")
	require.NoError(t, err)

	old, err := transition.NewPersisted(v1.Table(), store, "job-1", transition.PersistedOptions{Actor: "ctl-v1", Clock: clock.Now})
	require.NoError(t, err)
	d := decider(t, v1, recovery.Policy{Clock: clock.Now, Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	v, err := d.Start(bg, old, storage.Lease{Holder: "ctl-v1", TTL: time.Hour})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)

	_, err = master.Fire(bg, "held", "quarantined by an operator (v3)")
	require.NoError(t, err)
	_, err = master.Fire(bg, "migrating", "relocated while held (v3)")
	require.NoError(t, err)
	before, err := store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, "held", before.Previous)
	require.Equal(t, "ctl-v1", before.Owner, "authorities take no ownership")
	return rolledBack{store: store, old: old, before: before, v1: v1, v3: v3, clock: clock, decider: d}
}

// unchanged requires that nothing was written on job-1 since before.
func (r rolledBack) unchanged(t *testing.T) {
	t.Helper()
	after, err := r.store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, r.before.Revision, after.Revision, "nothing written")
	require.Equal(t, "migrating", after.Status)
	require.Equal(t, "held", after.Previous)
}

// The operator's trial: after version 3 relocated a held job, a version
// 1 controller resumed it "migrating → starting". Every decision must
// leave a record whose previous status it does not know, where the
// record returns to it, to a controller whose table knows it.
func TestARollbackLeavesARecordReturningToAStatusOfANewerTableAlone(t *testing.T) {
	t.Run("Startup", func(t *testing.T) {
		r := rollback(t)
		_, err := recovery.Startup(r.v1, r.before, recovery.Policy{}, t0)
		require.ErrorIs(t, err, recovery.ErrForeignStatus)
		require.ErrorIs(t, err, transition.ErrUnknownState)
		require.Contains(t, err.Error(), `"held"`)

		// Past the relocation's deadline, too: a timer is a decision.
		_, err = recovery.Startup(r.v1, r.before, recovery.Policy{}, t0.Add(teraslice.RelocatingDeadline+time.Hour))
		require.ErrorIs(t, err, recovery.ErrForeignStatus)

		v, err := recovery.Startup(r.v3, r.before, recovery.Policy{}, t0)
		require.NoError(t, err, "the version that knows held decides")
		require.Equal(t, "held", v.To)
	})
	t.Run("Decider.Start", func(t *testing.T) {
		r := rollback(t)
		require.NoError(t, r.old.Ownership().Release(bg), "its first controller has gone")
		next, err := transition.NewPersisted(r.v1.Table(), r.store, "job-1", transition.PersistedOptions{Actor: "ctl-v1-b", Clock: r.clock.Now})
		require.NoError(t, err)
		v, err := r.decider.Start(bg, next, storage.Lease{Holder: "ctl-v1-b", TTL: time.Hour})
		require.ErrorIs(t, err, recovery.ErrForeignStatus)
		require.Zero(t, v.Decision)
		r.unchanged(t)
		_, held, err := r.store.Held(bg, "job-1")
		require.NoError(t, err)
		require.False(t, held, "nothing taken over")

		v3, err := transition.NewPersisted(r.v3.Table(), r.store, "job-1", transition.PersistedOptions{Actor: "ctl-v3", Clock: r.clock.Now})
		require.NoError(t, err)
		v, err = decider(t, r.v3, recovery.Policy{Clock: r.clock.Now}).Start(bg, v3, storage.Lease{Holder: "ctl-v3", TTL: time.Hour})
		require.NoError(t, err)
		require.Equal(t, recovery.DecisionResume, v.Decision)
		require.Equal(t, "held", v.To, "the version that knows held takes it back there")
	})
	t.Run("Terminate", func(t *testing.T) {
		r := rollback(t)
		a, err := recovery.Terminate(r.v1, r.before, r.old.Claim(), recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
		require.NoError(t, err)
		require.Equal(t, recovery.ActionLeave, a.Kind)
		require.Contains(t, a.Reason, "status of another table")

		a, err = r.decider.Terminate(bg, r.old, nil)
		require.NoError(t, err)
		require.Equal(t, recovery.ActionLeave, a.Kind)
		require.Zero(t, a.ExitCode, "a controller of this table restarted for it would leave it too")
		require.NoError(t, a.ReleaseErr)
		require.True(t, storage.Ended(r.old.Ownership()), "released, so that a newer controller takes over at once")
		r.unchanged(t)
	})
	t.Run("End", func(t *testing.T) {
		r := rollback(t)
		e, err := recovery.End(r.v1, r.before, r.old.Claim(), recovery.Ending{Finished: true})
		require.NoError(t, err)
		require.Equal(t, recovery.EndLeave, e.Kind)

		e, err = r.decider.End(bg, r.old, recovery.Ending{Finished: true}, map[string]string{"slices": "9"})
		require.NoError(t, err)
		require.Equal(t, recovery.EndLeave, e.Kind)
		require.Zero(t, e.ExitCode)
		require.True(t, storage.Ended(r.old.Ownership()))
		r.unchanged(t)
	})
	t.Run("Abandon", func(t *testing.T) {
		r := rollback(t)
		require.NoError(t, r.old.Ownership().Release(bg))
		master, err := transition.NewPersisted(r.v1.Table(), r.store, "job-1", transition.PersistedOptions{Actor: "master-v1"})
		require.NoError(t, err)
		_, err = r.decider.Abandon(bg, master, "its Job failed")
		require.ErrorIs(t, err, recovery.ErrForeignStatus)
		r.unchanged(t)
	})
	t.Run("Reaper", func(t *testing.T) {
		r := rollback(t)
		require.NoError(t, r.old.Ownership().Release(bg))
		r.clock.Advance(teraslice.RelocatingDeadline + time.Hour)
		reaper, err := r.decider.NewReaper(r.store, recovery.ReaperOptions{Clock: r.clock})
		require.NoError(t, err)
		res, err := reaper.Reconcile(bg, "job-1")
		require.NoError(t, err, "left alone, without an error to retry")
		require.Zero(t, res.RequeueAfter)
		r.unchanged(t)

		// The same record returning to a status version 1 knows is
		// overdue, and the Reaper ends it: the check above is the
		// previous status's, not the Reaper's idleness.
		clock := reconciletest.NewClock(t0)
		v1, err := transition.NewPersisted(r.v1.Table(), r.store, "job-2", transition.PersistedOptions{Actor: "master", Clock: clock.Now})
		require.NoError(t, err)
		_, err = v1.Create(bg, transition.To("queued"))
		require.NoError(t, err)
		_, err = v1.Walk(bg, "migrating", "relocated")
		require.NoError(t, err)
		res, err = reaper.Reconcile(bg, "job-2")
		require.NoError(t, err)
		rec, err := r.store.Get(bg, "job-2")
		require.NoError(t, err)
		require.Equal(t, "failed", rec.Status)
	})
}

// A status of a newer table is foreign to every decision as well, not
// only to Start: a version 3 authority held a job a version 1 controller
// drives, and the controller then gets SIGTERM, or its work ends.
func TestEveryDecisionLeavesAStatusOfANewerTableAlone(t *testing.T) {
	for _, decide := range []struct {
		name string
		fn   func(r rolledBack) (recovery.ActionKind, recovery.EndKind, int, error)
	}{
		{"Terminate", func(r rolledBack) (recovery.ActionKind, recovery.EndKind, int, error) {
			a, err := r.decider.Terminate(bg, r.old, nil)
			return a.Kind, 0, a.ExitCode, err
		}},
		{"End", func(r rolledBack) (recovery.ActionKind, recovery.EndKind, int, error) {
			e, err := r.decider.End(bg, r.old, recovery.Ending{}, nil)
			return 0, e.Kind, e.ExitCode, err
		}},
	} {
		t.Run(decide.name, func(t *testing.T) {
			r := held(t)
			action, end, code, err := decide.fn(r)
			require.NoError(t, err)
			require.True(t, action == recovery.ActionLeave || end == recovery.EndLeave, "%v %v", action, end)
			require.Zero(t, code)
			require.True(t, storage.Ended(r.old.Ownership()))
			after, err := r.store.Get(bg, "job-1")
			require.NoError(t, err)
			require.Equal(t, r.before.Revision, after.Revision, "nothing written")
		})
	}
}

// held is rollback's job before the relocation: in held, owned by the
// version 1 controller.
func held(t *testing.T) rolledBack {
	t.Helper()
	store := storage.NewMemory()
	v1, v3 := schematest.CIJobs(t, ""), schematest.CIJobs(t, "held")
	master, err := transition.NewPersisted(v3.Table(), store, "job-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	_, err = master.Walk(bg, "running", "placed")
	require.NoError(t, err)
	old, err := transition.NewPersisted(v1.Table(), store, "job-1", transition.PersistedOptions{Actor: "ctl-v1"})
	require.NoError(t, err)
	d := decider(t, v1, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	_, err = d.Start(bg, old, storage.Lease{Holder: "ctl-v1", TTL: time.Hour})
	require.NoError(t, err)
	_, err = master.Fire(bg, "held", "quarantined by an operator (v3)")
	require.NoError(t, err)
	before, err := store.Get(bg, "job-1")
	require.NoError(t, err)
	return rolledBack{store: store, old: old, before: before, v1: v1, v3: v3, decider: d}
}

// A previous status of a newer table matters only where the record
// returns to it: a job that left held for running is version 1's to
// drive, or a rollback would strand every job that was ever held.
func TestARecordThatLeftAStatusOfANewerTableIsThisTablesToDrive(t *testing.T) {
	r := held(t)
	master, err := transition.NewPersisted(r.v3.Table(), r.store, "job-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Fire(bg, "running", "released from hold (v3)")
	require.NoError(t, err)
	a, err := r.decider.Terminate(bg, r.old, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	rec, err := r.store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, "migrating", rec.Status)
	require.Equal(t, "running", rec.Previous)
}
