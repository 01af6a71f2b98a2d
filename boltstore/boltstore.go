// Package boltstore is a durable [storage.Store] in one file on local
// disk, on go.etcd.io/bbolt: the default for a controller that runs on a
// single machine. Every write is flushed to disk before it returns, so a
// record acknowledged by CompareAndSwap survives a SIGKILL or a power
// cut. Writes that wait together are committed together (group commit):
// one append to a write-ahead log and one flush for all of them, each
// still checked, and refused, on its own. The log is applied to the
// bbolt file in the background, thousands of writes a transaction, and
// when the DB is closed.
//
// bbolt holds an exclusive lock on the file: one process at a time. A
// second process opening it waits Options.Timeout and then fails with
// [ErrLocked]; it never hangs. Opened with Options.ReadOnly, readers
// share the file with one another, but not with a writer: while a
// controller has the file open, nobody else can read it either.
// Controllers that must share state across processes or machines use
// etcdstore.
//
// # Layout and format
//
// One bucket per namespace (see [DB.Store]), holding the records by id
// and a log of recent writes for [Store.Watch]. Beside the file, while
// a DB is open or after a crash, the write-ahead log: segment files
// named after it ("<path>.wal-0000000000000001" and so on), holding the
// writes not yet applied to it. They are part of the database: a copy
// of the file without them (taken while a controller runs, or after a
// crash) lacks the latest writes. Open applies them and removes them;
// a read-only Open reads them without changing anything; after Close
// the file alone holds everything. A log whose acknowledged writes are
// damaged is refused by Open with an error matching
// [storage.ErrCorrupt] that names the segment; a write cut short by a
// crash, never acknowledged, is dropped. Revisions come from one
// counter per file, so they increase across namespaces. A record is
// stored as [storage.Record.MarshalBinary] writes it: a format byte
// (1: JSON) and the JSON document. A record that does not decode (a
// foreign writer, a future format, bit rot) is reported with its
// namespace and id, matching [storage.ErrCorrupt], and is never
// overwritten: CompareAndSwap on it fails too.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/internal/locallease"
	"github.com/execfsm/execfsm/internal/quote"
	"github.com/execfsm/execfsm/internal/watchlog"
	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrLocked is matched by the error of Open when another process holds
// the file.
var ErrLocked = errors.New("database file is locked by another process")

// ErrReadOnly is matched by the writes of a store opened with
// Options.ReadOnly.
var ErrReadOnly = errors.New("database is open read-only")

// ErrClosed is matched by calls on a closed DB.
var ErrClosed = errors.New("database is closed")

// Defaults for zero Options.
const (
	DefaultTimeout = time.Second
	DefaultLogSize = 100_000
)

// Options configure [Open]. The zero value is usable.
type Options struct {
	// Timeout is how long Open waits for a lock held by another process
	// (default DefaultTimeout). It is never infinite.
	Timeout time.Duration
	// LogSize is how many recent writes per namespace the file keeps
	// for Watch to replay (default DefaultLogSize); a watch from further
	// back starts with every record. The writes in the write-ahead log,
	// not yet applied to the file, are all replayed too.
	LogSize int
	// Mode is the permission of a new file (default 0600).
	Mode os.FileMode
	// ReadOnly opens an existing file for reading only, under bbolt's
	// shared lock: read-only opens do not exclude one another, but a
	// process holding the file for writing (a running controller)
	// excludes them all, so while it runs a read-only Open waits Timeout
	// and fails with ErrLocked like any other. Writes fail with
	// ErrReadOnly; DB.Store of a namespace the file does not hold fails
	// with storage.ErrNotFound; Watch replays the log and then waits for
	// nothing, since no process can write while the file is open.
	ReadOnly bool
}

// Errors of zero values, which are not usable: the methods that could
// touch a file return them instead of panicking.
var (
	errZeroDB    = errors.New("boltstore: zero DB: open one with Open")
	errZeroStore = errors.New("zero Store: get one with DB.Store")
	errNilStore  = errors.New("nil *Store: get one with DB.Store")
)

