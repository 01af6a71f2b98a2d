package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// abandoned creates an execution in s on a fresh memory store, through
// the statuses that lead there, and returns the master's handle on it.
func abandoned(t *testing.T, s state.Status) (*transition.Persisted[state.Status], storage.Store) {
	t.Helper()
	store := storage.NewMemory()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(context.Background(), transition.To(state.Pending))
	require.NoError(t, err)
	for _, next := range teraslice.Lifecycle().Path(state.Pending, s) {
		_, err := master.Fire(context.Background(), next, "on the way")
		require.NoError(t, err)
	}
	return master, store
}

const jobFailed = "controller Job ex-1-controller failed: BackoffLimitExceeded: Job has reached the specified backoff limit"

func TestAbandonFailsWhatNobodyWillRunAgain(t *testing.T) {
	d := decider(t, teraslice.Roles(), recovery.Policy{})
	for _, s := range []state.Status{state.Scheduling, state.Initializing, state.Running, state.Relocating, state.Paused, state.Failing} {
		master, _ := abandoned(t, s)
		end, err := d.Abandon(context.Background(), master, jobFailed)
		require.NoError(t, err, "%s", s)
		require.Equal(t, recovery.EndWrite, end.Kind)
		require.Equal(t, state.Failed, end.To, "%s", s)
		_, rec, err := master.Load(context.Background())
		require.NoError(t, err)
		require.Equal(t, "failed", rec.Status, "%s", s)
		require.Equal(t, jobFailed, rec.Reason)
		require.Equal(t, jobFailed, rec.Meta[recovery.MetaFailure])
	}
}

func TestAbandonLeavesAPendingExecutionToBePlacedAgain(t *testing.T) {
	master, store := abandoned(t, state.Pending)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).Abandon(context.Background(), master, jobFailed)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Contains(t, end.Reason, "place it again")
	rec, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Equal(t, "pending", rec.Status)
}

func TestAbandonEndsAStopWithTheStopsEnd(t *testing.T) {
	master, _ := abandoned(t, state.Stopping)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).Abandon(context.Background(), master, "controller Job deleted")
	require.NoError(t, err)
	require.Equal(t, state.Stopped, end.To)
	require.Equal(t, "stopped: controller Job deleted", end.Reason)
}

func TestAbandonKeepsAnEndedExecutionAsItIs(t *testing.T) {
	d := decider(t, teraslice.Roles(), recovery.Policy{})
	for _, s := range []state.Status{state.Completed, state.Stopped, state.Failed, state.Terminated} {
		master, store := abandoned(t, s)
		before, err := store.Get(context.Background(), "ex-1")
		require.NoError(t, err)
		end, err := d.Abandon(context.Background(), master, jobFailed)
		require.NoError(t, err)
		require.Equal(t, recovery.EndKeep, end.Kind, "%s", s)
		after, err := store.Get(context.Background(), "ex-1")
		require.NoError(t, err)
		require.Equal(t, before.Revision, after.Revision, "nothing written on %s", s)
	}
}

// A controller still holds it (its Job's last pod shutting down): the
// master writes nothing, and may try again once the holder has gone.
func TestAbandonNeverOverrulesALiveController(t *testing.T) {
	master, store := abandoned(t, state.Running)
	d := decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	pod, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-1"})
	require.NoError(t, err)
	_, err = d.Start(context.Background(), pod, storage.Lease{Holder: "pod-1", TTL: time.Minute})
	require.NoError(t, err)
	before, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)

	_, err = d.Abandon(context.Background(), master, jobFailed)
	require.ErrorIs(t, err, storage.ErrHeld)
	require.ErrorContains(t, err, `"pod-1"`)
	after, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision)

	require.NoError(t, pod.Ownership().Release(context.Background()))
	end, err := d.Abandon(context.Background(), master, jobFailed)
	require.NoError(t, err)
	require.Equal(t, state.Failed, end.To)
}

func TestAbandonRefusesWhatItCannotDo(t *testing.T) {
	d := decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob})
	master, store := abandoned(t, state.Running)
	_, err := d.Abandon(context.Background(), master, "")
	require.ErrorContains(t, err, "say why")
	pod, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-1"})
	require.NoError(t, err)
	_, err = d.Start(context.Background(), pod, storage.Lease{Holder: "pod-1"})
	require.NoError(t, err)
	_, err = d.Abandon(context.Background(), pod, jobFailed)
	require.ErrorContains(t, err, "a controller's handle")
	var zero *recovery.Decider[state.Status]
	_, err = zero.Abandon(context.Background(), master, jobFailed)
	require.Error(t, err)
	_, err = d.Abandon(context.Background(), nil, jobFailed)
	require.Error(t, err)
}
