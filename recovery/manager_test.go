package recovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// A manager's SIGTERM hands every execution over as it is, whatever its
// state; its exit code is 0.
func TestAManagersSigtermHandsEveryExecutionOver(t *testing.T) {
	roles := volcano(t)
	claim := storage.Claim{Owner: "manager-a", Epoch: 3}
	for _, s := range roles.Table().States() {
		rec := storage.Record{ID: "job-1", Status: string(s), Owner: "manager-a", Epoch: 3}
		a, err := recovery.Terminate(roles, rec, claim, recovery.Policy{Manager: true})
		require.NoError(t, err, "%s", s)
		require.Equal(t, recovery.ActionHandOver, a.Kind, "%s", s)
		require.Zero(t, a.ExitCode, "%s", s)
	}
	rec := storage.Record{ID: "job-1", Status: string(Running), Owner: "manager-b", Epoch: 4}
	a, err := recovery.Terminate(roles, rec, claim, recovery.Policy{Manager: true})
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind, "another manager's execution is left, not handed over")
	require.Equal(t, "handover", recovery.ActionHandOver.String())
}

// A manager's policy says nothing of a controller whose process is the
// execution's: setting it is a mistake, said at once.
func TestAManagersPolicyRefusesWhatSaysNothingForAManager(t *testing.T) {
	for name, p := range map[string]recovery.Policy{
		"Platform":  {Manager: true, Platform: recovery.SystemdOnFailure},
		"Work":      {Manager: true, Work: recovery.Restartability(true)},
		"Failovers": {Manager: true, Failovers: recovery.Allowance{Count: 3}},
	} {
		_, err := recovery.NewDecider(volcano(t), p)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
		require.ErrorContains(t, err, "sets "+name, name)
	}
}

// Jobs outlive their manager: on its SIGTERM each stays in its phase,
// released, and the next manager takes each over at once, resuming the
// running ones without counting a failover.
func TestTheNextManagerTakesEveryJobOverAtOnce(t *testing.T) {
	roles := volcano(t)
	store := storage.NewMemory()
	now := t0
	clock := func() time.Time { return now }
	phases := []Phase{Pending, Running, Restarting, Aborted, Completing}
	for k, p := range phases {
		u, err := transition.NewPersisted(roles.Table(), store, fmt.Sprint("job-", k), transition.PersistedOptions{Actor: "user", Clock: clock})
		require.NoError(t, err)
		_, err = u.Create(bg, transition.To(Pending))
		require.NoError(t, err)
		if p != Pending {
			_, err = u.Walk(bg, p, "")
			require.NoError(t, err)
		}
	}
	d := decider(t, roles, recovery.Policy{Manager: true, Clock: clock})
	manage := func(holder string) []*transition.Persisted[Phase] {
		var execs []*transition.Persisted[Phase]
		for k := range phases {
			exec, err := transition.NewPersisted(roles.Table(), store, fmt.Sprint("job-", k), transition.PersistedOptions{Actor: holder, Clock: clock})
			require.NoError(t, err)
			// No Wait: a handed-over job is free at once.
			ctx, cancel := context.WithTimeout(bg, 5*time.Second)
			v, err := d.Start(ctx, exec, storage.Lease{Holder: holder, TTL: time.Minute})
			cancel()
			require.NoError(t, err, "job-%d", k)
			require.Zero(t, v.Failovers)
			require.Equal(t, phases[k], v.To, "job-%d stays in its phase", k)
			execs = append(execs, exec)
		}
		return execs
	}
	first := manage("manager-a")
	before := map[string]storage.Record{}
	for k := range phases {
		before[fmt.Sprint("job-", k)], _ = store.Get(bg, fmt.Sprint("job-", k))
	}
	for _, exec := range first {
		a, err := d.Terminate(bg, exec, nil)
		require.NoError(t, err)
		require.Equal(t, recovery.ActionHandOver, a.Kind)
		require.NoError(t, a.ReleaseErr)
		require.True(t, storage.Ended(exec.Ownership()))
		rec, err := store.Get(bg, exec.ID())
		require.NoError(t, err)
		require.Equal(t, before[exec.ID()], rec, "nothing written")
	}
	now = now.Add(time.Second)
	second := manage("manager-b")
	rec, err := store.Get(bg, second[1].ID())
	require.NoError(t, err)
	require.Equal(t, string(Running), rec.Status)
	require.Empty(t, rec.Meta[recovery.MetaFailovers])
	require.Contains(t, rec.Reason, "no failover counted")
}

// A start retried by its live holder after the record moved on (it set
// up and ran, or the master stopped it) decides again on the record as it
// is: a stale "start" would set up a running or stopping execution.
func TestARetriedStartAfterTheRecordMovedOnDecidesAgain(t *testing.T) {
	store := storage.NewMemory()
	now := t0
	clock := func() time.Time { return now }
	master, err := transition.NewPersisted(volcano(t).Table(), store, "job-1", transition.PersistedOptions{Actor: "user", Clock: clock})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(Pending))
	require.NoError(t, err)
	d := decider(t, volcano(t), recovery.Policy{Manager: true, Clock: clock})
	exec, err := transition.NewPersisted(volcano(t).Table(), store, "job-1", transition.PersistedOptions{Actor: "manager", Clock: clock})
	require.NoError(t, err)
	lease := storage.Lease{Holder: "manager", TTL: time.Minute}
	v, err := d.Start(bg, exec, lease)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStart, v.Decision)
	again, err := d.Start(bg, exec, lease)
	require.NoError(t, err)
	require.Equal(t, v, again, "nothing moved: the verdict written")

	_, err = exec.Fire(bg, Running, "pods running")
	require.NoError(t, err)
	again, err = d.Start(bg, exec, lease)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, again.Decision, "running now: not set up again")
	require.Zero(t, again.Failovers)

	_, err = master.Fire(bg, Terminating, "vcctl job delete")
	require.NoError(t, err)
	again, err = d.Start(bg, exec, lease)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStop, again.Decision, "being stopped: the drain goes on")
}
