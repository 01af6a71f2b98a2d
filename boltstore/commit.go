package boltstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write is acknowledged only after the fsync that
// holds it, and an fsync costs milliseconds whatever it carries, so one
// transaction per write caps a file at a few hundred writes per second
// per disk flush. Instead, a writer queues its write and either becomes
// the leader (it takes the writer's turn) and commits every write queued
// at that moment in one transaction, or waits while a leader commits its
// write with others. Under load each fsync carries many writes; a lone
// writer is its own leader and commits at once, in its own goroutine,
// as before (nobody waits for a batch to fill, unlike bbolt's Batch with
// its MaxBatchDelay). Etcd's backend and MySQL's binary log group commit
// work the same way.
//
// A batch's writes run one after the other in the transaction, each
// seeing the ones before it, so they conflict exactly as they would one
// transaction each. A write refused by its own checks (a stale revision,
// a claim it may not change, a record that does not decode) fails alone,
// having modified nothing. A failure of the transaction itself (a damaged
// page, bbolt refusing a put) rolls the batch back, and each of its
// writes is then committed alone, so only the one at fault fails.

// maxBatch bounds a batch: a transaction's dirty pages are held in memory
// until it commits.
const maxBatch = 1024

// The states of a request: waiting in the queue, taken into a batch (its
// writer waits for the outcome), or abandoned by its writer (its context
// ended first; the leader drops it).
const (
	requestPending int32 = iota
	requestTaken
	requestAbandoned
)

// request is one queued write.
type request struct {
	ctx   context.Context
	store *Store
	build func(records *bolt.Bucket) (storage.Record, error)
	state atomic.Int32
	done  chan outcome // buffered: the leader never waits for the writer
}

type outcome struct {
	rec storage.Record
	err error
}

// errBatch marks an error of the transaction rather than of one write:
// the batch is rolled back and its writes are committed one by one.
type errBatch struct{ err error }

func (e *errBatch) Error() string { return e.err.Error() }
func (e *errBatch) Unwrap() error { return e.err }

// write stores the record build returns at the next revision, in one
// transaction with build's checks (see apply), with the writes queued at
// the same time. It waits, as the leader or for another, until the write
// is committed. It gives up, writing nothing, if ctx ends before a leader
// takes the write; once taken, the write finishes (one fsync) whatever
// ctx says.
func (s *Store) write(ctx context.Context, build func(records *bolt.Bucket) (storage.Record, error)) (storage.Record, error) {
	db := s.db
	if db.readOnly {
		return storage.Record{}, fmt.Errorf("boltstore: %s: %w", db.path, ErrReadOnly)
	}
	r := &request{ctx: ctx, store: s, build: build, done: make(chan outcome, 1)}
	db.pendingMu.Lock()
	db.pending = append(db.pending, r)
	db.pendingMu.Unlock()
	for {
		select {
		case o := <-r.done:
			return o.rec, o.err
		case db.writer <- struct{}{}:
			// Let the writers the last leader just woke run before
			// this one syscalls. They wait in this P's run queue, and
			// while its thread sits in pwrite and fdatasync, unless
			// another P is idle and steals them, only the runtime's
			// monitor (which sleeps up to 10 ms when nothing changes)
			// hands them on: under load the slowest write in a
			// hundred waited 10 ms or more, woken but not running,
			// the other P often marking for the GC, which does not
			// look at this queue. Run first, they also queue their
			// next writes, so this batch is fuller. A lone writer woke
			// nobody and commits at once: no batching delay.
			if db.lastBatch > 1 {
				runtime.Gosched()
			}
			db.commit(db.takePending())
			<-db.writer
		case <-ctx.Done():
			if r.state.CompareAndSwap(requestPending, requestAbandoned) {
				return storage.Record{}, ctx.Err()
			}
			o := <-r.done // taken: the outcome is one fsync away
			return o.rec, o.err
		}
	}
}

