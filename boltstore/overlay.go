package boltstore

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/storage/storekit/watchlog"
	bolt "go.etcd.io/bbolt"
)

// The writes in the log and not yet in bbolt live in memory, one gen per
// segment: the leader appends to the newest, and a checkpoint applies the
// oldest to bbolt in one transaction, then drops it and its segment.
// Every read looks in the gens first, newest first: a gen holds writes
// newer than anything bbolt holds.
//
// A read that combines the gens with bbolt (List, a watch) must see them
// at one revision. It copies what it needs from the gens and their
// revision S under the read lock, then reads bbolt, whose revision
// counter C says which writes it holds: all those up to C, since a
// checkpoint applies a whole gen in one transaction. If C ≤ S, the gens
// copied hold every write after C (a gen is dropped only after bbolt has
// it), and bbolt plus the gens' writes after C is the store at S. If a
// checkpoint landed in between and C > S, the read starts again.

// Checkpoint thresholds: a gen this large is handed to the checkpoint
// (the leader starts a new segment). etcd's backend commits every 10,000
// writes or 100 ms; fewer writes a checkpoint means more B+tree pages
// rewritten per write, more means more memory and a longer replay.
const (
	checkpointWrites = 4096
	checkpointBytes  = 16 << 20
	// A gen this many times the thresholds waits for the checkpoint in
	// progress: memory stays bounded when bbolt falls behind.
	checkpointBacklog = 4
)

// logged is one write in the log: a record's bytes, or, gone set and
// no bytes, its delete.
type logged struct {
	revision uint64
	data     []byte
	status   string // the record's, for the status index
	gone     bool
}

// gen is the writes of one segment.
type gen struct {
	seg     *wal.Segment                 // nil in a read-only DB
	records map[string]map[string]logged // namespace → id → latest write
	logs    map[string][]watchlog.Entry  // namespace → its writes, in order
	tables  map[string]logged            // namespace → its latest table document
	floors  map[string]uint64            // namespace → the highest epoch a delete in it carried
	writes  int
	bytes   int
	last    uint64 // the highest revision it holds
}

func newGen(seg *wal.Segment) *gen {
	return &gen{seg: seg, records: map[string]map[string]logged{}, logs: map[string][]watchlog.Entry{}, tables: map[string]logged{}}
}

func (g *gen) add(e wal.Entry) {
	g.writes++
	g.bytes += len(e.Data) + len(e.ID)
	g.last = e.Revision
	if e.ID == wal.TableID {
		// Not a record: neither listed nor watched.
		g.tables[e.Namespace] = logged{revision: e.Revision, data: e.Data}
		return
	}
	ids := g.records[e.Namespace]
	if ids == nil {
		ids = map[string]logged{}
		g.records[e.Namespace] = ids
	}
	if epoch, ok := wal.DeletedEpoch(e.Data); ok {
		ids[e.ID] = logged{revision: e.Revision, gone: true}
		if g.floors == nil {
			g.floors = map[string]uint64{}
		}
		g.floors[e.Namespace] = max(g.floors[e.Namespace], epoch)
	} else {
		ids[e.ID] = logged{revision: e.Revision, data: e.Data, status: e.Status}
	}
	g.logs[e.Namespace] = append(g.logs[e.Namespace], watchlog.Entry{ID: e.ID, Revision: e.Revision})
}

// full says whether g holds factor times what a checkpoint takes.
func (g *gen) full(factor, writes int) bool {
	return g.writes >= factor*writes || g.bytes >= factor*checkpointBytes
}

// overlay is the gens, oldest first. In a writable DB the last one is
// the one the leader appends to; the others are frozen, waiting for the
// checkpoint.
type overlay struct {
	mu       sync.RWMutex
	gens     []*gen
	revision uint64 // of the last write acknowledged (or bbolt's, if none)
}

// snapshot returns the gens, for the leader, which reads them without a
// lock: it is the only one that changes them.
func (o *overlay) snapshot() []*gen {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return slices.Clone(o.gens)
}

// install adds a batch's writes, once they are in the log.
func (o *overlay) install(g *gen, entries []wal.Entry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range entries {
		g.add(e)
	}
	o.revision = max(o.revision, g.last)
}

