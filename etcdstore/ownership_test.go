package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
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
	s := newStore(t, etcdstore.Options{})
	entered, proceed := make(chan struct{}, 1), make(chan struct{})
	table, err := transition.New("queued").Allow("queued", "running").Allow("running", "done").Terminal("done").
		Guard("running", "done", func(context.Context, transition.Change[string]) error {
			select {
			case entered <- struct{}{}:
			default: // entered again (a retry): the test is already told
			}
			select {
			case <-proceed:
			case <-time.After(time.Minute):
			}
			return nil
		}).Build()
	require.NoError(t, err)
	_, err = s.Create(bg, storage.Record{ID: "ex-1", Status: "running"})
	require.NoError(t, err)
	exec, err := transition.NewPersisted(table, s, "ex-1", transition.PersistedOptions[string]{Actor: "pod-a"})
	require.NoError(t, err)
	_, _, err = exec.Acquire(bg, storage.Lease{Holder: "pod-a", TTL: time.Minute}, nil)
	require.NoError(t, err)
	defer func() { _ = exec.Ownership().Release(bg) }()
	fired := make(chan error, 1)
	go func() {
		_, err := exec.Fire(bg, "done", "finished")
		fired <- err
	}()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached its guard")
	}
	before, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	_, err = client(t, shared).Revoke(bg, exec.Ownership().(*etcdstore.Ownership).Lease())
	require.NoError(t, err)
	close(proceed)
	select {
	case err := <-fired:
		require.ErrorIs(t, err, storage.ErrFenced)
	case <-time.After(20 * time.Second):
		t.Fatal("the write did not return")
	}
	after, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision)
	require.Equal(t, "running", after.Status)
}

// etcd is down longer than a controller's lease: the controller, alive
// all along, loses its ownership. Once etcd is back and nobody has taken
// the execution over, it takes it back at a new epoch without counting a
// restart, three outages running.
func TestAControllerWhoseLeaseAnOutageEndedTakesItBackCountingNothing(t *testing.T) {
	c, err := embedded.Start(t.TempDir(), 1, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	s, err := etcdstore.New(client(t, c), etcdstore.Options{Timeout: 3 * time.Second})
	require.NoError(t, err)
	master, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1", transition.PersistedOptions[state.Status]{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.Update[state.Status]{To: state.Initializing})
	require.NoError(t, err)
	exec, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1", transition.PersistedOptions[state.Status]{Actor: "pod-a"})
	require.NoError(t, err)
	lease := storage.Lease{Holder: "pod-a", TTL: 2 * time.Second, Wait: true}
	policy := recovery.Policy[state.Status]{Restarts: true, Work: recovery.Restartability(true)}
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	_, err = recovery.ApplyStartup(ctx, state.Roles(), exec, lease, policy)
	require.NoError(t, err)
	_, err = exec.Fire(ctx, state.Running, "slicer ready")
	require.NoError(t, err)

	for outage := range 3 {
		lost := exec.Ownership().Lost()
		c.Stop(0)
		select {
		case <-lost:
		case <-time.After(30 * time.Second):
			t.Fatalf("outage %d: the controller never learned it lost its lease", outage)
		}
		require.NoError(t, c.Restart(0))
		before, err := s.Get(ctx, "ex-1")
		require.NoError(t, err)
		v, err := recovery.ApplyStartup(ctx, state.Roles(), exec, lease, policy)
		require.NoError(t, err, "outage %d", outage)
		require.Equal(t, recovery.DecisionResume, v.Decision)
		require.Zero(t, v.Restarts)
		rec, err := s.Get(ctx, "ex-1")
		require.NoError(t, err)
		require.Equal(t, "running", rec.Status)
		require.Empty(t, rec.Meta[recovery.MetaRestarts], "outage %d counted a restart", outage)
		require.Equal(t, before.Epoch+1, rec.Epoch)
		_, _, err = exec.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.Update[state.Status]{To: cur, Meta: map[string]string{"outage": "survived"}}, nil
		})
		require.NoError(t, err, "the controller drives it again")
	}
	require.NoError(t, exec.Ownership().Release(bg))
}
