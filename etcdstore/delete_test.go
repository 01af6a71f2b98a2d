package etcdstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// Deletes racing one another each raise the epoch floor only above what
// it was: the floor is compared in the delete's transaction, so the
// highest epoch wins whatever order they land in, and an id created
// again is taken over above all of them.
func TestConcurrentDeletesNeverLowerTheEpochFloor(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	const n = 12
	revs := make([]uint64, n)
	for k := range n {
		rec := storagetest.Sample(fmt.Sprintf("ex-%d", k))
		rec.Epoch = uint64(10 + k)
		rec.History = storage.Trail{}
		created, err := s.Create(bg, rec)
		require.NoError(t, err)
		revs[k] = created.Revision
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for k := range n {
		wg.Go(func() { errs[k] = s.Delete(bg, fmt.Sprintf("ex-%d", k), revs[k]) })
	}
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "delete of ex-%d", k)
	}
	rec := storagetest.Sample("ex-0")
	rec.Epoch, rec.History = 0, storage.Trail{}
	_, err := s.Create(bg, rec)
	require.NoError(t, err)
	own, held, err := s.Acquire(bg, "ex-0", storagetest.Lease("pod-a"))
	require.NoError(t, err)
	require.Equal(t, uint64(10+n), held.Epoch, "above the highest epoch deleted (%d)", 10+n-1)
	require.NoError(t, own.Release(bg))
}

// A floor key that does not hold a number (written by hand) leaves no
// epoch safe to take over at: Delete and Acquire say so, matching
// ErrCorrupt and naming the key, and write nothing.
func TestADamagedEpochFloorIsReportedNotGuessed(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	rec, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	cl := client(t, shared)
	_, err = cl.Put(bg, s.Prefix()+"epoch-floor", "seven")
	require.NoError(t, err)
	err = s.Delete(bg, "ex-1", rec.Revision)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, s.Prefix()+"epoch-floor")
	_, _, err = s.Acquire(bg, "ex-1", storagetest.Lease("pod-a"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing written")
}
