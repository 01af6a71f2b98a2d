package boltstore_test

import (
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

func TestTableConformance(t *testing.T) {
	storagetest.RunTable(t, func(t *testing.T) storage.Store {
		_, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
		return s
	})
}

// The table's document is written through the log like a record: after
// a crash a read-only Open reads it from the log, a writable Open applies
// it to the file, and after Close the file alone holds it. It is never
// among the records.
func TestTheTableIsInTheLogThenInTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for _, id := range []string{"ex-1", "ex-2"} {
		_, err := s.Create(bg, storagetest.Sample(id))
		require.NoError(t, err)
	}
	recorded, err := schema.Save(bg, s, "teraslice", teraslice.Roles())
	require.NoError(t, err)
	doc, rev, err := s.Table(bg)
	require.NoError(t, err)
	db.Crash()

	requireTable := func(s *boltstore.Store) {
		t.Helper()
		got, gotRev, err := s.Table(bg)
		require.NoError(t, err)
		require.Equal(t, doc, got)
		require.Equal(t, rev, gotRev)
		loaded, err := schema.Load(bg, s)
		require.NoError(t, err)
		require.Equal(t, recorded, loaded)
		recs, bad, err := s.List(bg)
		require.NoError(t, err)
		require.Empty(t, bad)
		require.Len(t, recs, 2, "the table is no record")
	}
	ro, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	roStore, err := ro.Store("executions")
	require.NoError(t, err)
	requireTable(roStore)
	_, err = roStore.SetTable(bg, rev, []byte("v2"))
	require.ErrorIs(t, err, boltstore.ErrReadOnly)
	require.NoError(t, ro.Close())

	db, s = openStore(t, path, boltstore.Options{})
	requireTable(s)
	_, err = s.SetTable(bg, rev-1, []byte("stale"))
	require.ErrorIs(t, err, storage.ErrConflict)
	require.NoError(t, db.Check())
	require.NoError(t, db.Close())
	require.Empty(t, segments(t, path), "after Close the file alone holds everything")

	_, s = openStore(t, path, boltstore.Options{})
	requireTable(s)
}

func TestTableCompatibility(t *testing.T) {
	schematest.Run(t, func(t *testing.T) storage.Store {
		_, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
		return s
	})
}
