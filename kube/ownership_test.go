package kube_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// cuttable is one controller's connection to the API server, which the
// test can cut (a network partition between that pod and the API
// server) and mend; the API server itself runs on.
type cuttable struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("kube test: the network between this controller and the API server is cut")
	}
	return c.rt.RoundTrip(r)
}

// partitionable returns a store in namespace ns reached over its own
// connection, and the switch that cuts it.
func partitionable(t *testing.T, ns string) (*kube.Store, *atomic.Bool) {
	t.Helper()
	cut := &atomic.Bool{}
	c := rest.CopyConfig(storeCfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cuttable{rt: rt, cut: cut} }
	cs, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	s, err := kube.New(cs, kube.Options{Namespace: ns, Timeout: 2 * time.Second})
	require.NoError(t, err)
	return s, cut
}

// The cluster master fails the execution between the two Kubernetes
// writes of a start (the Lease, then the record): the start decides again
// on the failed record, refuses it, and leaves the record as the master
// wrote it and the Lease free.
func TestAStartMeetingATerminalStatusBetweenTheLeaseAndTheRecordWritesNothing(t *testing.T) {
	s := newStore(t)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Running))
	require.NoError(t, err)
	var failed storage.Record
	kube.SetBeforeTakeOverWrite(s, func() {
		kube.SetBeforeTakeOverWrite(s, nil)
		_, err := master.Fire(bg, state.Failed, "the cluster master failed it")
		require.NoError(t, err)
		failed, err = s.Get(bg, "ex-1")
		require.NoError(t, err)
	})
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{Actor: "pod-a"})
	require.NoError(t, err)
	v, err := decider(t, teraslice.Roles(),
		recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}).Start(bg, exec, lease("pod-a", 10*time.Second))

	require.ErrorIs(t, err, recovery.ErrTerminalStatus)
	require.Equal(t, recovery.DecisionRefuse, v.Decision)
	require.NotZero(t, failed.Revision, "the master wrote between the Lease and the record")
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, failed.Revision, got.Revision, "the record is as the master left it")
	require.Empty(t, got.Owner)
	_, held, err := s.Held(bg, "ex-1")
	require.NoError(t, err)
	require.False(t, held, "the Lease taken for the refused start was let go")
	l, err := clientset.CoordinationV1().Leases(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, l.Spec.HolderIdentity)
}

// cutOff ends the ownership of a controller reached through a
// partitionable store: its network is cut until the Lease has expired by
// its own clock, then mended.
func cutOff(cut *atomic.Bool) func(t *testing.T, own storage.Ownership) {
	return func(t *testing.T, own storage.Ownership) {
		cut.Store(true)
		defer cut.Store(false)
		select {
		case <-own.Lost():
		case <-time.After(30 * time.Second):
			t.Fatal("the ownership did not end when the Lease expired")
		}
	}
}

// A Fire waits in a guard while the controller is cut off from the API
// server longer than its Lease: its ownership ends by its own clock, and
// when the guard lets the write go (the network mended) nothing lands.
func TestAFireHeldInAGuardWhileTheLeaseExpiresLandsNothing(t *testing.T) {
	s, cut := partitionable(t, namespace(t))
	recoverytest.WriteHeldInAGuard(t, s, recoverytest.Outage{TTL: 2 * time.Second, End: cutOff(cut)})
}

// A controller cut off from the API server longer than its Lease, alive
// all along, loses its ownership. Once the network is mended and nobody
// has taken the execution over, it takes it back at a new epoch without
// counting a restart, outage after outage.
func TestAControllerWhoseLeaseAnOutageEndedTakesItBackCountingNothing(t *testing.T) {
	s, cut := partitionable(t, namespace(t))
	exec := recoverytest.TakeBackAfterOutages(t, s, recoverytest.Outage{TTL: 2 * time.Second, End: cutOff(cut)})
	require.NoError(t, exec.Ownership().Release(bg))
}

// A take-over between its two writes (the Lease taken, the record not
// yet) fails when the cluster master moves the record meanwhile. Another
// controller asking in between is not told the execution is held: it
// waits for the outcome, and takes the execution when nobody held it.
func TestAnAcquireDuringATakeOverThatFailsIsNotToldHeld(t *testing.T) {
	s := newStore(t)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Running))
	require.NoError(t, err)
	rec, err := s.Get(bg, "ex-1")
	require.NoError(t, err)

	second := make(chan error, 1)
	kube.SetBeforeTakeOverWrite(s, func() {
		kube.SetBeforeTakeOverWrite(s, nil)
		go func() {
			own, _, err := s.Acquire(bg, "ex-1", lease("pod-b", 10*time.Second))
			if err == nil {
				defer func() { _ = own.Release(bg) }()
			}
			second <- err
		}()
		time.Sleep(200 * time.Millisecond) // pod-b looks while pod-a is between its two writes
		_, err := master.Fire(bg, state.Stopping, "user stop")
		require.NoError(t, err)
	})
	l := lease("pod-a", 10*time.Second)
	l.Move = &storage.Move{Revision: rec.Revision, Status: rec.Status, Meta: rec.Meta}
	_, _, err = s.Acquire(bg, "ex-1", l)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict, "pod-a decided on a record that moved on")
	select {
	case err := <-second:
		require.NoError(t, err, "pod-b was told of a holder that never held the execution")
	case <-time.After(30 * time.Second):
		t.Fatal("pod-b never got an answer")
	}
}

// A manager cut off from the API server longer than its Lease loses it,
// and with it every execution held under it; the next manager takes them
// over once the Lease has expired.
func TestAManagersExecutionsEndWithItsExpiredLease(t *testing.T) {
	s, cut := partitionable(t, namespace(t))
	recoverytest.ManagerLosesItsLease(t, s, recoverytest.Outage{TTL: 2 * time.Second, End: cutOff(cut)})
}
