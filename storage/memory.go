package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/execfsm/execfsm/storage/storekit/locallease"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/storage/storekit/watchlog"
)

func watchEvent(e watchlog.Entry) WatchEvent { return WatchEvent{ID: e.ID, Revision: e.Revision} }

// DefaultLogSize is how many recent writes a Memory remembers for
// Watch when LogSize is zero.
const DefaultLogSize = 4096

// Memory is a Store in process memory, for tests, examples and
// controllers whose state may die with them. Its zero value is ready to
// use and it is safe for concurrent use.
type Memory struct {
	// LogSize is how many recent writes Watch can replay (default
	// DefaultLogSize); a watch from further back starts with every
	// record instead. Set it before first use.
	LogSize int

	mu       sync.Mutex
	records  map[string]*Record // each record in a place of its own, written over by the next write
	byStatus statusIndex        // the records' ids by status (ListPage)
	revision uint64
	log      []watchlog.Entry
	dropped  uint64 // highest revision no longer in log
	hub      watchlog.Hub
	owners   locallease.Table
	// epochFloor is the highest epoch a deleted record had: every
	// take-over writes an epoch above it, so a record created again under
	// a deleted id never gets back an epoch of its old life.
	epochFloor uint64
	table      []byte // the table's document (TableKeeper)
	tableRev   uint64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Get implements [Store].
func (s *Memory) Get(ctx context.Context, id string) (Record, error) {
	if err := CheckContext(ctx, "storage", "Get"); err != nil {
		return Record{}, err
	}
	if err := ValidateID(id); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok {
		return Record{}, fmt.Errorf("storage: %s: %w", quote.Limited(id), ErrNotFound)
	}
	return rec.Clone(), nil
}

// Create implements [Store].
func (s *Memory) Create(ctx context.Context, rec Record) (Record, error) {
	if err := CheckContext(ctx, "storage", "Create"); err != nil {
		return Record{}, err
	}
	if err := rec.Validate(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[rec.ID]; ok {
		return Record{}, fmt.Errorf("storage: %s: %w", quote.Limited(rec.ID), ErrExists)
	}
	if s.records == nil {
		s.records = map[string]*Record{}
	}
	slot := new(Record)
	s.records[rec.ID] = slot
	return s.put(slot, rec), nil
}

// CompareAndSwap implements [Store].
func (s *Memory) CompareAndSwap(ctx context.Context, id string, expect uint64, next Record) (Record, error) {
	if err := CheckContext(ctx, "storage", "CompareAndSwap"); err != nil {
		return Record{}, err
	}
	if next.ID != id {
		return Record{}, fmt.Errorf("storage: CompareAndSwap %s: %w: record id is %s", quote.Limited(id), ErrInvalidRecord, quote.Limited(next.ID))
	}
	if err := next.Validate(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[id]
	if !ok {
		return Record{}, fmt.Errorf("storage: %s: %w", quote.Limited(id), ErrNotFound)
	}
	if cur.Revision != expect {
		return Record{}, &ConflictError{ID: id, Expected: expect, Current: cur.Clone()}
	}
	if err := KeepsClaim(id, *cur, next); err != nil {
		return Record{}, err
	}
	return s.put(cur, next), nil
}

// Acquire implements [Store]. The ownership lives in this process, as the
// store does: it lasts until released (see [Ownership]).
func (s *Memory) Acquire(ctx context.Context, id string, lease Lease) (Ownership, Record, error) {
	if err := CheckContext(ctx, "storage", "Acquire"); err != nil {
		return nil, Record{}, err
	}
	if err := lease.Validate(); err != nil {
		return nil, Record{}, err
	}
	parent, err := localParent(&s.owners, id, lease.Under)
	if err != nil {
		return nil, Record{}, err
	}
	var written Record
	h, err := s.owners.Acquire(ctx, id, lease.Wait, parent, func() (string, uint64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		cur, ok := s.records[id]
		if !ok {
			return "", 0, fmt.Errorf("storage: %s: %w", quote.Limited(id), ErrNotFound)
		}
		next, err := lease.TakeOver(*cur, max(cur.Epoch, s.epochFloor)+1, time.Now())
		if err == nil {
			err = next.Validate()
		}
		if err != nil {
			return "", 0, err
		}
		written = s.put(cur, next)
		return written.Owner, written.Epoch, nil
	})
	if err != nil {
		return nil, Record{}, localHeld(id, s.statusOf, lease.Under, err)
	}
	return localOwnership{h: h, id: id, cas: s.CompareAndSwap}, written, nil
}

// localParent returns the hold of the ownership a record is to be taken
// under, nil for none: it must be one of table's, not itself taken under
// another (ErrInvalidLease).
func localParent(table *locallease.Table, id string, under Ownership) (*locallease.Held, error) {
	if under == nil {
		return nil, nil
	}
	local, ok := under.(localOwnership)
	if !ok || !table.Owns(local.h) {
		return nil, fmt.Errorf("storage: lease for %s: %w: Under is not an ownership of this store", quote.Limited(id), ErrInvalidLease)
	}
	if local.h.Under() {
		return nil, fmt.Errorf("storage: lease for %s: %w: Under was itself taken under another ownership", quote.Limited(id), ErrInvalidLease)
	}
	return local.h, nil
}

// Held implements [Store].
func (s *Memory) Held(ctx context.Context, id string) (Claim, bool, error) {
	if err := CheckContext(ctx, "storage", "Held"); err != nil {
		return Claim{}, false, err
	}
	owner, epoch, ok := s.owners.Holder(id)
	return Claim{Owner: owner, Epoch: epoch}, ok, nil
}

// statusOf returns record id's status, "" if there is none.
func (s *Memory) statusOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.records[id]; ok {
		return rec.Status
	}
	return ""
}

// localOwnership is an [Ownership] held in this process.
type localOwnership struct {
	h   *locallease.Held
	id  string
	cas func(ctx context.Context, id string, expect uint64, next Record) (Record, error)
}

func (o localOwnership) Claim() Claim                  { return Claim{Owner: o.h.Owner, Epoch: o.h.Epoch} }
func (o localOwnership) Lost() <-chan struct{}         { return o.h.Lost() }
func (o localOwnership) Release(context.Context) error { o.h.Release(); return nil }

func (o localOwnership) CompareAndSwap(ctx context.Context, expect uint64, next Record) (Record, error) {
	claim := o.Claim()
	if err := KeepsOwnClaim(o.id, claim, next); err != nil {
		return Record{}, err
	}
	var (
		written Record
		err     error
	)
	if !o.h.Write(func() { written, err = o.cas(ctx, o.id, expect, next) }) {
		return Record{}, &FencedError{ID: o.id, Owner: claim.Owner, Epoch: claim.Epoch, Lost: true}
	}
	return written, err
}

// localHeld turns a local lease table's refusal into a [*HeldError],
// with the record's status, or a [*FencedError] when the ownership it
// was to be taken under has ended.
func localHeld(id string, statusOf func(id string) string, under Ownership, err error) error {
	var busy *locallease.BusyError
	switch {
	case errors.As(err, &busy):
		return &HeldError{ID: id, Holder: busy.Holder, Status: statusOf(id), Waited: busy.Waited}
	case errors.Is(err, locallease.ErrParentEnded):
		return UnderEnded(id, under)
	}
	return err
}

// UnderEnded is Acquire's error for a record to be taken under an
// ownership that has ended ([Lease].Under): a [*FencedError] with its
// claim, Lost set.
func UnderEnded(id string, under Ownership) error {
	c := under.Claim()
	return &FencedError{ID: id, Owner: c.Owner, Epoch: c.Epoch, Lost: true}
}

// Delete implements [Deleter].
func (s *Memory) Delete(ctx context.Context, id string, expect uint64) error {
	if err := CheckContext(ctx, "storage", "Delete"); err != nil {
		return err
	}
	if err := ValidateID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[id]
	switch {
	case !ok:
		return fmt.Errorf("storage: %s: %w", quote.Limited(id), ErrNotFound)
	case cur.Revision != expect:
		return &ConflictError{ID: id, Expected: expect, Current: cur.Clone()}
	}
	// A take-over being written runs under s.mu too: it either finished
	// (held) or finds the record gone.
	if owner, _, held := s.owners.Holder(id); held {
		return &HeldError{ID: id, Holder: owner, Status: cur.Status}
	}
	s.epochFloor = max(s.epochFloor, cur.Epoch)
	s.byStatus.remove(cur.Status, id)
	delete(s.records, id)
	s.revision++
	s.logWrite(id, s.revision)
	return nil
}

// put stores a copy of rec in slot, at the next revision, and returns rec
// at it; s.mu must be held. The copy shares only the immutable trail with
// rec, and rec with the caller that passed it in, so nothing the store
// keeps can be changed from outside.
func (s *Memory) put(slot *Record, rec Record) Record {
	if slot.Status != rec.Status {
		if s.byStatus == nil {
			s.byStatus = statusIndex{}
		}
		if slot.Status != "" {
			s.byStatus.remove(slot.Status, rec.ID)
		}
		s.byStatus.add(rec.Status, rec.ID)
	}
	s.revision++
	rec.Revision = s.revision
	*slot = rec.Clone()
	s.logWrite(rec.ID, rec.Revision)
	return rec
}

// logWrite records a write (or a delete) of id at revision for Watch;
// s.mu must be held.
func (s *Memory) logWrite(id string, revision uint64) {
	size := s.LogSize
	if size <= 0 {
		size = DefaultLogSize
	}
	s.log = append(s.log, watchlog.Entry{ID: id, Revision: revision})
	if len(s.log) >= 2*size {
		// Kept in place: Since hands out copies, so nothing outside the
		// lock holds the array, and the writes that follow it need no
		// larger one.
		s.dropped = s.log[len(s.log)-size-1].Revision
		s.log = s.log[:copy(s.log, s.log[len(s.log)-size:])]
	}
	s.hub.Notify()
}

// List implements [Lister]. A Memory holds no unreadable record.
func (s *Memory) List(ctx context.Context) ([]Record, []Unreadable, error) {
	if err := CheckContext(ctx, "storage", "List"); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.records))
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		out = append(out, s.records[id].Clone())
	}
	return out, nil, nil
}

