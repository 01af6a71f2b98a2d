package kube_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/storetest"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeaseHeldByALiveControllerCannotBeTaken(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storetest.Sample("ex-1"))
	require.NoError(t, err)
	a, err := s.Acquire(bg, "ex-1", "pod-a", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, transition.Claim{Owner: "pod-a", Epoch: 4}, a.Claim, "the epoch continues from the record's (3)")
	lease, err := clientset.CoordinationV1().Leases(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "pod-a", *lease.Spec.HolderIdentity)
	require.Equal(t, int32(4), *lease.Spec.LeaseTransitions, "the epoch is leaseTransitions")

	_, err = s.Acquire(bg, "ex-1", "pod-b", 10*time.Second)
	require.ErrorIs(t, err, kube.ErrHeld)
	require.Contains(t, err.Error(), "pod-a")

	require.NoError(t, a.Release(bg))
	b, err := s.Acquire(bg, "ex-1", "pod-b", 10*time.Second)
	require.NoError(t, err, "a released Lease is taken at once")
	require.Equal(t, uint64(5), b.Claim.Epoch)
	require.NoError(t, b.Release(bg))
}

// A holder that died stops renewing; once its Lease is older than its
// duration the next controller takes over and the dead one is fenced.
func TestExpiredLeaseIsTakenOverAndTheOldHolderFenced(t *testing.T) {
	s := newStore(t)
	exec, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1")
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.Update[state.Status]{To: state.Running})
	require.NoError(t, err)
	a, err := s.Acquire(bg, "ex-1", "pod-a", 10*time.Second)
	require.NoError(t, err)
	// pod-a dies: make its Lease look unrenewed for longer than its
	// duration, as it would after the process was gone that long.
	leases := clientset.CoordinationV1().Leases(s.Namespace())
	lease, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	stale := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	lease.Spec.RenewTime = &stale
	_, err = leases.Update(bg, lease, metav1.UpdateOptions{})
	require.NoError(t, err)

	b, err := s.Acquire(bg, "ex-1", "pod-b", 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Release(bg)) }()
	require.Equal(t, a.Claim.Epoch+1, b.Claim.Epoch)
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("pod-a never learned it lost the Lease")
	}
	_, err = exec.WithClaim(a.Claim).Fire(bg, state.Failed, "old holder")
	require.ErrorIs(t, err, transition.ErrFenced)
	_, err = exec.WithClaim(b.Claim).Fire(bg, state.Paused, "new holder")
	require.NoError(t, err)
	require.NoError(t, a.Release(bg), "releasing a Lease someone else holds is a no-op")
	got, err := leases.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "pod-b", *got.Spec.HolderIdentity)
}

func TestAcquireRefusesBadArguments(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storetest.Sample("ex-1"))
	require.NoError(t, err)
	_, err = s.Acquire(bg, "ex-1", "", time.Minute)
	require.ErrorIs(t, err, transition.ErrInvalidRecord)
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond, 2 * time.Hour} {
		_, err = s.Acquire(bg, "ex-1", "pod", d)
		require.ErrorContains(t, err, "lease duration", "%v", d)
	}
	_, err = s.Acquire(bg, "nope", "pod", time.Minute)
	require.ErrorIs(t, err, transition.ErrNotFound)
}
