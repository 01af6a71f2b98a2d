package recoverytest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// interposed is the store under test with the test standing between it
// and the code: it can write as another party just before a take-over,
// lose the answer to a take-over that landed, or cut the code off.
type interposed struct {
	storage.Store
	beforeAcquire func()      // run once, before the next Acquire reaches the store
	loseAnswer    atomic.Bool // the next Acquire lands, and its answer is lost
	cut           atomic.Bool // every call fails, as with the store out of reach
	calls         atomic.Int64
}

var errCut = errors.New("recoverytest: the store is out of reach")

func (s *interposed) reach() error {
	s.calls.Add(1)
	if s.cut.Load() {
		return errCut
	}
	return nil
}

func (s *interposed) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := s.reach(); err != nil {
		return storage.Record{}, err
	}
	return s.Store.Get(ctx, id)
}

func (s *interposed) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if err := s.reach(); err != nil {
		return storage.Record{}, err
	}
	return s.Store.CompareAndSwap(ctx, id, expect, next)
}

func (s *interposed) Held(ctx context.Context, id string) (storage.Claim, bool, error) {
	if err := s.reach(); err != nil {
		return storage.Claim{}, false, err
	}
	return s.Store.Held(ctx, id)
}

func (s *interposed) Acquire(ctx context.Context, id string, l storage.Lease) (storage.Ownership, storage.Record, error) {
	if err := s.reach(); err != nil {
		return nil, storage.Record{}, err
	}
	if f := s.beforeAcquire; f != nil {
		s.beforeAcquire = nil
		f()
	}
	own, rec, err := s.Store.Acquire(ctx, id, l)
	if err == nil && s.loseAnswer.CompareAndSwap(true, false) {
		// The take-over landed; the caller never hears of it, and
		// nobody keeps its ownership alive (an etcd client that timed
		// out revokes its lease, a Lease nobody renews expires).
		_ = own.Release(context.WithoutCancel(ctx))
		return nil, storage.Record{}, fmt.Errorf("recoverytest: the answer to the take-over was lost: %w", context.DeadlineExceeded)
	}
	return own, rec, err
}

// requireUntouched fails unless the record is as before, owned by
// nobody new, with no live holder.
func requireUntouched(t *testing.T, store storage.Store, before storage.Record, why string) {
	t.Helper()
	after := get(t, store, before.ID)
	require.Equal(t, before.Revision, after.Revision, "%s: nothing written", why)
	require.Equal(t, before.Claim(), after.Claim(), "%s: the claim is as it was", why)
	require.Equal(t, before.History.Len(), after.History.Len(), "%s: no audit entry", why)
	_, held, err := store.Held(bounded(t), before.ID)
	require.NoError(t, err)
	require.False(t, held, "%s: nothing held", why)
}

// The cluster master fails the execution between the controller's
// decision and its take-over: the start decides again on the failed
// record, refuses it, and has written and holds nothing.
func startMeetingTerminalWritesNothing(t *testing.T, store storage.Store) {
	m := master(t, store, "ex-1", state.Running)
	s := &interposed{Store: store}
	var failed storage.Record
	s.beforeAcquire = func() {
		_, err := m.Fire(bounded(t), state.Failed, "the cluster master failed it")
		require.NoError(t, err)
		failed = get(t, store, "ex-1")
	}
	v, exec, err := startup(t, s, "ex-1", "pod-a", lease(""))
	require.ErrorIs(t, err, recovery.ErrTerminalStatus)
	require.Equal(t, recovery.DecisionRefuse, v.Decision)
	require.Equal(t, state.Failed, v.From)
	require.NotZero(t, failed.Revision, "the master's write ran between the decision and the take-over")
	requireUntouched(t, store, failed, "a start that met a terminal status")
	require.Nil(t, exec.Ownership(), "the controller owns nothing")
	require.ErrorIs(t, probe(bounded(t), exec, "late"), storage.ErrFenced, "and cannot write")
}