// Watch implements [Watcher].
func (s *Memory) Watch(ctx context.Context, fromRevision uint64) (<-chan WatchEvent, error) {
	if err := CheckContext(ctx, "storage", "Watch"); err != nil {
		return nil, err
	}
	return watchlog.Channel(ctx, &s.hub, memoryLog{s}, fromRevision, watchEvent), nil
}

type memoryLog struct{ s *Memory }

func (l memoryLog) Since(rev uint64, limit int) ([]watchlog.Entry, bool, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev < s.dropped {
		return nil, true, nil
	}
	k, _ := slices.BinarySearchFunc(s.log, rev+1, func(e watchlog.Entry, r uint64) int {
		return cmp.Compare(e.Revision, r)
	})
	end := min(len(s.log), k+limit)
	return slices.Clone(s.log[k:end]), false, nil
}

func (l memoryLog) Snapshot() ([]watchlog.Entry, uint64, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]watchlog.Entry, 0, len(s.records))
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		out = append(out, watchlog.Entry{ID: id, Revision: s.records[id].Revision})
	}
	return out, s.revision, nil
}

var (
	_ TableKeeper = (*Memory)(nil)
	_ Deleter     = (*Memory)(nil)
)

// Table implements [TableKeeper].
func (s *Memory) Table(ctx context.Context) ([]byte, uint64, error) {
	if err := CheckContext(ctx, "storage", "Table"); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		return nil, 0, fmt.Errorf("storage: table: %w", ErrNotFound)
	}
	return append([]byte(nil), s.table...), s.tableRev, nil
}

// SetTable implements [TableKeeper]. Its revisions are the store's, like
// the records'.
func (s *Memory) SetTable(ctx context.Context, expect uint64, doc []byte) (uint64, error) {
	if err := CheckContext(ctx, "storage", "SetTable"); err != nil {
		return 0, err
	}
	if err := CheckTable(doc); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tableRev != expect {
		return 0, fmt.Errorf("storage: table: %w: at revision %d, not %d", ErrConflict, s.tableRev, expect)
	}
	s.revision++
	s.table, s.tableRev = append([]byte(nil), doc...), s.revision
	return s.tableRev, nil
}
