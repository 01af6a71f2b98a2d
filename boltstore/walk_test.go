package boltstore_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// boltFile is a bbolt file's bytes, read the way bbolt lays them out
// (a 16-byte page header: id, flags, count, overflow; then 16-byte
// elements whose keys and values sit at offsets from the element).
type boltFile struct {
	data     []byte
	pageSize int
}

func (f boltFile) page(id uint64) []byte {
	return f.data[int(id)*f.pageSize : int(id+1)*f.pageSize]
}

// value returns the value of key in leaf page id.
func (f boltFile) value(t *testing.T, id uint64, key string) []byte {
	t.Helper()
	p := f.page(id)
	le := binary.LittleEndian
	require.Equal(t, uint16(0x02), le.Uint16(p[8:]), "page %d is a leaf", id)
	for i := range int(le.Uint16(p[10:])) {
		e := 16 + 16*i
		pos, ksize, vsize := int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:])), int(le.Uint32(p[e+12:]))
		if string(p[e+pos:e+pos+ksize]) == key {
			return p[e+pos+ksize : e+pos+ksize+vsize]
		}
	}
	t.Fatalf("no key %q in page %d", key, id)
	return nil
}

// newestMeta returns the meta page bbolt uses: the one with the higher
// transaction id.
func newestMeta(data []byte) []byte {
	le := binary.LittleEndian
	meta := data[16:]
	if m1 := data[int(le.Uint32(meta[8:]))+16:]; le.Uint64(m1[48:]) > le.Uint64(meta[48:]) {
		meta = m1
	}
	return meta
}

// recordsRoot returns the file and the root page of namespace
// "executions"'s records bucket.
func recordsRoot(t *testing.T, data []byte) (boltFile, uint64) {
	t.Helper()
	le := binary.LittleEndian
	meta := newestMeta(data)
	f := boltFile{data: data, pageSize: int(le.Uint32(meta[8:]))}
	ns := le.Uint64(f.value(t, le.Uint64(meta[16:]), "ns/executions"))
	require.NotZero(t, ns, "the namespace's bucket has pages of its own")
	records := le.Uint64(f.value(t, ns, "records"))
	require.NotZero(t, records, "the records bucket has pages of its own")
	return f, records
}

// bbolt trusts the pages it reads: a tree page whose elements point out
// of it, a bucket value too short for a bucket, an inline bucket whose
// elements run past its value, a stored freelist naming a page in use.
// It faults or panics on some (in Open's walk of a file whose freelist
// is not stored, as etcd's bbolt writes it, in a goroutine nothing
// recovers), dies on others under the race detector's pointer checks
// (a CI run lost its process to a record element whose bucket flag a
// flipped byte had set), and overwrites live pages for the freelist's.
// Open reads every page in use first and refuses each of these with
// ErrCorrupt, whether the freelist is stored or not, in a child process
// that lives to say so. A good file opens.
func TestDamagedTreesAreRefusedAtOpenBeforeBboltReadsThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "good")
	writeBranched(t, path)
	written, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, noFreelistSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("freelist stored %v", !noFreelistSync), func(t *testing.T) {
			t.Parallel()
			damagedTrees(t, written, noFreelistSync)
		})
	}
}

