package etcdstore_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// A lease revoked in etcd behind the holder's back (an operator's
// `etcdctl lease revoke`, or the lease expiring in etcd): a write the
// holder sends before it has even noticed is not applied, because its
// transaction compares the lease. etcd's own guarantee, not the holder's
// clock.
func TestAWriteWhoseLeaseIsGoneInEtcdIsNotApplied(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	_, err := s.Create(bg, storage.Record{ID: "ex-1", Status: "running"})
	require.NoError(t, err)
	own, rec, err := s.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-a", TTL: time.Minute})
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Release(bg)) }()
	_, err = client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
	require.NoError(t, err)

	next := rec.Clone()
	next.Status = "completed"
	_, err = own.CompareAndSwap(bg, rec.Revision, next)
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced)
	require.True(t, fenced.Lost)
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing applied")
	select {
	case <-own.Lost():
	default:
		t.Fatal("a write that found the lease gone did not end the ownership")
	}
}

// The same through a Persisted: a Fire waits in a guard while etcd
// revokes the lease; nothing lands when the guard lets it go.
func TestAFireHeldInAGuardWhileEtcdRevokesTheLeaseLandsNothing(t *testing.T) {
	recoverytest.WriteHeldInAGuard(t, newStore(t, etcdstore.Options{}), recoverytest.Outage{
		End: func(t *testing.T, own storage.Ownership) {
			_, err := client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
			require.NoError(t, err)
		},
	})
}

// etcd is down longer than a controller's lease: the controller, alive
// all along, loses its ownership. Once etcd is back and nobody has taken
// the execution over, it takes it back at a new epoch without counting a
// restart, outage after outage.
func TestAControllerWhoseLeaseAnOutageEndedTakesItBackCountingNothing(t *testing.T) {
	c, err := embedded.Start(t.TempDir(), 1, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	s, err := etcdstore.New(client(t, c), etcdstore.Options{Timeout: 3 * time.Second})
	require.NoError(t, err)
	exec := recoverytest.TakeBackAfterOutages(t, s, recoverytest.Outage{
		// Two outages: each costs about half a minute here (a member
		// stops gracefully in seconds, a client reconnects after its
		// backoff); that no restart is counted is checked after each.
		Times: 2,
		TTL:   2 * time.Second,
		End: func(t *testing.T, own storage.Ownership) {
			c.Stop(0)
			select {
			case <-own.Lost(): // the client gave up keeping the lease alive
			case <-time.After(30 * time.Second):
				t.Fatal("the controller never learned it lost its lease")
			}
			require.NoError(t, c.Restart(0))
		},
	})
	require.NoError(t, exec.Ownership().Release(bg))
}