// A verdict that cannot be written (here: the record's metadata is full,
// and the start adds to it) leaves nothing written and nothing held.
func startWithUnwritableVerdictWritesNothing(t *testing.T, store storage.Store) {
	m, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	full := map[string]string{}
	for k := range storage.MaxMetaEntries {
		full[fmt.Sprintf("k%d", k)] = "v"
	}
	_, err = m.Create(bounded(t), transition.Update[state.Status]{To: state.Running, Reason: "submitted", Meta: full})
	require.NoError(t, err)
	before := get(t, store, "ex-1")
	_, exec, err := startup(t, store, "ex-1", "pod-a", lease(""))
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	requireUntouched(t, store, before, "a start whose verdict could not be written")
	require.Nil(t, exec.Ownership())
}

// The live holder calls Decider.Start again, as a controller retrying its
// startup would: the verdict already written comes back, nothing is
// written, nothing counted, however often.
func retriedStartByLiveHolder(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Running) // its controller was OOM-killed
	exec := controller(t, store, "ex-1", "pod-a")
	first, err := start(t, exec, "pod-a", lease(""))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, first.Decision)
	require.Equal(t, 1, first.Failovers)
	written := get(t, store, "ex-1")
	for k := range 4 {
		again, err := start(t, exec, "pod-a", lease(""))
		require.NoError(t, err, "retry %d", k)
		require.Equal(t, first.Decision, again.Decision, "retry %d", k)
		require.Equal(t, first.From, again.From)
		require.Equal(t, first.To, again.To)
		require.Equal(t, first.Reason, again.Reason)
		require.Equal(t, first.Failovers, again.Failovers)
		require.Equal(t, first.FailoverAllowance, again.FailoverAllowance)
		now := get(t, store, "ex-1")
		require.Equal(t, written.Revision, now.Revision, "retry %d wrote nothing", k)
	}
	require.NoError(t, probe(bounded(t), exec, "still drives it"))

	// A Fail verdict is replayed too, not refused as terminal.
	master(t, store, "ex-2", state.Running)
	failing := controller(t, store, "ex-2", "pod-a")
	p := policy()
	p.Work = recovery.Restartability(false)
	l := lease("pod-a")
	v, err := decide(t, p).Start(bounded(t), failing, l)
	require.NoError(t, err)
	releaseAtEnd(t, failing)
	require.Equal(t, recovery.DecisionFail, v.Decision)
	again, err := decide(t, p).Start(bounded(t), failing, l)
	require.NoError(t, err)
	require.Equal(t, v.Decision, again.Decision)
	require.Equal(t, v.To, again.To)
}

// The answer to a start that landed is lost (a timeout): the controller
// retries with the same handle, recognises its own take-over in the
// record, and takes the execution back without counting a restart.
func retriedStartAfterUnknownOutcome(t *testing.T, store storage.Store) {
	master(t, store, "ex-1", state.Running) // its controller was OOM-killed
	s := &interposed{Store: store}
	s.loseAnswer.Store(true)
	exec := controller(t, s, "ex-1", "pod-a")
	_, err := start(t, exec, "pod-a", lease(""))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	landed := get(t, store, "ex-1")
	require.Equal(t, "pod-a", landed.Owner, "the start landed")
	counted := landed.Meta[recovery.MetaFailovers]
	require.NotEmpty(t, counted, "and counted the OOM kill")

	v, err := start(t, exec, "pod-a", lease(""))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Zero(t, v.Failovers, "the retry counted nothing")
	rec := get(t, store, "ex-1")
	require.Equal(t, counted, rec.Meta[recovery.MetaFailovers], "one restart counted in all")
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: landed.Epoch + 1}, rec.Claim(), "taken back at a new epoch")
	require.Equal(t, rec.Claim(), exec.Claim())
	require.NoError(t, probe(bounded(t), exec, "drives it"))
}
