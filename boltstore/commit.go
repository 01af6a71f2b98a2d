package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write is acknowledged only after the fsync that
// holds it, and an fsync costs a fraction of a millisecond or more
// whatever it carries, so one flush per write caps a store at a few
// thousand writes per second. Instead, a writer queues its write and
// either becomes the leader (it takes the writer's turn) and commits
// every write queued at that moment with one append to the log and one
// flush (see wal.go), or waits while a leader commits its write with
// others. Under load each flush carries many writes; a lone writer is
// its own leader and commits at once, in its own goroutine (nobody waits
// for a batch to fill, unlike bbolt's Batch with its MaxBatchDelay).
// Etcd's backend and MySQL's binary log group commit work the same way.
//
// A batch's writes are checked one after the other, each seeing the ones
// before it, so they conflict exactly as they would one at a time. A
// write refused by its own checks (a stale revision, a claim it may not
// change, a record that does not decode) fails alone, having changed
// nothing. A failure of the log itself (a write or a flush the disk
// refuses) fails the whole batch, none of it acknowledged, and every
// write after it: whether the disk holds the batch is then unknown, and
// a log is not appended to past a hole.

// maxBatch bounds a batch: a frame is held in memory until it is written.
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
	build func(v *batchView) (storage.Record, error)
	table *tableWrite  // a table document's write instead of a record's
	drop  *deleteWrite // a record's delete instead of its write
	state atomic.Int32
	done  chan outcome // buffered: the leader never waits for the writer
}

type outcome struct {
	rec storage.Record
	err error
}

// write stores the record build returns at the next revision, checked
// by build against the store as the batch has left it so far (see
// apply). It waits, as the leader or for another, until the write is
// committed. It gives up, writing nothing, if ctx ends before a leader
// takes the write; once taken, the write finishes (one flush) whatever
// ctx says.
func (s *Store) write(ctx context.Context, build func(v *batchView) (storage.Record, error)) (storage.Record, error) {
	return s.enqueue(&request{ctx: ctx, store: s, build: build, done: make(chan outcome, 1)})
}

// enqueue queues r and waits for its outcome (see write).
func (s *Store) enqueue(r *request) (storage.Record, error) {
	db, ctx := s.db, r.ctx
	if db.readOnly {
		return storage.Record{}, fmt.Errorf("boltstore: %s: %w", db.path, ErrReadOnly)
	}
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
			o := <-r.done // taken: the outcome is one flush away
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

// commit checks the batch's pending writes, appends those that pass to
// the log, flushes it and acknowledges them.
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
	outcomes := slices.Grow(db.outcomes, len(taken))[:len(taken)]
	db.commitBatch(taken, outcomes)
	for i, r := range taken {
		r.done <- outcomes[i]
	}
	clear(outcomes) // zero for the next batch, and holding no record
	db.outcomes = outcomes[:0]
}

// maxFrameBytes bounds a frame: a batch of large records (a record can
// be a few megabytes) is written as several, each flushed before the
// next is encoded, rather than as one held whole in memory.
const maxFrameBytes = 8 << 20

// commitBatch fills in each write's outcome.
func (db *DB) commitBatch(batch []*request, outcomes []outcome) {
	var err error
	if db.shut {
		err = fmt.Errorf("boltstore: %w", ErrClosed)
	} else if failed := db.failure(); failed != nil {
		err = fmt.Errorf("boltstore: %s: writes stopped: %w", db.path, failed)
	}
	if err != nil {
		for i := range outcomes {
			outcomes[i] = outcome{err: err}
		}
		return
	}
	gens := db.overlay.snapshot()
	current := gens[len(gens)-1]
	v := &batchView{db: db, gens: gens, frame: append(db.frame[:0], make([]byte, wal.FrameHeaderSize)...), written: db.written}
	start := 0 // the first write of the frame being encoded
	for i, r := range batch {
		// A writer who gave up while its turn came gets nothing
		// written (it waits for this outcome all the same).
		if err := r.ctx.Err(); err != nil {
			outcomes[i] = outcome{err: err}
		} else if r.table != nil {
			rev, err := r.store.applyTable(v, r.table)
			outcomes[i] = outcome{rec: storage.Record{Revision: rev}, err: err}
		} else if r.drop != nil {
			outcomes[i] = outcome{err: r.store.applyDelete(v, r.drop)}
		} else {
			rec, err := r.store.apply(v, r.build)
			outcomes[i] = outcome{rec: rec, err: err}
		}
		if len(v.frame) < maxFrameBytes && i < len(batch)-1 {
			continue
		}
		if err := db.flush(v, current); err != nil {
			for k := start; k < len(batch); k++ {
				if outcomes[k].err == nil {
					outcomes[k] = outcome{err: err}
				}
			}
			break
		}
		for k := start; k <= i; k++ {
			if outcomes[k].err == nil {
				batch[k].store.hub.Notify()
			}
		}
		start = i + 1
	}
	db.frame, db.written = v.frame[:0], reuse(v.written)
	if cap(db.frame) > maxFrameBytes {
		db.frame = nil // one batch of large records: do not keep its buffer
	}
	if db.failure() == nil {
		db.afterBatch(current)
	}
}

