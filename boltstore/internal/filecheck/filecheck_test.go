package filecheck

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// boltFile makes a small bbolt file, as boltstore lays one out (records
// in a bucket per namespace), and returns its bytes.
func boltFile(tb testing.TB, noFreelistSync bool) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, PageSize: 512, NoFreelistSync: noFreelistSync})
	require.NoError(tb, err)
	require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
		ns, err := tx.CreateBucket([]byte("ns/executions"))
		if err != nil {
			return err
		}
		records, err := ns.CreateBucket([]byte("records"))
		if err != nil {
			return err
		}
		for _, id := range []string{"ex-1", "ex-2", "ex-3"} {
			if err := records.Put([]byte(id), []byte("a record of "+id)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(tb, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	return data
}

// FuzzValidate feeds arbitrary bytes to the file check as a database
// file. It returns nil or an error matching storage.ErrCorrupt, never
// panics; and a file it passes, bbolt opens, writes to and reads every
// bucket, key and value of without crashing the process: a panic or a
// fault on the caller's goroutine, which Guard turns into an error, is
// allowed; one elsewhere, or a pointer-check failure of the race
// detector (which the seed corpus runs under in CI), kills the fuzzer.
func FuzzValidate(f *testing.F) {
	for _, noFreelistSync := range []bool{false, true} {
		good := boltFile(f, noFreelistSync)
		f.Add(good)
		f.Add(good[:len(good)/2])
		zeroedMeta := append([]byte(nil), good...)
		clear(zeroedMeta[16:80])
		f.Add(zeroedMeta)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "db")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		if err := Validate(path, time.Second); err != nil {
			require.ErrorIs(t, err, storage.ErrCorrupt)
			return
		}
		if len(data) == 0 {
			return // a new database, for bbolt to lay out
		}
		_ = Guard(path, "open", func() error {
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				return err
			}
			defer db.Close()
			_ = db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucketIfNotExists([]byte("fuzz"))
				return err
			})
			return db.View(func(tx *bolt.Tx) error {
				return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return readAll(b) })
			})
		})
	})
}

// readAll reads every key and value under b, opening every bucket.
func readAll(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if child := b.Bucket(k); child != nil {
				return readAll(child)
			}
		}
		return nil
	})
}
