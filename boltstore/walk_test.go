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

// recordsRoot returns the file and the root page of namespace
// "executions"'s records bucket.
func recordsRoot(t *testing.T, data []byte) (boltFile, uint64) {
	t.Helper()
	le := binary.LittleEndian
	meta := data[16:]
	f := boltFile{data: data, pageSize: int(le.Uint32(meta[8:]))}
	if m1 := data[f.pageSize+16:]; le.Uint64(m1[48:]) > le.Uint64(meta[48:]) {
		meta = m1 // the meta page with the higher transaction id
	}
	ns := le.Uint64(f.value(t, le.Uint64(meta[16:]), "ns/executions"))
	require.NotZero(t, ns, "the namespace's bucket has pages of its own")
	records := le.Uint64(f.value(t, ns, "records"))
	require.NotZero(t, records, "the records bucket has pages of its own")
	return f, records
}

// When a file's freelist is not stored (a bbolt opened with
// NoFreelistSync, as etcd opens it, wrote it last), bbolt walks every page
// inside Open to rebuild it, and a damaged tree killed the process there,
// in a goroutine nothing recovers, before Open could return. Each damage
// that walk reports or faults on is refused with ErrCorrupt at Open
// instead, in a child process that lives to say so. A good file opens.
func TestDamagedTreesAreRefusedAtOpenBeforeBboltWalksThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "good")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 300 {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprintf("ex-%03d", k), Status: "running", Reason: strings.Repeat("r", 300)})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	// A commit by a bbolt that does not store its freelist, as etcd's
	// does: the file now makes bbolt walk it at Open.
	other, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
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

	require.Contains(t, readDamaged(t, path), "open ok\n")
	for name, damage := range map[string]func(f boltFile){
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
	} {
		t.Run(name, func(t *testing.T) {
			data := bytes.Clone(good)
			damage(boltFile{data: data, pageSize: f.pageSize})
			damaged := filepath.Join(t.TempDir(), "damaged")
			require.NoError(t, os.WriteFile(damaged, data, 0o600))
			require.Contains(t, readDamaged(t, damaged), "open corrupt\n")
		})
	}
}
