package boltstore

import (
	"fmt"
	"sync"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
)

// HoldWriter takes the writer's turn, as a long write would, until the
// returned function is called (once or more).
func (db *DB) HoldWriter() (release func()) {
	db.writer <- struct{}{}
	var once sync.Once
	return func() { once.Do(func() { <-db.writer }) }
}

// Checkpoint applies every write in the log to bbolt now, as the
// checkpointer would once the log is large enough, and returns when it
// is done.
func (db *DB) Checkpoint() error {
	db.writer <- struct{}{}
	defer func() { <-db.writer }()
	if db.shut {
		return fmt.Errorf("boltstore: %w", ErrClosed)
	}
	gens := db.overlay.snapshot()
	if err := db.handOver(gens[len(gens)-1]); err != nil {
		return err
	}
	for db.overlay.frozen() != nil {
		<-db.dropped
		if err := db.failure(); err != nil {
			return err
		}
	}
	return nil
}

// LogSegments returns how many log segments the DB has in memory.
func (db *DB) LogSegments() int { return len(db.overlay.snapshot()) }

// CheckpointEvery makes the leader hand the log to the checkpoint every
// n writes instead of every checkpointWrites.
func (db *DB) CheckpointEvery(n int) {
	db.writer <- struct{}{}
	defer func() { <-db.writer }()
	db.checkpointWrites = n
}

// Crash leaves the files as a SIGKILL would: the log not applied, the
// lock released. The DB is unusable after it.
func (db *DB) Crash() {
	db.writer <- struct{}{} // and never given back: no write after this
	db.mu.Lock()
	db.closed = true
	db.closing = make(chan struct{})
	close(db.closing) // a later Close returns at once
	for _, s := range db.stores {
		s.hub.Close()
	}
	db.mu.Unlock()
	close(db.stopCkp)
	<-db.ckpDone
	for _, g := range db.overlay.snapshot() {
		_ = g.seg.Close()
	}
	_ = db.bolt.Close()
}

// BreakLog closes the segment being appended to under the leader, as a
// disk that refuses writes would leave it: the next append fails.
func (db *DB) BreakLog() {
	db.writer <- struct{}{}
	defer func() { <-db.writer }()
	gens := db.overlay.snapshot()
	_ = gens[len(gens)-1].seg.Close()
}

// Fdatasync flushes f as the log is flushed, for benchmarks that write a
// log by hand.
var Fdatasync = wal.Fdatasync

// Pending returns how many writes wait for a leader.
func (db *DB) Pending() int {
	db.pendingMu.Lock()
	defer db.pendingMu.Unlock()
	return len(db.pending)
}

// LastBatch returns how many writes the last leader committed together.
func (db *DB) LastBatch() int {
	db.writer <- struct{}{}
	defer func() { <-db.writer }()
	return db.lastBatch
}