// DB is an open database file. It is safe for concurrent use.
type DB struct {
	bolt     *bolt.DB
	path     string // as given to Open
	logPath  string // the file's own path, symbolic links resolved: its log is named after it
	fs       wal.FS // where the log is
	logSize  int
	readOnly bool

	mu     sync.Mutex
	stores map[string]*Store
	closed bool
	// closing is closed when the first Close has finished, closeErr
	// then holding its error: a Close racing it waits for it.
	closing  chan struct{}
	closeErr error

	// pending are the writes queued for the next leader (see commit.go).
	// writer is the leader's turn: it admits one write transaction at a
	// time, and waiting for it, unlike for bbolt's own writer lock, lets
	// a call give up at its deadline rather than long after it.
	pendingMu sync.Mutex
	pending   []*request
	writer    chan struct{}
	// The holder of the writer's turn owns these: heads (see heads.go);
	// lastBatch, how many writes the last leader committed (and woke);
	// revision, the last one given out; frame, the buffer a batch is
	// encoded in; shut, set by Close.
	heads     heads
	lastBatch int
	revision  uint64
	frame     []byte
	shut      bool

	// The log (see wal.go and overlay.go). wake hands the checkpointer
	// a frozen gen; dropped tells a waiting leader one was applied.
	overlay          overlay
	checkpointWrites int // checkpointWrites, or fewer in tests
	mode             os.FileMode
	wake             chan struct{}
	dropped          chan struct{}
	stopCkp          chan struct{}
	ckpDone          chan struct{}
	failMu           sync.Mutex
	failed           error
}

var (
	metaBucket  = []byte("execfsm")
	revisionKey = []byte("revision")
	recordsKey  = []byte("records")
	logKey      = []byte("log")
	droppedKey  = []byte("dropped")
	logCountKey = []byte("log-count")
	// logFromKey is the sequence number of the oldest log segment that
	// may hold writes the file does not, or zero when none may: how the
	// file knows that it has a log, and which (see openLog).
	logFromKey = []byte("log-from")
	// logPathKey is the path the log was last started under, to say
	// where it is when it is not beside the file.
	logPathKey = []byte("log-path")
	// revisionFloorKey is set by RepairLog: revisions up to it were
	// handed out by writes it dropped, and the next one given is above
	// it, so that none comes round again.
	revisionFloorKey = []byte("revision-floor")
)

// Open opens or creates the database at path. The zero Options are the
// defaults.
func Open(path string, opts Options) (*DB, error) { return open(path, opts, wal.OS{}) }