// damagedTrees runs the damages of
// TestDamagedTreesAreRefusedAtOpenBeforeBboltReadsThem on the file
// written, after a commit by a bbolt that stores its freelist or not,
// which adds an empty (inline) bucket "other".
func damagedTrees(t *testing.T, written []byte, noFreelistSync bool) {
	path := filepath.Join(t.TempDir(), "good")
	require.NoError(t, os.WriteFile(path, written, 0o600))
	other, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: noFreelistSync})
	require.NoError(t, err)
	require.NoError(t, other.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("other")); return err }))
	require.NoError(t, other.Close())
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	le := binary.LittleEndian
	f, root := recordsRoot(t, good)
	branch := f.page(root)
	require.Equal(t, uint16(0x01), le.Uint16(branch[8:]), "300 records need a branch page")
	require.GreaterOrEqual(t, le.Uint16(branch[10:]), uint16(2))
	leaf := le.Uint64(branch[16+8:]) // element 0's child
	require.Equal(t, uint16(0x02), le.Uint16(f.page(leaf)[8:]))
	require.GreaterOrEqual(t, le.Uint16(f.page(leaf)[10:]), uint16(2))
	topRoot := le.Uint64(newestMeta(good)[16:])
	require.Len(t, f.value(t, topRoot, "other"), 32, "an empty inline bucket: its header and a page header")
	freelist := le.Uint64(newestMeta(good)[32:])
	if !noFreelistSync {
		require.Equal(t, uint16(0x10), le.Uint16(f.page(freelist)[8:]))
		require.Positive(t, le.Uint16(f.page(freelist)[10:]), "the freelist names pages")
	}

	require.Contains(t, readDamaged(t, path), "open ok\n")
	damages := map[string]func(f boltFile){
		"a branch pointing at itself": func(f boltFile) { le.PutUint64(f.page(root)[16+8:], root) },
		"a branch pointing past the file": func(f boltFile) {
			le.PutUint64(f.page(root)[16+8:], uint64(len(f.data)/f.pageSize)+10)
		},
		"two branch elements pointing at one page": func(f boltFile) {
			le.PutUint64(f.page(root)[16+16+8:], leaf)
		},
		"keys out of order in a leaf": func(f boltFile) {
			p := f.page(leaf)
			e := 16 + 16
			p[e+int(le.Uint32(p[e+4:]))] = 0 // the first byte of the second key
		},
		"a page whose header names another": func(f boltFile) { le.PutUint64(f.page(leaf)[0:], leaf+1) },
		"a leaf marked as a meta page":      func(f boltFile) { le.PutUint16(f.page(leaf)[8:], 0x04) },
		"more elements than the page holds": func(f boltFile) { le.PutUint16(f.page(leaf)[10:], 0xffff) },
		"a key running past the page":       func(f boltFile) { le.PutUint32(f.page(leaf)[16+8:], 1<<20) },
		"a record marked as a bucket of 5 bytes": func(f boltFile) {
			e := f.page(leaf)[16:]
			le.PutUint32(e[0:], 0x01)
			le.PutUint32(e[12:], 5)
		},
		"a bucket's value cut to 5 bytes": func(f boltFile) {
			e := f.page(topRoot)[16:] // "ns/executions" sorts before "other"
			le.PutUint32(e[12:], 5)
		},
		"an inline bucket whose elements run past its value": func(f boltFile) {
			le.PutUint16(f.value(t, topRoot, "other")[16+10:], 3)
		},
		"an inline bucket whose page is a branch": func(f boltFile) {
			le.PutUint16(f.value(t, topRoot, "other")[16+8:], 0x01)
		},
	}
	if !noFreelistSync {
		damages["a freelist naming a page in use"] = func(f boltFile) { le.PutUint64(f.page(freelist)[16:], leaf) }
		damages["a freelist naming a page past the last"] = func(f boltFile) {
			le.PutUint64(f.page(freelist)[16:], uint64(len(f.data)/f.pageSize)+10)
		}
		damages["a freelist naming the freelist"] = func(f boltFile) { le.PutUint64(f.page(freelist)[16:], freelist) }
		damages["a freelist longer than its page"] = func(f boltFile) { le.PutUint16(f.page(freelist)[10:], 0xfffe) }
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each reads its own file in a child process of its own
			data := bytes.Clone(good)
			damage(boltFile{data: data, pageSize: f.pageSize})
			damaged := filepath.Join(t.TempDir(), "damaged")
			require.NoError(t, os.WriteFile(damaged, data, 0o600))
			require.Contains(t, readDamaged(t, damaged), "open corrupt\n")
		})
	}
}

// Damage done to the file while the store has it open (a disk, or
// another program, writing into it) is found by Check, which reads the
// pages as Open does before bbolt does; bbolt is not handed the damaged
// tree, on which, under the race detector, it would kill the process.
func TestCheckReportsDamageDoneToTheFileWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	writeBranched(t, path)
	db, _ := openStore(t, path, boltstore.Options{}) // every record in the file, none in the log
	require.NoError(t, db.Check())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f, root := recordsRoot(t, data)
	le := binary.LittleEndian
	leaf := le.Uint64(f.page(root)[16+8:])
	// The first record marked as a bucket of 5 bytes, written in place.
	element := make([]byte, 16)
	copy(element, f.page(leaf)[16:32])
	le.PutUint32(element[0:], 0x01)
	le.PutUint32(element[12:], 5)
	file, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = file.WriteAt(element, int64(leaf)*int64(f.pageSize)+16)
	require.NoError(t, err)
	require.NoError(t, file.Close())

	err = db.Check()
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("page %d, element 0: a bucket of 5 bytes", leaf))
}

// writeBranched writes 300 records of 300 bytes at path and closes the
// store: every record in the file, and enough of them that the records
// bucket has a branch page above its leaves.
func writeBranched(t *testing.T, path string) {
	t.Helper()
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 300 {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprintf("ex-%03d", k), Status: "running", Reason: strings.Repeat("r", 300)})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
}
