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
// through Persisted on boltstore and, interleaved with it in the same
// loop (so both see the same disk, cache and file sizes), a raw bbolt
// Update doing by hand what the store's compare-and-swap does: read the
// record, check its revision, write a record of the same size, bump the
// revision counter and append to the watch log, in one transaction with
// one fsync. It reports the ratio (target ≤ 1.10).
func BenchmarkPersistedFire(b *testing.B) {
	dir := b.TempDir()
	_, s := openStore(b, filepath.Join(dir, "db"), boltstore.Options{})
	exec, err := transition.NewPersisted(state.Lifecycle(), s, "ex-1", transition.PersistedOptions[state.Status]{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Create(bg, transition.Update[state.Status]{To: state.Running}); err != nil {
		b.Fatal(err)
	}
	targets := [2]state.Status{state.Paused, state.Running}
	for i := range 20 { // fill the audit trail to its steady size
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
	_, rec, err := exec.Load(bg)
	if err != nil {
		b.Fatal(err)
	}
	value, err := rec.MarshalBinary() // what the store writes, byte for byte
	if err != nil {
		b.Fatal(err)
	}
	raw := openRaw(b, filepath.Join(dir, "raw"), value)
	var persisted, rawTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		raw.cas(b)
		persisted += t1.Sub(t0)
		rawTime += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(persisted.Nanoseconds())/float64(b.N), "persisted-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(persisted)/float64(rawTime), "x-raw")
}

// rawStore is a bbolt file laid out as the store lays it out (a bucket
// per namespace holding a records bucket, a watch-log bucket and the
// log's count; the revision counter in a bucket of its own), written by
// hand with no encoding at all: the least a compare-and-swap of one
// record costs in that layout.
type rawStore struct {
	db    *bolt.DB
	value []byte // the record as the store stores it
	rev   uint64
}

var (
	rawNamespace, rawMeta          = []byte("ns"), []byte("meta")
	rawRecords, rawLog, rawLogSize = []byte("records"), []byte("log"), []byte("log-count")
	rawRev                         = []byte("rev")
)

func openRaw(b *testing.B, path string, value []byte) *rawStore {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(rawMeta)
		if err != nil {
			return err
		}
		ns, err := tx.CreateBucket(rawNamespace)
		if err != nil {
			return err
		}
		records, err := ns.CreateBucket(rawRecords)
		if err != nil {
			return err
		}
		if _, err := ns.CreateBucket(rawLog); err != nil {
			return err
		}
		if err := meta.Put(rawRev, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
		return records.Put([]byte("ex-1"), value)
	})
	if err != nil {
		b.Fatal(err)
	}
	return &rawStore{db: db, value: value, rev: 1}
}

// cas is one compare-and-swap of ex-1 at the revision last written: the
// record must be there and the counter at that revision.
func (r *rawStore) cas(b *testing.B) {
	err := r.db.Update(func(tx *bolt.Tx) error {
		ns, meta := tx.Bucket(rawNamespace), tx.Bucket(rawMeta)
		records := ns.Bucket(rawRecords)
		if len(records.Get([]byte("ex-1"))) == 0 || binary.BigEndian.Uint64(meta.Get(rawRev)) != r.rev {
			b.Fatal("raw compare failed")
		}
		rev := r.rev + 1
		if err := meta.Put(rawRev, binary.BigEndian.AppendUint64(nil, rev)); err != nil {
			return err
		}
		if err := ns.Bucket(rawLog).Put(binary.BigEndian.AppendUint64(nil, rev), []byte("ex-1")); err != nil {
			return err
		}
		if err := ns.Put(rawLogSize, binary.BigEndian.AppendUint64(nil, rev)); err != nil {
			return err
		}
		if err := records.Put([]byte("ex-1"), r.value); err != nil {
			return err
		}
		r.rev = rev
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
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
func trail(n int) storage.Trail {
	entries := make([]storage.Entry, n)
	for k := range entries {
		entries[k] = storage.Entry{From: "running", To: "paused", Reason: "toggle", Actor: "pod-a", Revision: uint64(k + 1)}
	}
	t, err := storage.NewTrail(entries...)
	if err != nil {
		panic(err) // entries made just above
	}
	return t
}
