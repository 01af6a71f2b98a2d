package boltstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

// How a database file and its write-ahead log know each other: the file
// says whether a log may hold writes it does not (log-from, the oldest
// segment that may) and under which path it was started (log-path); the
// log is named after the file's own path, links resolved. Open checks
// both before it trusts either (see docs/decisions/2026-12-04-write-ahead-log.md).

// openLog reads the log beside the file. A writable DB applies it to
// bbolt, removes it and starts a new segment and the checkpointer; a
// read-only one keeps its writes in memory, as the writer would have.
func (db *DB) openLog(segments []wal.SegmentFile, logged []wal.Entry, seq uint64) error {
	var counter, floor uint64
	err := db.view("Open", func(tx *bolt.Tx) error {
		counter = counterIn(tx)
		if meta := tx.Bucket(metaBucket); meta != nil {
			floor = getUint(meta.Get(revisionFloorKey))
		}
		return nil
	})
	if err != nil {
		return err
	}
	pending := newGen(nil)
	for _, e := range logged {
		if e.Revision > counter { // not yet applied
			pending.add(e)
		}
	}
	db.overlay.revision = max(counter, pending.last, floor)
	if db.readOnly {
		if pending.writes > 0 {
			db.overlay.gens = []*gen{pending}
		}
		return nil
	}
	if err := db.checkpoint(pending, 0); err != nil {
		return err
	}
	// The new segment first, then the file names it, then the old ones
	// go: at no moment does the file name a log that is not there. A
	// file verified in the background (no old segments, nothing to
	// apply) is named by the verifier once the walk has passed: until
	// then nothing is written to the file.
	seg, err := wal.CreateSegment(db.fs, db.logPath, seq+1, db.mode)
	if err != nil {
		return fmt.Errorf("starting the log: %w", err)
	}
	if db.verified == nil {
		if err := db.setLogFrom(seg.Seq); err != nil {
			_ = seg.Remove()
			return err
		}
	}
	for _, sf := range segments {
		if err := db.fs.Remove(sf.Path); err != nil {
			return fmt.Errorf("removing the log %s, now applied: %w", sf.Path, err)
		}
	}
	db.revision = db.overlay.revision
	db.overlay.gens = []*gen{newGen(seg)}
	db.wake = make(chan struct{}, 1)
	db.dropped = make(chan struct{}, 1)
	db.stopCkp = make(chan struct{})
	db.ckpDone = make(chan struct{})
	go db.checkpointer(db.stopCkp, db.ckpDone)
	if db.verified != nil {
		go db.verify(seg.Seq) // once the DB is whole: it may fail it
	}
	return nil
}

// ownPath is path with its symbolic links resolved (its directory's,
// when the file does not exist yet), or path itself when they cannot
// be.
func ownPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}

// logFromIn returns the file's log-from (see logFromKey) and the path
// its log was started under.
func logFromIn(tx *bolt.Tx) (uint64, string) {
	if meta := tx.Bucket(metaBucket); meta != nil {
		return getUint(meta.Get(logFromKey)), string(meta.Get(logPathKey))
	}
	return 0, ""
}

// logFound checks that the log the file names is beside it: a database
// opened under another name (a hard link), or copied or moved without
// its log, would otherwise run on without the writes the log holds, and
// hand their revisions out again.
func logFound(logPath, loggedAs string, segments []wal.SegmentFile, logFrom uint64) error {
	if logFrom == 0 || slices.ContainsFunc(segments, func(sf wal.SegmentFile) bool { return sf.Seq == logFrom }) {
		return nil
	}
	if loggedAs == "" {
		loggedAs = logPath
	}
	return fmt.Errorf("%w: the file says writes it does not hold yet are in its log, from %s on, and no such log is beside %s (opened under another name than its own, or copied or moved without its log?)",
		wal.ErrDamaged, wal.SegmentPath(loggedAs, logFrom), logPath)
}

// verify walks every page of the file in use (filecheck.ValidateOpen,
// inside a read transaction, so that the pages it reads are the ones
// committed whatever commits meanwhile) and, once it passes, names the
// log's first segment seq in the file; then the writes waiting for it
// go on. What it finds wrong stops every write.
func (db *DB) verify(seq uint64) {
	err := db.view("verify", func(*bolt.Tx) error { return filecheck.ValidateOpen(db.path) })
	if err == nil {
		err = db.setLogFromNow(seq)
	}
	db.verifyErr = err
	close(db.verified)
	if err != nil {
		db.fail(fmt.Errorf("boltstore: %s: verifying the file: %w", db.path, err))
	}
}

// setLogFrom records in the file which log segment is the oldest that
// may hold writes it does not (seq, or 0 for none), and the path the
// log is named after.
func (db *DB) setLogFrom(seq uint64) error {
	if db.verified != nil {
		<-db.verified
		if db.verifyErr != nil {
			return db.verifyErr
		}
	}
	return db.setLogFromNow(seq)
}

// setLogFromNow is setLogFrom without waiting for the file's
// verification: the verifier's.
func (db *DB) setLogFromNow(seq uint64) error {
	return db.updateNow("log", func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(logPathKey, []byte(db.logPath)); err != nil {
			return err
		}
		return meta.Put(logFromKey, putUint(seq))
	})
}

// fileCounter returns the revision counter the file should have: above
// every revision it holds. A missing counter (a foreign tool, a damaged
// file) would restart revisions at 1, and a stale compare-and-swap whose
// revision came round again would succeed; it is rebuilt from the
// highest revision present (stored reports whether the file has it
// already). A counter of the wrong length is refused.
func fileCounter(tx *bolt.Tx) (counter uint64, stored bool, err error) {
	var raw []byte
	if meta := tx.Bucket(metaBucket); meta != nil {
		raw = meta.Get(revisionKey)
	}
	if raw != nil && len(raw) != 8 {
		return 0, false, fmt.Errorf("%w: the revision counter is %d bytes, want 8", filecheck.ErrDamaged, len(raw))
	}
	counter = getUint(raw)
	highest := counter
	err = tx.ForEach(func(name []byte, ns *bolt.Bucket) error {
		if !bytes.HasPrefix(name, []byte("ns/")) {
			return nil
		}
		highest = max(highest, getUint(ns.Get(droppedKey)))
		if log := ns.Bucket(logKey); log != nil {
			if k, _ := log.Cursor().Last(); k != nil {
				highest = max(highest, getUint(k))
			}
		}
		if raw != nil {
			return nil // the log is the latest writes: enough unless the counter went
		}
		if records := ns.Bucket(recordsKey); records != nil {
			return records.ForEach(func(_, v []byte) error {
				var rec storage.Record
				if rec.UnmarshalBinary(v) == nil {
					highest = max(highest, rec.Revision)
				}
				return nil
			})
		}
		return nil
	})
	return highest, raw != nil && highest == counter, err
}
