package filecheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	return boltFileOf(tb, noFreelistSync, []string{"ex-1", "ex-2", "ex-3"}, 0)
}

// boltFileOf is boltFile with the records ids, each value padded to at
// least size bytes.
func boltFileOf(tb testing.TB, noFreelistSync bool, ids []string, size int) []byte {
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
		for _, id := range ids {
			value := []byte("a record of " + id)
			value = append(value, bytes.Repeat([]byte{'.'}, max(0, size-len(value)))...)
			if err := records.Put([]byte(id), value); err != nil {
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
	// Branch pages, whose children are read ahead, and leaves with
	// overflow pages.
	f.Add(boltFileOf(f, false, manyIDs(40), 300))
	f.Add(boltFileOf(f, false, manyIDs(12), 900))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "db")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		err := Validate(path, time.Second)
		require.Equal(t, fmt.Sprint(err), fmt.Sprint(validateRead(t, path)), "the file mapped and the file read")
		if err != nil {
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

// validateRead is Validate reading the file with ReadAt, as on a
// platform where it is not mapped.
func validateRead(tb testing.TB, path string) error {
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	return check(f, false, true)
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

// manyIDs returns n record ids in key order.
func manyIDs(n int) []string {
	ids := make([]string, n)
	for k := range ids {
		ids[k] = fmt.Sprintf("ex-%04d", k)
	}
	return ids
}

// A tree of several levels, its leaves mapped, or read ahead by their branch in
// runs (with the overflow pages of records bigger than a page): it
// passes, and a leaf in the middle of a run that names another page, or
// an overflow page past the end, is found as it is read one by one.
func TestLeavesAreCheckedReadAheadOrMapped(t *testing.T) {
	for _, size := range []int{100, 700} { // one page, and an overflow page (512-byte pages)
		data := boltFileOf(t, false, manyIDs(600), size)
		path := filepath.Join(t.TempDir(), "db")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		require.NoError(t, Validate(path, time.Second))
		require.NoError(t, validateRead(t, path))

		// The leaves, as the walk reaches them: every page that is a leaf
		// holding a record.
		const pageSize = 512
		var leaves []int
		for p := 2; p < len(data)/pageSize; p++ {
			page := data[p*pageSize:]
			if binary.LittleEndian.Uint64(page) == uint64(p) && binary.LittleEndian.Uint16(page[8:]) == leafPageFlag &&
				bytes.Contains(page[:pageSize], []byte("a record of ex-0300")) {
				leaves = append(leaves, p)
			}
		}
		require.Len(t, leaves, 1, "the leaf of ex-0300")
		leaf := leaves[0]

		misnamed := append([]byte(nil), data...)
		binary.LittleEndian.PutUint64(misnamed[leaf*pageSize:], uint64(leaf+1))
		require.NoError(t, os.WriteFile(path, misnamed, 0o600))
		for _, err := range []error{Validate(path, time.Second), validateRead(t, path)} {
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, fmt.Sprintf("page %d says it is page %d", leaf, leaf+1))
		}

		overflowing := append([]byte(nil), data...)
		binary.LittleEndian.PutUint32(overflowing[leaf*pageSize+12:], uint32(len(data)/pageSize))
		require.NoError(t, os.WriteFile(path, overflowing, 0o600))
		for _, err := range []error{Validate(path, time.Second), validateRead(t, path)} {
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, fmt.Sprintf("page %d runs past the last page", leaf))
		}
	}
}
