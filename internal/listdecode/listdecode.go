// Package listdecode decodes the records of a listing on every CPU.
//
// Decoding is most of what listing costs a store once the bytes are in
// memory (about 4 µs a record with a full audit trail), and a
// restarted controller lists every execution before it does anything
// else: spread over the CPUs, 100k records decode in a fraction of the
// time (docs/decisions/2026-12-05-scale.md).
package listdecode

import (
	"runtime"
	"sync"

	"github.com/execfsm/execfsm/storage"
)

// minChunk is the fewest records a goroutine of its own decodes: below
// it, starting one costs more than it saves.
const minChunk = 256

// All decodes n values with decode(i), on up to GOMAXPROCS goroutines,
// and returns the records in the order of i, and the values that did not
// decode apart, in the same order, each as unreadable(i, err) says. It
// returns once every decode has, so decode may read memory that is valid
// only until then (a bbolt transaction's pages).
func All(n int, decode func(i int) (storage.Record, error), unreadable func(i int, err error) storage.Unreadable) ([]storage.Record, []storage.Unreadable) {
	if n <= 0 {
		return nil, nil
	}
	recs := make([]storage.Record, n)
	errs := make([]error, n)
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			recs[i], errs[i] = decode(i)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (n+minChunk-1)/minChunk)
	if workers <= 1 {
		run(0, n)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := w*n/workers, (w+1)*n/workers
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(lo, hi)
			}()
		}
		wg.Wait()
	}
	var bad []storage.Unreadable
	kept := recs[:0]
	for i := range recs {
		if errs[i] != nil {
			bad = append(bad, unreadable(i, errs[i]))
			continue
		}
		kept = append(kept, recs[i])
	}
	clear(recs[len(kept):]) // what moved up is not held twice
	return kept, bad
}
