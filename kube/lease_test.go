package kube_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lease(holder string, ttl time.Duration) storage.Lease {
	return storage.Lease{Holder: holder, TTL: ttl}
}

// takenOver returns pod's handle on execution id, taken over with l.
func takenOver(t *testing.T, s storage.Store, id, pod string, l storage.Lease) *transition.Persisted[state.Status] {
	t.Helper()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, id, transition.PersistedOptions{Actor: pod})
	require.NoError(t, err)
	_, _, err = exec.Acquire(bg, l, nil)
	require.NoError(t, err)
	return exec
}

func TestLeaseHeldByALiveControllerCannotBeTaken(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	a, _, err := s.Acquire(bg, "ex-1", lease("pod-a", 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 4}, a.Claim(), "the epoch continues from the record's (3)")
	l, err := clientset.CoordinationV1().Leases(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "pod-a", *l.Spec.HolderIdentity)
	require.Equal(t, int32(4), *l.Spec.LeaseTransitions, "the epoch is leaseTransitions")

	_, _, err = s.Acquire(bg, "ex-1", lease("pod-b", 10*time.Second))
	require.ErrorIs(t, err, storage.ErrHeld)
	require.Contains(t, err.Error(), "pod-a")

	require.NoError(t, a.Release(bg))
	b, _, err := s.Acquire(bg, "ex-1", lease("pod-b", 10*time.Second))
	require.NoError(t, err, "a released Lease is taken at once")
	require.Equal(t, uint64(5), b.Claim().Epoch)
	require.NoError(t, b.Release(bg))
}

// A holder that died stops renewing; once its Lease is older than its
// duration the next controller takes over and the dead one is fenced.
func TestExpiredLeaseIsTakenOverAndTheOldHolderFenced(t *testing.T) {
	s := newStore(t)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Running))
	require.NoError(t, err)
	podA := takenOver(t, s, "ex-1", "pod-a", lease("pod-a", 10*time.Second))
	// pod-a dies: make its Lease look unrenewed for longer than its
	// duration, as it would after the process was gone that long.
	leases := clientset.CoordinationV1().Leases(s.Namespace())
	l, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	stale := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	l.Spec.RenewTime = &stale
	_, err = leases.Update(bg, l, metav1.UpdateOptions{})
	require.NoError(t, err)

	podB := takenOver(t, s, "ex-1", "pod-b", lease("pod-b", 10*time.Second))
	defer func() { require.NoError(t, podB.Ownership().Release(bg)) }()
	require.Equal(t, podA.Claim().Epoch+1, podB.Claim().Epoch)
	select {
	case <-podA.Ownership().Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("pod-a never learned it lost the Lease")
	}
	_, err = podA.Fire(bg, state.Failed, "old holder")
	require.ErrorIs(t, err, storage.ErrFenced)
	_, err = podB.Fire(bg, state.Paused, "new holder")
	require.NoError(t, err)
	require.NoError(t, podA.Ownership().Release(bg), "releasing a Lease someone else holds is a no-op")
	got, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "pod-b", *got.Spec.HolderIdentity)
}

// A controller restarted after a crash waits for the dead holder's Lease
// to expire, on its own, and takes over then.
func TestWaitingAcquireTakesOverWhenTheLeaseExpires(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storagetest.Unowned("ex-1"))
	require.NoError(t, err)
	a, _, err := s.Acquire(bg, "ex-1", lease("pod-a", 2*time.Second))
	require.NoError(t, err)
	// pod-a's process freezes: it stops renewing, and its Lease keeps
	// its last renewal.
	leases := clientset.CoordinationV1().Leases(s.Namespace())
	frozen, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, a.Release(bg)) // stops renewing; then pod-a's last renewal is put back
	cur, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	cur.Spec = frozen.Spec
	_, err = leases.Update(bg, cur, metav1.UpdateOptions{})
	require.NoError(t, err)

	l := lease("pod-b", 2*time.Second)
	l.Wait = true
	start := time.Now()
	b, rec, err := s.Acquire(bg, "ex-1", l)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Release(bg)) }()
	t.Logf("took over %v after the last renewal", time.Since(frozen.Spec.RenewTime.Time).Round(time.Millisecond))
	require.GreaterOrEqual(t, time.Since(frozen.Spec.RenewTime.Time), 2*time.Second, "not before the Lease expired")
	require.Less(t, time.Since(start), 30*time.Second)
	require.Equal(t, uint64(2), rec.Epoch)
}

func TestAcquireRefusesBadArguments(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	for _, l := range []storage.Lease{lease("", time.Minute), lease("pod", -time.Second),
		lease("pod", time.Millisecond), lease("pod", 2*time.Hour)} {
		_, _, err = s.Acquire(bg, "ex-1", l)
		require.ErrorIs(t, err, storage.ErrInvalidLease, "%+v", l)
	}
	_, _, err = s.Acquire(bg, "nope", lease("pod", time.Minute))
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// An outside authority writes the record between Acquire taking the
// Lease and writing its take-over: the record write conflicts. Acquire
// must take the record over all the same, and never leave the Lease taken
// with nobody renewing it (which refused every acquirer, the same holder's
// next attempt included, as "held", until the Lease expired).
func TestAcquireWhoseRecordWriteConflictsStillTakesOver(t *testing.T) {
	s := newStore(t)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)
	writes := 0
	kube.SetBeforeTakeOverWrite(s, func() {
		if writes < 3 { // more than once: every retry meets a conflict too
			writes++
			next := []state.Status{state.Scheduling, state.Initializing, state.Running}[writes-1]
			_, err := master.Fire(bg, next, "the cluster master moves it meanwhile")
			require.NoError(t, err)
		}
	})
	a, rec, err := s.Acquire(bg, "ex-1", lease("pod-a", 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, 3, writes)
	require.Equal(t, "pod-a", rec.Owner)
	require.Equal(t, a.Claim(), rec.Claim())
	require.Equal(t, state.Running.String(), rec.Status, "the take-over is written over the master's moves")
	kube.SetBeforeTakeOverWrite(s, nil)

	_, _, err = s.Acquire(bg, "ex-1", lease("pod-b", 10*time.Second))
	var held *storage.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, "pod-a", held.Holder)
	require.NoError(t, a.Release(bg))
	b, _, err := s.Acquire(bg, "ex-1", lease("pod-b", 10*time.Second))
	require.NoError(t, err, "the released Lease is free: nothing was left behind by the conflicting attempts")
	require.Greater(t, b.Claim().Epoch, a.Claim().Epoch)
	require.NoError(t, b.Release(bg))
}
