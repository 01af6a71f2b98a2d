package recovery_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// execIn returns the execution id of store in status s, written by the
// cluster master.
func execIn(t *testing.T, store storage.Store, id string, s state.Status) *transition.Persisted[state.Status] {
	t.Helper()
	exec := handle(t, store, id, "master")
	_, err := exec.Create(context.Background(), transition.To(s).Because("test"))
	require.NoError(t, err)
	return exec
}

func handle(t *testing.T, store storage.Store, id, actor string) *transition.Persisted[state.Status] {
	t.Helper()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: actor})
	require.NoError(t, err)
	return exec
}

// The whole of a rerun: the failed execution is left as it was, the new
// one points to it and is listed as its rerun, and its controller's
// startup takes the recovering path to the end.
func TestRerunCreatesALinkedExecutionThatStartsRecovering(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	old := execIn(t, store, "ex-1", state.Failed)
	execIn(t, store, "ex-0", state.Completed) // another execution, not a rerun
	before, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)

	rec, err := recovery.Rerun(ctx, teraslice.Roles(), old, handle(t, store, "ex-2", "master"),
		recovery.RerunOptions{SliceType: "pending", Meta: map[string]string{"job": "j-7"}})
	require.NoError(t, err)
	require.Equal(t, "pending", rec.Status, "a rerun starts pending, queued like any execution")
	require.Equal(t, "reruns ex-1", rec.Reason)
	require.Equal(t, "pending", rec.Meta[recovery.MetaRerunSliceType])
	require.Equal(t, "j-7", rec.Meta["job"])
	from, ok := recovery.RerunOf(rec)
	require.True(t, ok)
	require.Equal(t, "ex-1", from)

	after, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, before, after, "the execution rerun is never touched")

	// Recovered a second time: both are listed, in id order.
	_, err = recovery.Rerun(ctx, teraslice.Roles(), old, handle(t, store, "ex-3", "master"), recovery.RerunOptions{})
	require.NoError(t, err)
	recs, unreadable, err := recovery.Reruns(ctx, store, "ex-1")
	require.NoError(t, err)
	require.Empty(t, unreadable)
	require.Equal(t, []string{"ex-2", "ex-3"}, ids(recs))
	recs, _, err = recovery.Reruns(ctx, store, "ex-0")
	require.NoError(t, err)
	require.Empty(t, recs)

	// The master schedules it; its controller starts and learns it reruns ex-1.
	master := handle(t, store, "ex-2", "master")
	for _, s := range []state.Status{state.Scheduling, state.Initializing} {
		_, err := master.Fire(ctx, s, "placed")
		require.NoError(t, err)
	}
	exec := handle(t, store, "ex-2", "pod-a")
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(ctx, exec, lease("pod-a"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStart, v.Decision)
	require.Equal(t, "ex-1", v.RerunOf)
	_, err = exec.Fire(ctx, state.Recovering, "re-processing what ex-1 left unfinished")
	require.NoError(t, err)

	// A crash while recovering resumes recovering, still knowing what it reruns.
	require.NoError(t, exec.Ownership().Release(ctx))
	exec = handle(t, store, "ex-2", "pod-b")
	v, err = decider(t, teraslice.Roles(), policy()).Start(ctx, exec, lease("pod-b"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, state.Recovering, v.To)
	require.Equal(t, "ex-1", v.RerunOf)

	_, err = exec.Fire(ctx, state.Running, "recovered work done")
	require.NoError(t, err)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(ctx, exec, recovery.Ending{Finished: true}, nil)
	require.NoError(t, err)
	require.Equal(t, state.Completed, end.To)
}

func TestRerunEveryEndedStatus(t *testing.T) {
	for s := range state.TerminalStatuses.All() {
		store := storage.NewMemory()
		_, err := recovery.Rerun(context.Background(), teraslice.Roles(), execIn(t, store, "ex-1", s), handle(t, store, "ex-2", "master"), recovery.RerunOptions{})
		require.NoError(t, err, "%s", s)
	}
}

func TestRerunRefusesALiveExecutionAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	for s := range state.All.All() {
		if s.IsTerminal() {
			continue
		}
		store := storage.NewMemory()
		old := execIn(t, store, "ex-1", s)
		before, _ := store.Get(ctx, "ex-1")
		_, err := recovery.Rerun(ctx, teraslice.Roles(), old, handle(t, store, "ex-2", "master"), recovery.RerunOptions{})
		require.ErrorIs(t, err, recovery.ErrNotEnded, "%s", s)
		require.Contains(t, err.Error(), `execution "ex-1" is `+s.String()+": execution has not ended; only an ended execution can be rerun")
		_, err = store.Get(ctx, "ex-2")
		require.ErrorIs(t, err, storage.ErrNotFound, "nothing created for a live %s execution", s)
		after, _ := store.Get(ctx, "ex-1")
		require.Equal(t, before, after)
	}
}

func TestRerunRefusesInputItCannotHonour(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	old := execIn(t, store, "ex-1", state.Failed)
	taken := execIn(t, store, "ex-2", state.Pending)

	_, err := recovery.Rerun(ctx, teraslice.Roles(), old, taken, recovery.RerunOptions{})
	require.ErrorIs(t, err, storage.ErrExists, "the new id must be new")

	_, err = recovery.Rerun(ctx, teraslice.Roles(), old, handle(t, store, "ex-1", "master"), recovery.RerunOptions{})
	require.ErrorContains(t, err, "cannot rerun itself")

	_, err = recovery.Rerun(ctx, teraslice.Roles(), old, handle(t, store, "ex-3", "master"),
		recovery.RerunOptions{Meta: map[string]string{recovery.MetaRerunOf: "ex-9"}})
	require.ErrorContains(t, err, "which Rerun writes")

	_, err = recovery.Rerun(ctx, nil, old, handle(t, store, "ex-3", "master"), recovery.RerunOptions{})
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	_, err = recovery.Rerun(ctx, teraslice.Roles(), nil, handle(t, store, "ex-3", "master"), recovery.RerunOptions{})
	require.Error(t, err)

	_, err = store.Get(ctx, "ex-3")
	require.ErrorIs(t, err, storage.ErrNotFound, "no refused rerun wrote anything")
	_, _, err = recovery.Reruns(ctx, nil, "ex-1")
	require.Error(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = recovery.Rerun(cancelled, teraslice.Roles(), old, handle(t, store, "ex-3", "master"), recovery.RerunOptions{})
	require.ErrorIs(t, err, context.Canceled)
}

func ids(recs []storage.Record) []string {
	out := make([]string, len(recs))
	for k, r := range recs {
		out[k] = r.ID
	}
	return out
}