// open is Open with the log on fs.
func open(path string, opts Options, fs wal.FS) (*DB, error) {
	o := opts
	switch {
	case o.Timeout < 0:
		return nil, fmt.Errorf("boltstore: Open %s: negative Timeout %v", path, o.Timeout)
	case o.LogSize < 0:
		return nil, fmt.Errorf("boltstore: Open %s: negative LogSize %d", path, o.LogSize)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LogSize == 0 {
		o.LogSize = DefaultLogSize
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	// bbolt makes a fresh database of an empty file. An empty file where
	// a database should be is a database that lost its contents (or was
	// never written): refuse it rather than start from nothing.
	if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Size() == 0 {
		return nil, fmt.Errorf("boltstore: Open %s: %w: the file is empty (remove it to start a new database)", path, filecheck.ErrDamaged)
	}
	if err := filecheck.Validate(path, !o.ReadOnly); err != nil {
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	// The log is named after the file itself: opened through a symbolic
	// link, the database still finds it.
	logPath := ownPath(path)
	// bbolt would make a new file where the database went missing, and
	// the log beside it would be applied to nothing.
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if segments, err := wal.ListSegments(fs, logPath); err == nil && len(segments) > 0 {
			return nil, fmt.Errorf("boltstore: Open %s: %w: the file is missing and its log %s is there", path, filecheck.ErrDamaged, segments[0].Path)
		}
	}
	var b *bolt.DB
	err := filecheck.Guard(path, "Open", func() error {
		var err error
		b, err = bolt.Open(path, o.Mode, &bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly})
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: Open %s: %w (waited %v)", path, ErrLocked, o.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, openError(err))
	}
	// The log is read under bbolt's lock (a running writer appends to it
	// and removes it) and before the first write to the file: a damaged
	// log leaves both as they were.
	segments, err := wal.ListSegments(fs, logPath)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	segs, err := wal.ReadSegments(fs, segments, false)
	var logged []wal.Entry
	var counter, logFrom uint64
	var loggedAs string
	var stored bool
	if err == nil {
		err = filecheck.Guard(path, "Open", func() error {
			return b.View(func(tx *bolt.Tx) (err error) {
				counter, stored, err = fileCounter(tx)
				logFrom, loggedAs = logFromIn(tx)
				return err
			})
		})
	}
	if err == nil {
		err = logFound(logPath, loggedAs, segments, logFrom)
	}
	if err == nil {
		var faults []wal.Fault
		if logged, faults = wal.Scan(segs, counter); len(faults) > 0 {
			err = faults[0].Err
		}
	}
	if err == nil && !o.ReadOnly && !stored { // a reader needs no counter: only writes take revisions
		err = filecheck.Guard(path, "Open", func() error {
			return b.Update(func(tx *bolt.Tx) error {
				meta, err := tx.CreateBucketIfNotExists(metaBucket)
				if err != nil {
					return err
				}
				return meta.Put(revisionKey, putUint(counter))
			})
		})
	}
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	db := &DB{bolt: b, path: path, logPath: logPath, fs: fs, logSize: o.LogSize, readOnly: o.ReadOnly, mode: o.Mode, checkpointWrites: checkpointWrites,
		stores: map[string]*Store{}, writer: make(chan struct{}, 1)}
	var seq uint64 // of the last segment: the next one follows it
	if len(segments) > 0 {
		seq = segments[len(segments)-1].Seq
	}
	if err := db.openLog(segments, logged, seq); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	return db, nil
}

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
	// go: at no moment does the file name a log that is not there.
	seg, err := wal.CreateSegment(db.fs, db.logPath, seq+1, db.mode)
	if err != nil {
		return fmt.Errorf("starting the log: %w", err)
	}
	if err := db.setLogFrom(seg.Seq); err != nil {
		_ = seg.Remove()
		return err
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

// setLogFrom records in the file which log segment is the oldest that
// may hold writes it does not (seq, or 0 for none), and the path the
// log is named after.
func (db *DB) setLogFrom(seq uint64) error {
	return db.update("log", func(tx *bolt.Tx) error {
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

// openError makes the errors bbolt gives for a damaged file match
// storage.ErrCorrupt; others (permissions, a missing directory) stay
// as they are.
func openError(err error) error {
	switch {
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrInvalidMapping),
		strings.HasPrefix(err.Error(), "file size too small"):
		return fmt.Errorf("%w: %v", filecheck.ErrDamaged, err)
	}
	return err
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

// Close ends every watch, applies what the log holds to the file and
// removes the log, and releases the file and its lock: once it returns,
// the file alone holds everything. Calling it again is safe: a Close
// racing another waits until that one is done and returns its error.
func (db *DB) Close() error {
	if db.bolt == nil {
		return errZeroDB
	}
	db.mu.Lock()
	if db.closed {
		done := db.closing
		db.mu.Unlock()
		<-done
		return db.closeErr
	}
	db.closed = true
	db.closing = make(chan struct{})
	stores := slices.Collect(maps.Values(db.stores))
	db.mu.Unlock()
	db.closeErr = db.close(stores)
	close(db.closing)
	return db.closeErr
}

// close is Close's work, done once.
func (db *DB) close(stores []*Store) error {
	// Ownerships end before the writers stop: ending one waits for its
	// writes in flight, which commit as usual (no new write starts now).
	for _, s := range stores {
		s.hub.Close()
		s.owners.Close(fmt.Errorf("boltstore: %w", ErrClosed))
	}
	if db.readOnly {
		return db.bolt.Close()
	}
	// Wait for the batch being committed; the leaders after it find
	// shut and fail their writes with ErrClosed.
	db.writer <- struct{}{}
	defer func() { <-db.writer }()
	db.shut = true
	close(db.stopCkp)
	<-db.ckpDone
	// Apply what is left of the log, so that the file alone holds
	// everything: tools that open it with bbolt directly see it all.
	// This is tried even after a failure: the gens hold only writes
	// that were acknowledged, whatever the segment's tail holds. The
	// file says it has no log before the segments go.
	var errs []error
	gens := db.overlay.snapshot()
	applied := 0
	for k, g := range gens {
		var next uint64
		if k+1 < len(gens) {
			next = gens[k+1].seg.Seq
		}
		if err := db.checkpoint(g, next); err != nil {
			errs = append(errs, err)
			break
		}
		applied++
	}
	if applied == len(gens) {
		if err := db.setLogFrom(0); err != nil {
			errs = append(errs, err)
			applied = 0 // the file still names its log: keep it
		}
	}
	for k, g := range gens {
		if k >= applied {
			_ = g.seg.Close() // not applied: the next Open replays it
			continue
		}
		db.overlay.drop(g)
		if err := g.seg.Remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err) // the next Open skips what it holds
		}
	}
	return errors.Join(append(errs, db.bolt.Close())...)
}

// Check reads the whole file, every bucket and every key and value of it,
// decodes every record of every namespace, reads the log's segments
// again and makes sure the ones the store writes to are still there
// under their names, returning every problem it finds, joined (each
// matching storage.ErrCorrupt); nil means everything reads. It is not
// bbolt's Tx.Check, which runs in a goroutine of its own where a damaged
// page's panic cannot be recovered and kills the process.
func (db *DB) Check() error {
	if db.bolt == nil {
		return errZeroDB
	}
	var errs []error
	err := db.view("Check", func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return checkBucket(b, name, &errs)
		})
	})
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, db.checkLog())
	for _, g := range db.overlay.snapshot() {
		// A gen still in the overlay after its segment failed the look
		// was not applied yet: the checkpointer drops a gen before it
		// removes its segment.
		if g.seg != nil {
			if err := g.seg.StillNamed(); err != nil && slices.Contains(db.overlay.snapshot(), g) && !db.isClosed() {
				errs = append(errs, err)
			}
		}
	}
	stores, err := db.namespaces()
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range stores {
		if _, bad, err := s.List(context.Background()); err != nil {
			errs = append(errs, err)
		} else {
			for _, u := range bad {
				errs = append(errs, u.Err)
			}
		}
	}
	return errors.Join(errs...)
}

