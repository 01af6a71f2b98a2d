package boltstore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The conformance suite again with every write applied to the file at
// once: the status index is bbolt's, not the log's, for most reads.
func TestConformanceCheckpointingEveryWrite(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
		db.CheckpointEvery(1)
		return s
	})
}

// listed returns the ids of the records in status, through pages of 3.
func listed(t *testing.T, s *boltstore.Store, status string) []string {
	t.Helper()
	recs, bad, err := storage.ListAll(bg, s, 3, status)
	require.NoError(t, err)
	require.Empty(t, bad)
	var ids []string
	for _, rec := range recs {
		require.Equal(t, status, rec.Status)
		ids = append(ids, rec.ID)
	}
	return ids
}

// A page merges the index in the file with the log's writes not yet
// applied (moves, deletes, new records), and says the same after a
// reopen and to a read-only reader.
func TestAPageMergesTheFilesIndexWithTheLog(t *testing.T) {
	for name, settle := range map[string]func(db *boltstore.DB) error{
		"closed":  func(db *boltstore.DB) error { return db.Close() },
		"crashed": func(db *boltstore.DB) error { db.Crash(); return nil }, // the log replayed at Open
	} {
		t.Run(name, func(t *testing.T) { pageMergesTheIndexWithTheLog(t, settle) })
	}
}

func pageMergesTheIndexWithTheLog(t *testing.T, settle func(db *boltstore.DB) error) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	revs := map[string]uint64{}
	for k := range 10 {
		rec, err := s.Create(bg, withStatus(fmt.Sprintf("ex-%d", k), "running"))
		require.NoError(t, err)
		revs[rec.ID] = rec.Revision
	}
	require.NoError(t, db.Checkpoint())
	for _, id := range []string{"ex-2", "ex-5", "ex-7"} {
		rec, err := s.Get(bg, id)
		require.NoError(t, err)
		rec.Status = "completed"
		_, err = s.CompareAndSwap(bg, id, rec.Revision, rec)
		require.NoError(t, err)
	}
	require.NoError(t, s.Delete(bg, "ex-3", revs["ex-3"]))
	for _, id := range []string{"ex-10", "ex-11"} {
		_, err := s.Create(bg, withStatus(id, "running"))
		require.NoError(t, err)
	}
	running := []string{"ex-0", "ex-1", "ex-10", "ex-11", "ex-4", "ex-6", "ex-8", "ex-9"}
	completed := []string{"ex-2", "ex-5", "ex-7"}
	require.Equal(t, running, listed(t, s, "running"))
	require.Equal(t, completed, listed(t, s, "completed"))
	require.NoError(t, settle(db))

	for _, readOnly := range []bool{true, false} {
		again, err := boltstore.Open(path, boltstore.Options{ReadOnly: readOnly})
		require.NoError(t, err)
		s, err := again.Store("executions")
		require.NoError(t, err)
		require.Equal(t, running, listed(t, s, "running"), "read-only %v", readOnly)
		require.Equal(t, completed, listed(t, s, "completed"))
		require.NoError(t, again.Close())
	}
}

func withStatus(id, status string) storage.Record {
	rec := storagetest.Sample(id)
	rec.Status = status
	return rec
}

// A file an older build wrote has no status index: a read-only reader
// is told to open it writable once, and a writable Open builds it from
// the records.
func TestAFileWithoutTheIndexGetsOneWhenOpenedWritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 4 {
		_, err := s.Create(bg, withStatus(fmt.Sprintf("ex-%d", k), []string{"running", "completed"}[k%2]))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, raw.Update(func(tx *bolt.Tx) error {
		ns := tx.Bucket([]byte("ns/executions"))
		require.NoError(t, ns.DeleteBucket([]byte("by-status")))
		return ns.DeleteBucket([]byte("status-of"))
	}))
	require.NoError(t, raw.Close())

	ro, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	rs, err := ro.Store("executions")
	require.NoError(t, err)
	_, err = rs.ListPage(bg, storage.Query{Statuses: []string{"running"}, Limit: 10})
	require.ErrorContains(t, err, "open it writable once")
	require.NoError(t, ro.Close())

	_, s = openStore(t, path, boltstore.Options{})
	require.Equal(t, []string{"ex-0", "ex-2"}, listed(t, s, "running"))
	require.Equal(t, []string{"ex-1", "ex-3"}, listed(t, s, "completed"))
}