// get returns the latest logged write of id.
func (o *overlay) get(namespace, id string) (logged, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return lookupGens(o.gens, namespace, id)
}

func lookupGens(gens []*gen, namespace, id string) (logged, bool) {
	for i := len(gens) - 1; i >= 0; i-- {
		if l, ok := gens[i].records[namespace][id]; ok {
			return l, true
		}
	}
	return logged{}, false
}

// table returns the latest logged table document of namespace.
func (o *overlay) table(namespace string) (logged, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return tableInGens(o.gens, namespace)
}

func tableInGens(gens []*gen, namespace string) (logged, bool) {
	for i := len(gens) - 1; i >= 0; i-- {
		if l, ok := gens[i].tables[namespace]; ok {
			return l, true
		}
	}
	return logged{}, false
}

// floorInGens returns the highest epoch a delete of namespace in gens
// carried.
func floorInGens(gens []*gen, namespace string) uint64 {
	var floor uint64
	for _, g := range gens {
		floor = max(floor, g.floors[namespace])
	}
	return floor
}

// records returns the latest logged write of each record of namespace,
// and the revision they are as of.
func (o *overlay) records(namespace string) (map[string]logged, uint64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := map[string]logged{}
	for _, g := range o.gens {
		for id, l := range g.records[namespace] {
			out[id] = l
		}
	}
	return out, o.revision
}

// since returns the logged writes of namespace above rev, in order, and
// the revision they are as of.
func (o *overlay) since(namespace string, rev uint64) ([]watchlog.Entry, uint64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out []watchlog.Entry
	for _, g := range o.gens {
		log := g.logs[namespace]
		i := sort.Search(len(log), func(i int) bool { return log[i].Revision > rev })
		out = append(out, log[i:]...)
	}
	return out, o.revision
}

// frozen returns the oldest gen waiting for the checkpoint, or nil.
func (o *overlay) frozen() *gen {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if len(o.gens) < 2 {
		return nil
	}
	return o.gens[0]
}

// rotate starts gen next, freezing the current one.
func (o *overlay) rotate(next *gen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gens = append(o.gens, next)
}

// drop removes the oldest gen, now in bbolt.
func (o *overlay) drop(g *gen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.gens) > 0 && o.gens[0] == g {
		o.gens = slices.Delete(o.gens, 0, 1)
	}
}

// checkpoint applies g's writes to bbolt in one transaction, with the
// revision counter set to its last: after it commits, bbolt holds every
// write up to g.last.
func (db *DB) checkpoint(g *gen, next uint64) error {
	if g.writes == 0 {
		return nil
	}
	err := db.update("checkpoint", func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if getUint(meta.Get(revisionKey)) >= g.last {
			return nil // applied already (a replay after a crash before the segment went)
		}
		if err := applyGen(tx, g, db.logSize, 0); err != nil {
			return err
		}
		if g.seg != nil {
			// The file holds g's writes: the oldest segment that may
			// hold writes it does not is the next one.
			if err := meta.Put(logFromKey, putUint(next)); err != nil {
				return err
			}
		}
		return meta.Put(revisionKey, putUint(g.last))
	})
	if err != nil {
		return fmt.Errorf("boltstore: %s: applying the log to the file: %w", db.path, err)
	}
	return nil
}