func (db *DB) isClosed() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.closed
}

// namespaces returns a Store for every namespace the file holds, and
// for those opened since: Check decodes the records of all of them, not
// only of those this process happens to have opened.
func (db *DB) namespaces() ([]*Store, error) {
	db.mu.Lock()
	byName := maps.Clone(db.stores)
	db.mu.Unlock()
	err := db.view("Check", func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			namespace, ok := strings.CutPrefix(string(name), "ns/")
			if !ok || byName[namespace] != nil || b.Bucket(recordsKey) == nil || wal.CheckNamespace(namespace) != nil {
				return nil
			}
			byName[namespace] = &Store{db: db, namespace: namespace, bucket: []byte("ns/" + namespace)}
			return nil
		})
	})
	return slices.Collect(maps.Values(byName)), err
}

// checkBucket reads every key and value under b.
func checkBucket(b *bolt.Bucket, path []byte, errs *[]error) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			child := b.Bucket(k)
			if child == nil {
				*errs = append(*errs, fmt.Errorf("%w: %s/%s: neither a value nor a bucket", filecheck.ErrDamaged, path, k))
				return nil
			}
			return checkBucket(child, append(append(append([]byte(nil), path...), '/'), k...), errs)
		}
		return nil
	})
}

// view and update run a bbolt transaction guarded against damaged pages
// (see filecheck.Guard), and say ErrClosed for a closed database.
func (db *DB) view(op string, fn func(*bolt.Tx) error) error {
	return db.closedError(filecheck.Guard(db.path, op, func() error { return db.bolt.View(fn) }))
}

func (db *DB) update(op string, fn func(*bolt.Tx) error) error {
	return db.closedError(filecheck.Guard(db.path, op, func() error { return db.bolt.Update(fn) }))
}

