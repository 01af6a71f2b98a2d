package etcdstore_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkPersistedFire moves an execution between running and paused
// through Persisted on etcd and, interleaved with it in the same loop, a
// raw clientv3 client does the same compare-and-swap: one Txn making the
// store's three comparisons (the key exists, its ModRevision is the one
// last written, the claim key holds the claim) and putting a value of
// the same size, as Persisted does once it knows the record. It reports
// Persisted's time per op and the ratio (target ≤ 1.10), and the ratio to
// a raw client that reads before every write ("x-raw-read", below 1:
// Persisted saves that round trip). Interleaving keeps all of them under
// the same server load and database size, and Persisted and the raw
// write take turns going first.
func BenchmarkPersistedFire(b *testing.B) {
	s := newStore(b, etcdstore.Options{})
	cl := client(b, shared)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Create(bg, transition.To(state.Running)); err != nil {
		b.Fatal(err)
	}
	targets := [2]state.Status{state.Paused, state.Running}
	for i := range 20 { // fill the audit trail to its steady size
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
	rawKey, claimKey := s.Prefix()+"raw", s.Prefix()+"raw-claim"
	if _, err := cl.Put(bg, claimKey, "0/"); err != nil {
		b.Fatal(err)
	}
	resp, err := cl.Get(bg, s.Prefix()+"records/ex-1")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cl.Put(bg, rawKey, string(resp.Kvs[0].Value)); err != nil {
		b.Fatal(err)
	}
	value := string(resp.Kvs[0].Value)
	put, err := cl.Put(bg, rawKey, value)
	if err != nil {
		b.Fatal(err)
	}
	rev := put.Header.Revision
	var persisted, raw, rawRead time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	fire := func(i int) {
		t0 := time.Now()
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
		persisted += time.Since(t0)
	}
	cas := func() {
		t0 := time.Now()
		rev = rawCAS(b, cl, rawKey, claimKey, value, rev)
		raw += time.Since(t0)
	}
	for i := range b.N {
		// Which of the two writes goes first alternates: an A/A run (two
		// raw writes, or two Persisted ones, always in one order)
		// measured the second of a pair up to 9 % slower than the first,
		// a difference of place, not of work, as large as the bound.
		if i&1 == 0 {
			fire(i)
			cas()
		} else {
			cas()
			fire(i)
		}
		t0 := time.Now()
		resp, err := cl.Get(bg, rawKey)
		if err != nil {
			b.Fatal(err)
		}
		rev = rawCAS(b, cl, rawKey, claimKey, value, resp.Kvs[0].ModRevision)
		rawRead += time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(persisted.Nanoseconds())/float64(b.N), "persisted-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(persisted)/float64(raw), "x-raw")
	b.ReportMetric(float64(persisted)/float64(rawRead), "x-raw-read")
}

// rawCAS is the store's compare-and-swap as one hand-written Txn; it
// returns the new revision.
func rawCAS(b *testing.B, cl *clientv3.Client, key, claimKey, value string, rev int64) int64 {
	txn, err := cl.Txn(bg).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0), clientv3.Compare(clientv3.ModRevision(key), "=", rev),
			clientv3.Compare(clientv3.Value(claimKey), "=", "0/")).
		Then(clientv3.OpPut(key, value)).
		Else(clientv3.OpGet(key), clientv3.OpGet(claimKey)).
		Commit()
	if err != nil || !txn.Succeeded {
		b.Fatal("raw CAS failed", err)
	}
	return txn.Header.Revision
}
