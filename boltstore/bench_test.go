package boltstore_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
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
	value, err := storage.Record{ID: "ex-1", Status: "running", Revision: 1, History: trail(16)}.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
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

// BenchmarkConcurrentWriters has W writers each moving its own record by
// compare-and-swap, through the store (group commit: the writes waiting
// together share one transaction and one fsync), and, side by side in
// the same run, the same writes as one bbolt Update each (what the store
// did before: one fsync per write). It reports writes per second of both
// and their ratio; with one writer the ratio says what the committer's
// hand-off costs a lone writer.
func BenchmarkConcurrentWriters(b *testing.B) {
	for _, writers := range []int{1, 32, 128} {
		b.Run(fmt.Sprint(writers), func(b *testing.B) {
			dir := b.TempDir()
			_, s := openStore(b, filepath.Join(dir, "db"), boltstore.Options{})
			recs := make([]storage.Record, writers)
			for w := range writers {
				rec, err := s.Create(bg, storage.Record{ID: fmt.Sprint("ex-", w), Status: "running", History: trail(16)})
				if err != nil {
					b.Fatal(err)
				}
				recs[w] = rec
			}
			raw, err := bolt.Open(filepath.Join(dir, "raw"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			value, err := recs[0].MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			if err := raw.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("records")); return err }); err != nil {
				b.Fatal(err)
			}

			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			run(b, writers, b.N, func(w int) {
				next := recs[w]
				next.Reason = "toggle"
				rec, err := s.CompareAndSwap(bg, next.ID, next.Revision, next)
				if err != nil {
					b.Error(err)
				}
				recs[w] = rec
			})
			grouped := time.Since(start)
			b.StopTimer()

			start = time.Now()
			run(b, writers, b.N, func(w int) {
				key := []byte(fmt.Sprint("ex-", w))
				err := raw.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket([]byte("records"))
					_ = bk.Get(key)
					return bk.Put(key, value)
				})
				if err != nil {
					b.Error(err)
				}
			})
			single := time.Since(start)
			b.ReportMetric(float64(b.N)/grouped.Seconds(), "writes/s")
			b.ReportMetric(float64(b.N)/single.Seconds(), "one-tx-each-writes/s")
			b.ReportMetric(single.Seconds()/grouped.Seconds(), "x-one-tx-each")
		})
	}
}

// run makes n calls of write spread over writers goroutines, each writer
// w calling write(w) one call after the other.
func run(b *testing.B, writers, n int, write func(w int)) {
	var wg sync.WaitGroup
	for w := range writers {
		calls := n / writers
		if w < n%writers {
			calls++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				write(w)
			}
		}()
	}
	wg.Wait()
}

// trail is an audit trail of n entries, as a record that has moved n
// times carries: the size of a real record.
func trail(n int) []storage.Entry {
	t := make([]storage.Entry, n)
	for k := range t {
		t[k] = storage.Entry{From: "running", To: "paused", Reason: "toggle", Actor: "pod-a", Revision: uint64(k + 1)}
	}
	return t
}