// flush appends the frame v has encoded to the log, flushes it and adds
// its writes to the current gen, where the batch's later writes and
// every reader find them.
func (db *DB) flush(v *batchView, current *gen) error {
	v.close() // before the syscalls: a read transaction holds up bbolt's remapping
	if len(v.entries) == 0 {
		return nil
	}
	wal.SealFrame(v.frame)
	if err := current.seg.Append(v.frame); err != nil {
		db.heads.rollback()
		db.fail(err)
		if errors.Is(err, wal.ErrUnnamed) {
			db.rescue() // the leader holds the writer's turn
		}
		return err
	}
	db.heads.commit()
	db.overlay.install(current, v.entries)
	v.entries, v.written = v.entries[:0], reuse(v.written)
	v.frame = v.frame[:wal.FrameHeaderSize]
	return nil
}

// afterBatch hands the current gen to the checkpoint once it is large
// enough, starting a new segment; while one checkpoint is running the
// gen grows, up to checkpointBacklog times the threshold, and then the
// leader waits for the checkpoint.
func (db *DB) afterBatch(current *gen) {
	if !current.full(1, db.checkpointWrites) {
		return
	}
	for db.overlay.frozen() != nil {
		if !current.full(checkpointBacklog, db.checkpointWrites) || db.failure() != nil {
			return
		}
		<-db.dropped
	}
	if err := db.handOver(current); err != nil {
		db.fail(err)
	}
}

// handOver freezes the current gen for the checkpointer, which it wakes,
// and starts the next segment for the writes after it.
func (db *DB) handOver(current *gen) error {
	seg, err := wal.CreateSegment(db.fs, db.logPath, current.seg.Seq+1, db.mode)
	if err != nil {
		return fmt.Errorf("starting a log segment: %w", err)
	}
	db.overlay.rotate(newGen(seg))
	select {
	case db.wake <- struct{}{}:
	default:
	}
	return nil
}

// batchView is what a batch's writes are checked against: the writes
// before them in the batch, then the log's writes not yet in bbolt, then
// bbolt, read in one read transaction (opened when first needed).
type batchView struct {
	db      *DB
	gens    []*gen
	tx      *bolt.Tx
	entries []wal.Entry
	written map[headKey]int // index in entries of each record's latest write
	frame   []byte
}

// lookup returns the bytes stored for id of s, nil if there are none. A
// bucket where a record belongs (a foreign writer) is ErrCorrupt, not
// "no record": it is not overwritten either.
func (v *batchView) lookup(s *Store, id string) ([]byte, error) {
	if i, ok := v.written[s.headKey(id)]; ok {
		if _, gone := wal.DeletedEpoch(v.entries[i].Data); gone {
			return nil, nil
		}
		return v.entries[i].Data, nil
	}
	if l, ok := lookupGens(v.gens, s.namespace, id); ok {
		return l.data, nil
	}
	var data []byte
	err := v.db.closedError(v.read(func(tx *bolt.Tx) error {
		_, records, _ := s.buckets(tx)
		var err error
		data, err = s.lookupBucket(records, id)
		return err
	}))
	return data, err
}

// read runs fn in the batch's read transaction, opened when first needed.
func (v *batchView) read(fn func(tx *bolt.Tx) error) error {
	return filecheck.Guard(v.db.path, "read", func() error {
		if v.tx == nil {
			tx, err := v.db.bolt.Begin(false)
			if err != nil {
				return err
			}
			v.tx = tx
		}
		return fn(v.tx)
	})
}

// add adds the write of data under id of s (a record's in status, a
// delete's, or wal.TableID's for the table's document) at revision to
// the batch.
func (v *batchView) add(s *Store, id string, revision uint64, data []byte, status string) {
	if v.written == nil {
		v.written = map[headKey]int{}
	}
	v.written[s.headKey(id)] = len(v.entries)
	v.entries = append(v.entries, wal.Entry{Revision: revision, Namespace: s.namespace, ID: id, Data: data, Status: status})
	v.frame = wal.AppendEntry(v.frame, revision, s.namespace, id, data)
}

func (v *batchView) close() {
	if v.tx != nil {
		_ = v.tx.Rollback()
		v.tx = nil
	}
}

// apply checks the record build returns and, if it passes, gives it the
// next revision and adds it to the batch. Everything that can refuse the
// write is checked before anything is added, so a refused write leaves
// the batch as it found it.
//
// The new revision is above the counter and above the revision of the
// record being replaced, which a damaged counter could be below: a
// record's revisions never go down.
func (s *Store) apply(v *batchView, build func(v *batchView) (storage.Record, error)) (storage.Record, error) {
	rec, err := build(v)
	if err != nil {
		return storage.Record{}, err
	}
	floor := rec.Revision // build returns the replaced record's revision, or 0
	rec.Revision = max(s.db.revision, floor) + 1
	// Encoded into a buffer the leader keeps, then copied out at its
	// size: the log's memory holds each write until a checkpoint, so a
	// buffer of its own per write is always fresh memory, and encoding
	// into one sized for the longest record it might be (and cleared
	// first) cost 2 µs of a 17 µs Fire on tmpfs.
	encoded, err := rec.AppendBinary(s.db.encoded[:0])
	if err != nil {
		return storage.Record{}, err
	}
	if s.db.encoded = encoded[:0]; cap(encoded) > maxFrameBytes {
		s.db.encoded = nil // one large record: do not keep its buffer
	}
	data := bytes.Clone(encoded)
	s.db.revision = rec.Revision
	v.add(s, rec.ID, rec.Revision, data, rec.Status)
	s.db.heads.wrote(s.headKey(rec.ID), head{revision: rec.Revision, claim: rec.Claim()})
	return rec, nil
}
