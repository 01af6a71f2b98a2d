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
// the file alone holds everything. A segment removed or replaced while
// the DB is open (found by the next write or [DB.Check]) stops writes,
// and every write acknowledged before is applied to the file at once, so
// that a crash after it loses none. A log whose acknowledged writes are
// damaged is refused by Open with an error matching
// [storage.ErrCorrupt] that names the segment; a write cut short by a
// crash, never acknowledged, is dropped. Revisions come from one
// counter per file, so they increase across namespaces. A record is
// stored as [storage.Record.MarshalBinary] writes it: a format byte
// (1: JSON) and the JSON document. A record that does not decode (a
// foreign writer, a future format, bit rot) is reported with its
// namespace and id, matching [storage.ErrCorrupt], and is never
// overwritten: CompareAndSwap on it fails too. A [Store.Delete] is an
// entry of the log like a write (a tombstone carrying the record's
// epoch); applied, it removes the record and raises the namespace's
// epoch floor, kept in its bucket, above which every take-over goes.
package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
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
	// VerifyInBackground opens a file whose log is empty (closed cleanly
	// last time) after checking its meta pages only, and verifies every
	// page it uses (the walk Open otherwise makes first, a few hundred
	// milliseconds for a million records) while the controller starts.
	// Nothing is written to the file until the walk has passed: writes
	// are acknowledged into the log meanwhile, and a walk that finds
	// damage stops every write (their error matches storage.ErrCorrupt;
	// the log keeps what was acknowledged). What it gives up: a read of a
	// damaged page before the walk reaches it returns an error rather
	// than Open refusing the file (and a build with the race detector's
	// pointer checks may not survive it), and a copy of the file taken
	// meanwhile without its log does not say it lacks one. A file with
	// writes in its log to apply is verified first, as without the
	// option; a read-only open always is.
	VerifyInBackground bool
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
	// encoded in; encoded, the buffer each record is encoded in before
	// it is copied out; written, the batch's index of its writes (see
	// batchView), and outcomes, its writes' outcomes, kept for the
	// next; shut, set by Close.
	heads     heads
	lastBatch int
	revision  uint64
	frame     []byte
	encoded   []byte
	written   map[headKey]int
	outcomes  []outcome
	shut      bool
	rescued   bool // rescue applied the log's writes to the file

	// verified is closed once the file's pages are verified (nil: they
	// were at Open), verifyErr then holding what was wrong; nothing is
	// written to the file before (see update).
	verified  chan struct{}
	verifyErr error

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
	tableKey    = []byte("table") // the namespace's table document, after its revision (8 bytes)
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
	// epochFloorKey, in a namespace's bucket, is the highest epoch a
	// record deleted from it had: a take-over writes an epoch above it,
	// so an id created again never gets back an epoch of its old life.
	epochFloorKey = []byte("epoch-floor")
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
	background := o.VerifyInBackground && !o.ReadOnly
	b, err := openBolt(path, "Open", o.Mode, o.Timeout, o.ReadOnly, !background)
	if err != nil {
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	// The log is read under bbolt's lock (a running writer appends to it
	// and removes it) and before the first write to the file: a damaged
	// log leaves both as they were.
	segments, err := wal.ListSegments(fs, logPath)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	logged, counter, stored, err := readLog(fs, b, path, logPath, segments)
	if err == nil && background && (len(segments) > 0 || !stored) {
		// A log to apply, or a file without its counter: the file is
		// written at once, so verified first.
		err = filecheck.Guard(path, "Open", func() error {
			return b.View(func(*bolt.Tx) error { return filecheck.ValidateOpen(path) })
		})
		background = false
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
	if background {
		db.verified = make(chan struct{})
	}
	if err := db.openLog(segments, logged, seq); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("boltstore: Open %s: %w", path, err)
	}
	return db, nil
}

// readLog reads the log's segments and the file's counter and log-from,
// checks that the log is the one the file names, and returns the
// log's writes the file does not hold yet (above counter) and whether
// the file stores its counter.
func readLog(fs wal.FS, b *bolt.DB, path, logPath string, segments []wal.SegmentFile) (logged []wal.Entry, counter uint64, stored bool, err error) {
	segs, err := wal.ReadSegments(fs, segments, false)
	if err != nil {
		return nil, 0, false, err
	}
	var logFrom uint64
	var loggedAs string
	err = filecheck.Guard(path, "Open", func() error {
		return b.View(func(tx *bolt.Tx) (err error) {
			counter, stored, err = fileCounter(tx)
			logFrom, loggedAs = logFromIn(tx)
			return err
		})
	})
	if err == nil {
		err = logFound(logPath, loggedAs, segments, logFrom)
	}
	if err != nil {
		return nil, 0, false, err
	}
	logged, faults := wal.Scan(segs, counter)
	if len(faults) > 0 {
		return nil, 0, false, faults[0].Err
	}
	return logged, counter, stored, nil
}

// openBolt checks the file at path (filecheck.Validate, or with walk
// unset ValidateMeta) and opens it in bbolt, the two waiting for another
// process's lock up to timeout in all (ErrLocked then); a damaged file's
// error matches storage.ErrCorrupt. op names the caller in a fault's
// error.
func openBolt(path, op string, mode os.FileMode, timeout time.Duration, readOnly, walk bool) (*bolt.DB, error) {
	started := time.Now()
	validate := filecheck.Validate
	if !walk {
		validate = filecheck.ValidateMeta
	}
	if err := validate(path, timeout); errors.Is(err, filecheck.ErrLocked) {
		return nil, fmt.Errorf("%w (waited %v)", ErrLocked, timeout)
	} else if err != nil {
		return nil, err
	}
	// What is left of timeout for bbolt's lock: never zero, which bbolt
	// takes as no timeout.
	wait := max(timeout-time.Since(started), time.Millisecond)
	var b *bolt.DB
	err := filecheck.Guard(path, op, func() error {
		var err error
		b, err = bolt.Open(path, mode, &bolt.Options{Timeout: wait, ReadOnly: readOnly})
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w (waited %v)", ErrLocked, timeout)
	}
	if err != nil {
		return nil, openError(err)
	}
	return b, nil
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
	if db.verified != nil {
		<-db.verified // the walk reads the file: it ends before the file closes
	}
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

func (db *DB) isClosed() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.closed
}

// view and update run a bbolt transaction guarded against damaged pages
// (see filecheck.Guard), and say ErrClosed for a closed database.
func (db *DB) view(op string, fn func(*bolt.Tx) error) error {
	return db.closedError(filecheck.Guard(db.path, op, func() error { return db.bolt.View(fn) }))
}

func (db *DB) update(op string, fn func(*bolt.Tx) error) error {
	if db.verified != nil {
		<-db.verified
		if db.verifyErr != nil {
			return fmt.Errorf("boltstore: %s: %w", db.path, db.verifyErr)
		}
	}
	return db.updateNow(op, fn)
}

// updateNow is update without waiting for the file's verification: the
// verifier's own write.
func (db *DB) updateNow(op string, fn func(*bolt.Tx) error) error {
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