func (db *DB) closedError(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("boltstore: %w", ErrClosed)
	}
	return err
}

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Store returns the store of namespace, creating its bucket if needed.
// Namespaces keep unrelated lifecycles (executions, simulators) apart in
// one file; a namespace is 1 to 128 bytes of UTF-8.
func (db *DB) Store(namespace string) (*Store, error) {
	if db.bolt == nil {
		return nil, errZeroDB
	}
	if err := wal.CheckNamespace(namespace); err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, fmt.Errorf("boltstore: %w", ErrClosed)
	}
	if s, ok := db.stores[namespace]; ok {
		return s, nil
	}
	name := []byte("ns/" + namespace)
	var err error
	if db.readOnly {
		err = db.view("Store", func(tx *bolt.Tx) error {
			ns := tx.Bucket(name)
			if ns == nil || ns.Bucket(recordsKey) == nil || ns.Bucket(logKey) == nil {
				return fmt.Errorf("%w: the file holds no such namespace (a read-only database cannot create it)", storage.ErrNotFound)
			}
			return nil
		})
	} else {
		err = db.update("Store", func(tx *bolt.Tx) error {
			_, _, _, err := createNamespace(tx, name)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: namespace %q: %w", namespace, err)
	}
	s := &Store{db: db, namespace: namespace, bucket: name}
	db.stores[namespace] = s
	return s, nil
}

// Store is one namespace of a [DB]. It implements [storage.Store],
// [storage.Lister] and [storage.Watcher], and is safe for
// concurrent use.
type Store struct {
	db        *DB
	namespace string
	bucket    []byte
	hub       watchlog.Hub
	owners    locallease.Table
}

var (
	_ storage.Store   = (*Store)(nil)
	_ storage.Lister  = (*Store)(nil)
	_ storage.Watcher = (*Store)(nil)
)

func (s *Store) check(ctx context.Context, op string) error {
	if s == nil {
		return fmt.Errorf("boltstore: %s: %w", op, errNilStore)
	}
	if s.db == nil {
		return fmt.Errorf("boltstore: %s: %w", op, errZeroStore)
	}
	if err := storage.CheckContext(ctx, "boltstore", op); err != nil {
		return err
	}
	s.db.mu.Lock()
	closed := s.db.closed
	s.db.mu.Unlock()
	if closed {
		return fmt.Errorf("boltstore: %s: %w", op, ErrClosed)
	}
	return nil
}

// createNamespace returns the buckets of the namespace bucket name,
// creating those missing.
func createNamespace(tx *bolt.Tx, name []byte) (ns, records, log *bolt.Bucket, err error) {
	if ns, err = tx.CreateBucketIfNotExists(name); err != nil {
		return nil, nil, nil, err
	}
	if records, err = ns.CreateBucketIfNotExists(recordsKey); err != nil {
		return nil, nil, nil, err
	}
	if log, err = ns.CreateBucketIfNotExists(logKey); err != nil {
		return nil, nil, nil, err
	}
	return ns, records, log, nil
}

func (s *Store) buckets(tx *bolt.Tx) (ns, records, log *bolt.Bucket) {
	ns = tx.Bucket(s.bucket)
	return ns, ns.Bucket(recordsKey), ns.Bucket(logKey)
}

// decode reads the record stored under id.
func (s *Store) decode(id string, data []byte) (storage.Record, error) {
	var rec storage.Record
	if err := rec.UnmarshalBinary(data); err != nil {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", s.namespace, quote.Limited(id), err)
	}
	if rec.ID != id {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w: it names itself %s",
			s.namespace, quote.Limited(id), storage.ErrCorrupt, quote.Limited(rec.ID))
	}
	return rec, nil
}

// Get implements [storage.Store].
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := s.check(ctx, "Get"); err != nil {
		return storage.Record{}, err
	}
	if err := storage.ValidateID(id); err != nil {
		return storage.Record{}, err
	}
	if l, ok := s.db.overlay.get(s.namespace, id); ok {
		return s.decode(id, l.data)
	}
	// Not in the log: bbolt holds the latest write, unless one comes
	// after this read began, which is as good as after it returned.
	var rec storage.Record
	err := s.db.view("read", func(tx *bolt.Tx) error {
		_, records, _ := s.buckets(tx)
		data, err := s.lookupBucket(records, id)
		if err != nil {
			return err
		}
		rec, err = s.found(id, data)
		return err
	})
	return rec, err
}

