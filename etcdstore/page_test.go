package etcdstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

var statuses = []string{"running", "relocating", "completed", "failed"}

// byStatus lists the store page by page, once per status, and once
// whole, grouping the whole list by status: the two must agree.
func byStatus(t *testing.T, s *etcdstore.Store) (paged, listed map[string][]string) {
	t.Helper()
	paged, listed = map[string][]string{}, map[string][]string{}
	for _, status := range statuses {
		recs, bad, err := storage.ListAll(bg, s, 7, status)
		require.NoError(t, err)
		require.Empty(t, bad)
		for _, rec := range recs {
			require.Equal(t, status, rec.Status)
			paged[status] = append(paged[status], rec.ID)
		}
	}
	recs, _, err := s.List(bg)
	require.NoError(t, err)
	for _, rec := range recs {
		listed[rec.Status] = append(listed[rec.Status], rec.ID)
	}
	return paged, listed
}

// Writers racing on the same records, each read-then-write moving a
// record to another status, through stores of their own (nothing shared
// but etcd): the index always says what the records say.
func TestTheStatusIndexHoldsUnderRacingWriters(t *testing.T) {
	first := newStore(t, etcdstore.Options{})
	for k := range 12 {
		rec := storagetest.Sample(fmt.Sprintf("ex-%02d", k))
		rec.Status = statuses[k%len(statuses)]
		_, err := first.Create(bg, rec)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		s, err := etcdstore.New(client(t, shared), etcdstore.Options{Prefix: first.Prefix()})
		require.NoError(t, err)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 40 {
				id := fmt.Sprintf("ex-%02d", rng.IntN(12))
				rec, err := s.Get(bg, id)
				if err != nil {
					errs <- err
					return
				}
				rec.Status = statuses[rng.IntN(len(statuses))]
				if _, err := s.CompareAndSwap(bg, id, rec.Revision, rec); err != nil && !errors.Is(err, storage.ErrConflict) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	paged, listed := byStatus(t, first)
	require.Equal(t, listed, paged)
}

// A repair (a write at the revision of a value that does not decode)
// moves the record's index key from the status it had to the one
// written.
func TestARepairMovesTheIndex(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	rec := storagetest.Sample("ex-1")
	rec.Status = "running"
	rec, err := s.Create(bg, rec)
	require.NoError(t, err)
	put, err := client(t, shared).Put(bg, s.Prefix()+"records/ex-1", "\x09future format")
	require.NoError(t, err)
	repair, err := etcdstore.New(client(t, shared), etcdstore.Options{Prefix: s.Prefix()}) // has seen nothing
	require.NoError(t, err)
	rec.Status = "failed"
	_, err = repair.CompareAndSwap(bg, "ex-1", uint64(put.Header.Revision), rec)
	require.NoError(t, err)
	paged, _ := byStatus(t, s)
	require.Equal(t, map[string][]string{"failed": {"ex-1"}}, paged)
	require.False(t, slices.Contains(paged["running"], "ex-1"))
}