// takePending removes up to maxBatch queued writes, oldest first.
func (db *DB) takePending() []*request {
	db.pendingMu.Lock()
	defer db.pendingMu.Unlock()
	n := min(len(db.pending), maxBatch)
	batch := db.pending[:n:n]
	db.pending = db.pending[n:]
	if len(db.pending) == 0 {
		db.pending = nil // let the old array go
	}
	return batch
}

// commit takes the batch's pending writes and commits them in one
// transaction, or one by one if the transaction fails.
func (db *DB) commit(batch []*request) {
	taken := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(requestPending, requestTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	db.lastBatch = len(taken)
	outcomes, err := db.commitTx(taken)
	if err != nil && len(taken) > 1 && !errors.Is(err, ErrClosed) {
		for _, r := range taken {
			one, err := db.commitTx([]*request{r})
			if err != nil {
				one = []outcome{{err: unwrapBatch(err)}}
			}
			r.done <- one[0]
		}
		return
	}
	for i, r := range taken {
		if err != nil {
			r.done <- outcome{err: unwrapBatch(err)}
			continue
		}
		r.done <- outcomes[i]
	}
}

func unwrapBatch(err error) error {
	var whole *errBatch
	if errors.As(err, &whole) {
		return whole.err
	}
	return err
}

// commitTx runs the writes in one transaction. A write's own error is
// its outcome; an error of the transaction is returned.
func (db *DB) commitTx(batch []*request) ([]outcome, error) {
	outcomes := make([]outcome, len(batch))
	notify := make(map[*Store]bool, 1)
	err := db.update("write", func(tx *bolt.Tx) error {
		for i, r := range batch {
			// A writer who gave up while its turn came gets nothing
			// written (it waits for this outcome all the same).
			if err := r.ctx.Err(); err != nil {
				outcomes[i] = outcome{err: err}
				continue
			}
			rec, err := r.store.apply(tx, r.build)
			var whole *errBatch
			if errors.As(err, &whole) {
				return err
			}
			outcomes[i] = outcome{rec: rec, err: err}
			if err == nil {
				notify[r.store] = true
			}
		}
		return nil
	})
	if err != nil {
		db.heads.rollback()
		return nil, db.closedError(err)
	}
	db.heads.commit()
	for s := range notify {
		s.hub.Notify()
	}
	return outcomes, nil
}

// apply stores the record build returns at the next revision, with the
// write logged for watchers. Everything that can refuse the write is
// checked before anything is modified, so a refused write leaves the
// transaction as it found it; an error after that is an errBatch.
//
// The new revision is above the counter and above the revision of the
// record being replaced, which a damaged counter could be below: a
// record's revisions never go down.
func (s *Store) apply(tx *bolt.Tx, build func(records *bolt.Bucket) (storage.Record, error)) (storage.Record, error) {
	ns, records, log := s.buckets(tx)
	rec, err := build(records)
	if err != nil {
		return storage.Record{}, err
	}
	floor := rec.Revision // build returns the replaced record's revision, or 0
	meta := tx.Bucket(metaBucket)
	raw := meta.Get(revisionKey)
	if raw != nil && len(raw) != 8 {
		// Restarting the counter would reuse revisions and let a stale
		// compare-and-swap succeed.
		return storage.Record{}, fmt.Errorf("boltstore: %s: %w: the revision counter is %d bytes, want 8", s.db.path, storage.ErrCorrupt, len(raw))
	}
	rec.Revision = max(getUint(raw), floor) + 1
	data, err := rec.MarshalBinary()
	if err != nil {
		return storage.Record{}, err
	}
	if err := meta.Put(revisionKey, putUint(rec.Revision)); err != nil {
		return storage.Record{}, &errBatch{err}
	}
	if err := records.Put([]byte(rec.ID), data); err != nil {
		return storage.Record{}, &errBatch{err}
	}
	if err := s.logWrite(ns, log, rec.Revision, rec.ID); err != nil {
		return storage.Record{}, &errBatch{err}
	}
	s.db.heads.wrote(s.headKey(rec.ID), head{revision: rec.Revision, claim: rec.Claim()})
	return rec, nil
}
