package boltstore_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// Two Closes at once: neither returns before the log is applied and
// removed and the file released, as Close promises.
func TestASecondCloseWaitsForTheFirst(t *testing.T) {
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "db")
		db, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		s, err := db.Store("executions")
		require.NoError(t, err)
		for k := range 300 { // a log for Close to apply
			_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		left := make([][]string, 2)
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = db.Close()
				left[k] = segments(t, path)
			}()
		}
		wg.Wait()
		for k := range 2 {
			require.NoError(t, errs[k], "round %d, Close %d", round, k)
			require.Empty(t, left[k], "round %d: Close %d returned with the log still beside the file", round, k)
		}
		raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
		require.NoError(t, err, "the file is released")
		require.NoError(t, raw.Close())
	}
}

// A nil *Store in a storage.Store (a store never opened) is an error
// where it is handed over, and on every call: never a panic.
func TestANilStoreIsAnErrorNotAPanic(t *testing.T) {
	var s *boltstore.Store
	_, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1", transition.PersistedOptions[state.Status]{})
	require.ErrorContains(t, err, "nil store")
	_, err = s.Get(bg, "ex-1")
	require.ErrorContains(t, err, "nil *Store")
	_, err = s.CompareAndSwap(bg, "ex-1", 1, storagetest.Sample("ex-1"))
	require.Error(t, err)
	_, _, err = s.Acquire(bg, "ex-1", storagetest.Lease("pod-a"))
	require.Error(t, err)
	_, _, err = s.Held(bg, "ex-1")
	require.Error(t, err)
	_, _, err = s.List(bg)
	require.Error(t, err)
	_, err = s.Watch(bg, 0)
	require.Error(t, err)
}
