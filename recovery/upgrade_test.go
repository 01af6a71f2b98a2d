package recovery_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// During a rolling upgrade, a controller of the old table meets a record
// the new one relocated: it writes nothing, takes nothing, counts
// nothing, and says why; its Reaper leaves it alone too. A controller of
// the new table takes it.
func TestAnOldControllerLeavesARecordOfANewerTableAlone(t *testing.T) {
	store := storage.NewMemory()
	v2 := schematest.Jobs(t, true)
	master, err := transition.NewPersisted(v2.Table(), store, "job-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	_, err = master.Walk(bg, "moving", "relocated by a v2 controller")
	require.NoError(t, err)
	before, err := store.Get(bg, "job-1")
	require.NoError(t, err)

	v1 := schematest.Jobs(t, false)
	old, err := transition.NewPersisted(v1.Table(), store, "job-1", transition.PersistedOptions{Actor: "pod-v1"})
	require.NoError(t, err)
	_, err = decider(t, v1, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}).Start(bg, old, storage.Lease{Holder: "pod-v1"})
	require.ErrorIs(t, err, recovery.ErrForeignStatus)
	require.ErrorIs(t, err, transition.ErrUnknownState)
	after, err := store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "nothing written")
	require.Empty(t, after.Meta[recovery.MetaFailovers], "no restart counted")
	_, held, err := store.Held(bg, "job-1")
	require.NoError(t, err)
	require.False(t, held, "nothing taken over")

	reaper, err := decider(t, v1, recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{})
	require.NoError(t, err)
	res, err := reaper.Reconcile(context.Background(), "job-1")
	require.NoError(t, err, "the old reaper leaves it alone, without an error to retry")
	require.Zero(t, res.RequeueAfter)
	after, err = store.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision)

	next, err := transition.NewPersisted(v2.Table(), store, "job-1", transition.PersistedOptions{Actor: "pod-v2"})
	require.NoError(t, err)
	v, err := decider(t, v2, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}).Start(bg, next, storage.Lease{Holder: "pod-v2"})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
}

var bg = context.Background()
