package boltstore_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkPersistedFire moves an execution between running and paused
// through Persisted on boltstore, and reports its cost against a raw bbolt
// Update doing the same compare-and-swap (read the record, check its
// revision, write a record of the same size and bump a counter) measured
// in the same run.
func BenchmarkPersistedFire(b *testing.B) {
	dir := b.TempDir()
	raw := rawCAS(b, filepath.Join(dir, "raw"))

	_, s := openStore(b, filepath.Join(dir, "db"), boltstore.Options{})
	exec, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1", transition.PersistedOptions[state.Status]{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Create(bg, transition.Update[state.Status]{To: state.Running}); err != nil {
		b.Fatal(err)
	}
	targets := [2]state.Status{state.Paused, state.Running}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-ns/op")
	b.ReportMetric(float64(per)/float64(raw), "x-raw")
}

// rawCAS times the bare bbolt transaction Persisted.Fire amounts to.
func rawCAS(b *testing.B, path string) time.Duration {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value, _ := storage.Record{ID: "ex-1", Status: "running", Revision: 1, History: make([]storage.Entry, 16)}.MarshalBinary()
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("records"))
		if err != nil {
			return err
		}
		return bk.Put([]byte("ex-1"), value)
	})
	if err != nil {
		b.Fatal(err)
	}
	const n = 200
	start := time.Now()
	for i := range n {
		err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket([]byte("records"))
			cur := bk.Get([]byte("ex-1"))
			if len(cur) == 0 {
				b.Fatal("lost the record")
			}
			next := append([]byte(nil), cur...)
			binary.BigEndian.PutUint64(next[len(next)-8:], uint64(i))
			if err := bk.Put([]byte("rev"), next[len(next)-8:]); err != nil {
				return err
			}
			return bk.Put([]byte("ex-1"), next)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / n
}