// applyGen writes g's writes above revision after into tx: records (and
// deletes) with their status index, tables, the watch log, and epoch
// floors. The caller sets the revision counter.
func applyGen(tx *bolt.Tx, g *gen, logSize int, after uint64) error {
	for namespace, l := range g.tables {
		if l.revision <= after {
			continue
		}
		ns, _, _, err := createNamespace(tx, []byte("ns/"+namespace))
		if err != nil {
			return err
		}
		if err := ns.Put(tableKey, append(putUint(l.revision), l.data...)); err != nil {
			return fmt.Errorf("namespace %q, its table: %w", namespace, err)
		}
	}
	for namespace, ids := range g.records {
		ns, records, log, err := createNamespace(tx, []byte("ns/"+namespace))
		if err != nil {
			return err
		}
		index, err := openIndex(ns, records)
		if err != nil {
			return err
		}
		for id, l := range ids {
			if l.revision <= after {
				continue
			}
			if l.gone {
				err = records.Delete([]byte(id))
			} else {
				err = records.Put([]byte(id), l.data)
			}
			if err == nil {
				err = index.set(id, l.status)
			}
			if err != nil {
				return fmt.Errorf("namespace %q, record %s: %w", namespace, quote.Limited(id), err)
			}
		}
		if floor, ok := g.floors[namespace]; ok && floor > getUint(ns.Get(epochFloorKey)) {
			if err := ns.Put(epochFloorKey, putUint(floor)); err != nil {
				return err
			}
		}
		for _, e := range g.logs[namespace] {
			if e.Revision <= after {
				continue
			}
			if err := logWrite(ns, log, e.Revision, e.ID, logSize); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkpointer applies frozen gens to bbolt as the leader hands them
// over, until stop is closed.
func (db *DB) checkpointer(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-db.wake:
		}
		for g := db.overlay.frozen(); g != nil; g = db.overlay.frozen() {
			if err := db.checkpoint(g, g.seg.Seq+1); err != nil { // made by handOver before g was frozen
				db.fail(err)
				break
			}
			db.overlay.drop(g)
			// bbolt holds its writes: a segment left behind by a
			// failed remove is skipped at the next Open.
			_ = g.seg.Remove()
			select {
			case db.dropped <- struct{}{}:
			default:
			}
		}
	}
}

// rescue applies every write acknowledged so far to the file, and
// records that the file needs no log, once a segment of the log is found
// removed or replaced behind the store's back (wal.ErrUnnamed): the
// writes acknowledged into it are in memory and in a file that a crash
// takes along, and only the file can keep them now. Writes have stopped
// (fail). It is run with the writer's turn held, so that no batch is in
// flight, and applies the gens oldest first, as the checkpointer does
// (a checkpoint of a gen the file holds already does nothing), so a
// checkpoint under way beside it loses nothing. A failure to apply is
// kept with the failure: Close tries again.
func (db *DB) rescue() {
	if db.rescued || db.shut {
		return
	}
	for _, g := range db.overlay.snapshot() {
		if err := db.checkpoint(g, 0); err != nil {
			db.fail(fmt.Errorf("boltstore: %s: the log was removed and the writes it held could not be applied to the file (Close tries again): %w", db.path, err))
			return
		}
	}
	if err := db.setLogFrom(0); err != nil {
		db.fail(fmt.Errorf("boltstore: %s: the log was removed: %w", db.path, err))
		return
	}
	db.rescued = true
}

// fail stops every write from now on: err (bbolt refused a checkpoint,
// the log could not be written) leaves the file behind the log, and the
// log is no longer trusted to be appended to. Reads go on.
func (db *DB) fail(err error) {
	db.failMu.Lock()
	defer db.failMu.Unlock()
	if db.failed == nil {
		db.failed = err
	}
	select {
	case db.dropped <- struct{}{}: // a leader waiting for the checkpoint
	default:
	}
}

func (db *DB) failure() error {
	db.failMu.Lock()
	defer db.failMu.Unlock()
	return db.failed
}

// checkLog reads the log's segments from the disk again and returns
// what is wrong with them; a torn tail is expected of the segment being
// appended to only.
func (db *DB) checkLog() error {
	segments, err := wal.ListSegments(db.fs, db.logPath)
	if err != nil {
		return fmt.Errorf("boltstore: %s: listing the log: %w", db.path, err)
	}
	segs, err := wal.ReadSegments(db.fs, segments, true)
	if err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	// The counter is read after the segments: a segment applied and
	// removed meanwhile is below it.
	var counter uint64
	if err := db.view("Check", func(tx *bolt.Tx) error { counter = counterIn(tx); return nil }); err != nil {
		return err
	}
	_, faults := wal.Scan(segs, counter)
	errs := make([]error, len(faults))
	for k, f := range faults {
		errs[k] = fmt.Errorf("boltstore: %w", f.Err)
	}
	return errors.Join(errs...)
}