// Create implements [storage.Store].
func (s *Store) Create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	if err := s.check(ctx, "Create"); err != nil {
		return storage.Record{}, err
	}
	if err := rec.Validate(); err != nil {
		return storage.Record{}, err
	}
	return s.write(ctx, func(v *batchView) (storage.Record, error) {
		if data, err := v.lookup(s, rec.ID); err != nil {
			return storage.Record{}, err
		} else if data != nil {
			return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", s.namespace, quote.Limited(rec.ID), storage.ErrExists)
		}
		rec.Revision = 0 // a new record: no floor
		return rec, nil
	})
}

// CompareAndSwap implements [storage.Store].
func (s *Store) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if err := s.check(ctx, "CompareAndSwap"); err != nil {
		return storage.Record{}, err
	}
	if next.ID != id {
		return storage.Record{}, fmt.Errorf("boltstore: CompareAndSwap %s: %w: record id is %s", quote.Limited(id), storage.ErrInvalidRecord, quote.Limited(next.ID))
	}
	if err := next.Validate(); err != nil {
		return storage.Record{}, err
	}
	return s.write(ctx, func(v *batchView) (storage.Record, error) {
		cur, err := s.head(v, id)
		if err != nil {
			return storage.Record{}, err
		}
		if cur.revision != expect {
			full, err := s.current(v, id)
			if err != nil {
				return storage.Record{}, err
			}
			return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: full}
		}
		if next.Claim() != cur.claim {
			return storage.Record{}, storage.ClaimChanged(id, cur.claim, next.Claim())
		}
		next.Revision = cur.revision
		return next, nil
	})
}

// current reads record id as a batch's write sees it. A record that does
// not decode is an error: it is never overwritten.
func (s *Store) current(v *batchView, id string) (storage.Record, error) {
	data, err := v.lookup(s, id)
	if err != nil {
		return storage.Record{}, err
	}
	return s.found(id, data)
}

// found decodes the bytes lookup found for id.
func (s *Store) found(id string, data []byte) (storage.Record, error) {
	if data == nil {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", s.namespace, quote.Limited(id), storage.ErrNotFound)
	}
	return s.decode(id, data)
}

// lookupBucket returns the bytes bbolt holds for id, nil if there are
// none. A bucket where a record belongs (a foreign writer) is
// ErrCorrupt, not "no record": it is not overwritten either.
func (s *Store) lookupBucket(records *bolt.Bucket, id string) ([]byte, error) {
	if records.Bucket([]byte(id)) != nil {
		return nil, fmt.Errorf("boltstore: namespace %q, record %s: %w: a bucket, not a record", s.namespace, quote.Limited(id), storage.ErrCorrupt)
	}
	return records.Get([]byte(id)), nil
}

// Acquire implements [storage.Store]. The ownership lives in this
// process, which holds the file's lock: it lasts until released or until
// the DB is closed (see [storage.Ownership]). A process that opens the
// file after another one died finds nothing held.
func (s *Store) Acquire(ctx context.Context, id string, lease storage.Lease) (storage.Ownership, storage.Record, error) {
	if err := s.check(ctx, "Acquire"); err != nil {
		return nil, storage.Record{}, err
	}
	if err := lease.Validate(); err != nil {
		return nil, storage.Record{}, err
	}
	var written storage.Record
	h, err := s.owners.Acquire(ctx, id, lease.Wait, func() (string, uint64, error) {
		var err error
		written, err = s.write(ctx, func(v *batchView) (storage.Record, error) {
			cur, err := s.current(v, id)
			if err != nil {
				return storage.Record{}, err
			}
			return lease.TakeOver(cur, cur.Epoch+1, time.Now())
		})
		return written.Owner, written.Epoch, err
	})
	if err != nil {
		var busy *locallease.BusyError
		if errors.As(err, &busy) {
			held := &storage.HeldError{ID: id, Holder: busy.Holder, Waited: busy.Waited}
			if rec, err := s.Get(context.WithoutCancel(ctx), id); err == nil {
				held.Status = rec.Status
			}
			return nil, storage.Record{}, held
		}
		return nil, storage.Record{}, err
	}
	return ownership{h: h, store: s, id: id}, written, nil
}

