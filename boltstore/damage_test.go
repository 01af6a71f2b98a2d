package boltstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A file that is not a sound database is refused with an error matching
// ErrCorrupt and naming the file: an empty file (bbolt would quietly make
// a new database of it), a truncated one, one that is not a database.
func TestDamagedFilesAreRefusedWithErrCorrupt(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	db, s := openStore(t, good, boltstore.Options{})
	_, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	for name, content := range map[string][]byte{
		"empty":                  {},
		"truncated":              data[:100],
		"not a database":         []byte("this is a text file, not a bbolt database, and it is long enough to be looked at....."),
		"both meta pages zeroed": append(make([]byte, 2*os.Getpagesize()), data[2*os.Getpagesize():]...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, content, 0o600))
			db, err := boltstore.Open(path, boltstore.Options{})
			if err == nil {
				_ = db.Close()
			}
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, path)
		})
	}
}

// A bucket where a record belongs (a foreign writer) is corrupt on every
// path, not "no such record", and is never overwritten.
func TestABucketWhereARecordBelongsIsCorruptEverywhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	_, err := s.Create(bg, storagetest.Sample("ex-ok"))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	tamper(t, path, func(tx *bolt.Tx) error {
		_, err := tx.Bucket([]byte("ns/executions")).Bucket([]byte("records")).CreateBucket([]byte("ex-1"))
		return err
	})
	_, s = openStore(t, path, boltstore.Options{})
	_, err = s.Get(bg, "ex-1")
	require.ErrorIs(t, err, storage.ErrCorrupt)
	_, err = s.Create(bg, storagetest.Sample("ex-1"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	_, err = s.CompareAndSwap(bg, "ex-1", 1, storagetest.Sample("ex-1"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	_, _, err = s.Acquire(bg, "ex-1", storagetest.Lease("pod-a"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	recs, bad, err := s.List(bg)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Len(t, bad, 1)
	require.Equal(t, "ex-1", bad[0].ID)
	require.ErrorIs(t, bad[0].Err, storage.ErrCorrupt)
	require.ErrorContains(t, bad[0].Err, "a bucket, not a record")
}

func TestANamespaceMustBeUTF8(t *testing.T) {
	db, _ := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	_, err := db.Store("exec\xffutions")
	require.ErrorContains(t, err, "UTF-8")
}
