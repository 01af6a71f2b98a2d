package storagetest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// RunTable runs the conformance tests of storage.TableKeeper against
// stores made by newStore, each test with a fresh, empty store, which
// must implement it.
func RunTable(t *testing.T, newStore func(t *testing.T) storage.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, storage.TableKeeper, storage.Store)
	}{
		{"NoTableIsNotFound", noTableIsNotFound},
		{"SetTableThenTableRoundTrips", setTableRoundTrips},
		{"SetTableAtAStaleRevisionConflicts", setTableAtStaleRevisionConflicts},
		{"ConcurrentSetTablesHaveOneWinner", concurrentSetTablesHaveOneWinner},
		{"TheTableIsNoRecord", theTableIsNoRecord},
		{"ABadDocumentIsRefused", aBadDocumentIsRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			keeper, ok := s.(storage.TableKeeper)
			require.True(t, ok, "%T does not implement storage.TableKeeper", s)
			tc.fn(t, keeper, s)
		})
	}
}

var bg = context.Background()

func noTableIsNotFound(t *testing.T, k storage.TableKeeper, _ storage.Store) {
	_, _, err := k.Table(bg)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func setTableRoundTrips(t *testing.T, k storage.TableKeeper, _ storage.Store) {
	doc := []byte(`{"format":1,"name":"teraslice"}`)
	rev, err := k.SetTable(bg, 0, doc)
	require.NoError(t, err)
	require.NotZero(t, rev)
	got, gotRev, err := k.Table(bg)
	require.NoError(t, err)
	require.Equal(t, doc, got)
	require.Equal(t, rev, gotRev)
	doc[0] = 'x'
	again, _, err := k.Table(bg)
	require.NoError(t, err)
	require.Equal(t, byte('{'), again[0], "the store keeps its own copy")

	next := bytes.Repeat([]byte("v"), storage.MaxTableLen)
	rev2, err := k.SetTable(bg, rev, next)
	require.NoError(t, err)
	require.Greater(t, rev2, rev)
	got, gotRev, err = k.Table(bg)
	require.NoError(t, err)
	require.Equal(t, next, got, "the largest document round-trips")
	require.Equal(t, rev2, gotRev)
}

func setTableAtStaleRevisionConflicts(t *testing.T, k storage.TableKeeper, _ storage.Store) {
	rev, err := k.SetTable(bg, 0, []byte("v1"))
	require.NoError(t, err)
	_, err = k.SetTable(bg, 0, []byte("again"))
	require.ErrorIs(t, err, storage.ErrConflict, "a table is kept already")
	_, err = k.SetTable(bg, rev+1000, []byte("future"))
	require.ErrorIs(t, err, storage.ErrConflict)
	got, gotRev, err := k.Table(bg)
	require.NoError(t, err)
	require.Equal(t, []byte("v1"), got, "nothing written")
	require.Equal(t, rev, gotRev)
}

func concurrentSetTablesHaveOneWinner(t *testing.T, k storage.TableKeeper, _ storage.Store) {
	rev, err := k.SetTable(bg, 0, []byte("v1"))
	require.NoError(t, err)
	const writers = 8
	var wg sync.WaitGroup
	wins := make(chan int, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := k.SetTable(bg, rev, []byte{'w', byte('0' + w)}); err == nil {
				wins <- w
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won []int
	for w := range wins {
		won = append(won, w)
	}
	require.Len(t, won, 1, "exactly one writer replaces the table it read")
	got, _, err := k.Table(bg)
	require.NoError(t, err)
	require.Equal(t, []byte{'w', byte('0' + won[0])}, got)
}

func theTableIsNoRecord(t *testing.T, k storage.TableKeeper, s storage.Store) {
	_, err := s.Create(bg, Sample("ex-1"))
	require.NoError(t, err)
	_, err = k.SetTable(bg, 0, []byte("v1"))
	require.NoError(t, err)
	if l, ok := s.(storage.Lister); ok {
		recs, bad, err := l.List(bg)
		require.NoError(t, err)
		require.Len(t, recs, 1, "List sees the records, not the table")
		require.Empty(t, bad)
	}
}

func aBadDocumentIsRefused(t *testing.T, k storage.TableKeeper, _ storage.Store) {
	for _, doc := range [][]byte{nil, {}, bytes.Repeat([]byte("v"), storage.MaxTableLen+1)} {
		_, err := k.SetTable(bg, 0, doc)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, "%d bytes", len(doc))
	}
	_, _, err := k.Table(bg)
	require.ErrorIs(t, err, storage.ErrNotFound, "nothing written")
	done, cancel := context.WithCancel(bg)
	cancel()
	_, err = k.SetTable(done, 0, []byte("v1"))
	require.Error(t, err, "a done context writes nothing")
	_, _, err = k.Table(bg)
	require.ErrorIs(t, err, storage.ErrNotFound)
}