// Held implements [storage.Store].
func (s *Store) Held(ctx context.Context, id string) (storage.Claim, bool, error) {
	if err := s.check(ctx, "Held"); err != nil {
		return storage.Claim{}, false, err
	}
	owner, epoch, ok := s.owners.Holder(id)
	return storage.Claim{Owner: owner, Epoch: epoch}, ok, nil
}

// ownership is an ownership held in this process.
type ownership struct {
	h     *locallease.Held
	store *Store
	id    string
}

func (o ownership) Claim() storage.Claim {
	return storage.Claim{Owner: o.h.Owner, Epoch: o.h.Epoch}
}
func (o ownership) Lost() <-chan struct{}         { return o.h.Lost() }
func (o ownership) Release(context.Context) error { o.h.Release(); return nil }

// CompareAndSwap implements [storage.Ownership]: the write is made, and
// committed, while the ownership lasts; Release waits for it.
func (o ownership) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	claim := o.Claim()
	if err := storage.KeepsOwnClaim(o.id, claim, next); err != nil {
		return storage.Record{}, err
	}
	var (
		written storage.Record
		err     error
	)
	if !o.h.Write(func() { written, err = o.store.CompareAndSwap(ctx, o.id, expect, next) }) {
		return storage.Record{}, &storage.FencedError{ID: o.id, Owner: claim.Owner, Epoch: claim.Epoch, Lost: true}
	}
	return written, err
}

// logWrite appends to the watch log and keeps it at LogSize entries,
// trimming the oldest as it goes: O(1) on every write, not just on
// average.
func logWrite(ns, log *bolt.Bucket, rev uint64, id string, logSize int) error {
	if err := log.Put(putUint(rev), []byte(id)); err != nil {
		return err
	}
	count := getUint(ns.Get(logCountKey)) + 1
	if count > uint64(logSize) {
		// Trim a little on every write instead of half the log at once:
		// deleting logSize keys in one transaction every logSize writes
		// made that one write, and the batch it belongs to, the slowest
		// of all. Two per write is enough to bring back a log that grew
		// past its size (one opened with a smaller LogSize).
		c := log.Cursor()
		var dropped uint64
		k, _ := c.First()
		for trimmed := 0; k != nil && count > uint64(logSize) && trimmed < 2; trimmed++ {
			dropped = getUint(k)
			if err := c.Delete(); err != nil {
				return err
			}
			count--
			k, _ = c.First()
		}
		if dropped != 0 {
			if err := ns.Put(droppedKey, putUint(dropped)); err != nil {
				return err
			}
		}
	}
	return ns.Put(logCountKey, putUint(count))
}

