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

// chunkLen is how many values a Pipeline hands a goroutine at a time.
const chunkLen = minChunk

// Pipeline decodes the values of a listing while the listing goes on: a
// store walking its records (bbolt's cursor, one goroutine) adds each
// value as it reaches it, and every full chunk of them is decoded by
// other goroutines meanwhile, so the walk's time is not added to the
// decoding's. Add and Wait are for one goroutine, the walker's.
type Pipeline struct {
	decode     func(id, value []byte) (storage.Record, error)
	unreadable func(id []byte, err error) storage.Unreadable
	filling    *chunk   // the values added since the last chunk was handed out
	chunks     []*chunk // every chunk handed out, in order
	work       chan *chunk
	workers    sync.WaitGroup
}

type chunk struct {
	ids, values [][]byte
	recs        []storage.Record
	errs        []error
}

// NewPipeline returns a Pipeline that decodes with decode and describes a
// value that does not decode with unreadable.
func NewPipeline(decode func(id, value []byte) (storage.Record, error), unreadable func(id []byte, err error) storage.Unreadable) *Pipeline {
	return &Pipeline{decode: decode, unreadable: unreadable}
}

// Add adds the value of id, to be decoded before Wait returns: both may
// be memory valid only until then.
func (p *Pipeline) Add(id, value []byte) {
	if p.filling == nil {
		p.filling = &chunk{ids: make([][]byte, 0, chunkLen), values: make([][]byte, 0, chunkLen)}
	}
	c := p.filling
	c.ids, c.values = append(c.ids, id), append(c.values, value)
	if len(c.ids) < chunkLen {
		return
	}
	p.filling = nil
	p.chunks = append(p.chunks, c)
	if p.work == nil {
		p.work = make(chan *chunk, runtime.GOMAXPROCS(0))
		for range runtime.GOMAXPROCS(0) {
			p.workers.Add(1)
			go func() {
				defer p.workers.Done()
				for c := range p.work {
					p.decodeChunk(c)
				}
			}()
		}
	}
	select {
	case p.work <- c:
	default:
		p.decodeChunk(c) // the decoders are behind: the walker lends a hand
	}
}

// Wait decodes what is left, waits for every chunk, and returns the
// records in the order they were added, and the values that did not
// decode apart, in the same order.
func (p *Pipeline) Wait() ([]storage.Record, []storage.Unreadable) {
	if c := p.filling; c != nil {
		p.filling = nil
		p.chunks = append(p.chunks, c)
		p.decodeChunk(c)
	}
	if p.work != nil {
		close(p.work)
		for c := range p.work { // the walker is free: it decodes too
			p.decodeChunk(c)
		}
		p.workers.Wait()
		p.work = nil
	}
	n := 0
	for _, c := range p.chunks {
		n += len(c.recs)
	}
	recs := make([]storage.Record, 0, n)
	var bad []storage.Unreadable
	for _, c := range p.chunks {
		for i := range c.recs {
			if c.errs[i] != nil {
				bad = append(bad, p.unreadable(c.ids[i], c.errs[i]))
				continue
			}
			recs = append(recs, c.recs[i])
		}
	}
	p.chunks = nil
	if len(recs) == 0 {
		recs = nil // no values, or none readable: no records
	}
	return recs, bad
}

func (p *Pipeline) decodeChunk(c *chunk) {
	c.recs, c.errs = make([]storage.Record, len(c.ids)), make([]error, len(c.ids))
	for i := range c.ids {
		c.recs[i], c.errs[i] = p.decode(c.ids[i], c.values[i])
	}
}