// List implements [storage.Lister]. A record that does not decode is
// listed apart, naming it, and the others are listed as usual. The
// records are those of one revision.
func (s *Store) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	if err := s.check(ctx, "List"); err != nil {
		return nil, nil, err
	}
	var out []storage.Record
	var bad []storage.Unreadable
	take := func(id string, data []byte) {
		rec, err := s.decode(id, data)
		if err != nil {
			bad = append(bad, storage.Unreadable{ID: id, Err: err})
			return
		}
		out = append(out, rec)
	}
	err := s.db.consistent("read", s.namespace, func(tx *bolt.Tx, logged map[string]logged, _ uint64) error {
		out, bad = out[:0], bad[:0]
		_, records, _ := s.buckets(tx)
		err := records.ForEach(func(k, v []byte) error {
			if l, ok := logged[string(k)]; ok {
				take(string(k), l.data)
				delete(logged, string(k))
				return nil
			}
			if v == nil { // a nested bucket where a record belongs
				_, err := s.lookupBucket(records, string(k))
				bad = append(bad, storage.Unreadable{ID: string(k), Err: err})
				return nil
			}
			take(string(k), v)
			return nil
		})
		for id, l := range logged { // new since bbolt last had the log applied
			take(id, l.data)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(out, func(a, b storage.Record) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(bad, func(a, b storage.Unreadable) int { return strings.Compare(a.ID, b.ID) })
	return out, bad, nil
}

// consistent runs fn with a read transaction and the writes of namespace
// in the log that it does not hold (the latest of each record): the
// store at one revision (see overlay.go). fn may run more than once.
func (db *DB) consistent(op, namespace string, fn func(tx *bolt.Tx, logged map[string]logged, revision uint64) error) error {
	var logged map[string]logged
	var revision uint64
	return db.atOneRevision(op, func() uint64 {
		logged, revision = db.overlay.records(namespace)
		return revision
	}, func(tx *bolt.Tx, counter uint64) error {
		for id, l := range logged {
			if l.revision <= counter {
				delete(logged, id) // applied: bbolt has it
			}
		}
		return fn(tx, logged, revision)
	})
}

// atOneRevision runs take, which copies what a read needs from the gens
// and returns the revision they are at, then fn in a read transaction
// with the revision bbolt holds every write up to; both again if a
// checkpoint landed between them (see overlay.go).
func (db *DB) atOneRevision(op string, take func() uint64, fn func(tx *bolt.Tx, counter uint64) error) error {
	for {
		revision := take()
		again := false
		err := db.view(op, func(tx *bolt.Tx) error {
			counter := counterIn(tx)
			if counter > revision {
				again = true
				return nil
			}
			return fn(tx, counter)
		})
		if !again {
			return err
		}
	}
}

// Watch implements [storage.Watcher]. Watches end when the DB closes.
func (s *Store) Watch(ctx context.Context, fromRevision uint64) (<-chan storage.WatchEvent, error) {
	if err := s.check(ctx, "Watch"); err != nil {
		return nil, err
	}
	return watchlog.Channel(ctx, &s.hub, boltLog{s}, fromRevision, func(e watchlog.Entry) storage.WatchEvent {
		return storage.WatchEvent{ID: e.ID, Revision: e.Revision}
	}), nil
}

type boltLog struct{ s *Store }

func (l boltLog) Since(rev uint64, limit int) ([]watchlog.Entry, bool, error) {
	var out, logged []watchlog.Entry
	compacted := false
	err := l.s.db.atOneRevision("watch", func() uint64 {
		var revision uint64
		logged, revision = l.s.db.overlay.since(l.s.namespace, rev)
		return revision
	}, func(tx *bolt.Tx, counter uint64) error {
		ns, _, log := l.s.buckets(tx)
		if rev < getUint(ns.Get(droppedKey)) {
			compacted = true
			return nil
		}
		c := log.Cursor()
		for k, v := c.Seek(putUint(rev + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 {
				continue // not a log entry (tampered): no event for a record that was never written
			}
			out = append(out, watchlog.Entry{ID: string(v), Revision: getUint(k)})
		}
		for _, e := range logged {
			if len(out) == limit {
				break
			}
			if e.Revision > counter {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, compacted, err
}

func (l boltLog) Snapshot() ([]watchlog.Entry, uint64, error) {
	var out []watchlog.Entry
	var rev uint64
	err := l.s.db.consistent("watch", l.s.namespace, func(tx *bolt.Tx, logged map[string]logged, revision uint64) error {
		out = out[:0]
		_, records, _ := l.s.buckets(tx)
		rev = revision
		err := records.ForEach(func(k, v []byte) error {
			e := watchlog.Entry{ID: string(k), Revision: rev}
			if lg, ok := logged[string(k)]; ok {
				e.Revision = lg.revision
				delete(logged, string(k))
			} else if rec, err := l.s.decode(string(k), v); err == nil {
				e.Revision = rec.Revision
			} // a corrupt record is still announced: its reader gets the error
			out = append(out, e)
			return nil
		})
		for id, lg := range logged {
			out = append(out, watchlog.Entry{ID: id, Revision: lg.revision})
		}
		return err
	})
	return out, rev, err
}

// counterIn returns the revision counter bbolt holds: every write up to
// it is in the file.
func counterIn(tx *bolt.Tx) uint64 {
	if meta := tx.Bucket(metaBucket); meta != nil {
		return getUint(meta.Get(revisionKey))
	}
	return 0
}

func putUint(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getUint(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
