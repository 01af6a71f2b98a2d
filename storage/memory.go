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

	"github.com/execfsm/execfsm/internal/quote"

	"github.com/execfsm/execfsm/internal/locallease"
	"github.com/execfsm/execfsm/internal/watchlog"
)

// Store keeps records and changes them only by compare-and-swap. It knows
// nothing of tables: a transition.Persisted reads a record, checks the move against
// its table and writes the result back at the revision it read, so two
// writers can never both win and a stale writer never overwrites.
//
// Every implementation must pass the conformance suite in package
// storage/storagetest. The contract:
//
//   - Get returns ErrNotFound (wrapped) for an unknown id.
//   - Create validates the record (ErrInvalidRecord), fails with ErrExists
//     if the id is taken, ignores the given Revision and assigns a new one.
//   - CompareAndSwap writes next only if the record's revision is still
//     expected; otherwise it returns a [*ConflictError] carrying the
//     current record. An unknown id is ErrNotFound, next.ID must be id,
//     and next is validated like Create's record.
//   - CompareAndSwap never changes ownership: a next record whose Owner or
//     Epoch differ from the stored record's is refused with
//     ErrInvalidRecord (see [KeepsClaim]). Only Acquire takes over.
//   - Acquire takes a record over for [Lease].Holder: if no live holder
//     owns it, in one atomic step it makes the holder the record's Owner
//     at the next Epoch (above every epoch the record or its lease had),
//     with an audit entry ([Lease.TakeOver]), and returns the
//     [Ownership], which lasts until released or lost. If a live holder
//     owns it, Acquire fails with a [*HeldError] (matching ErrHeld), or
//     with [Lease].Wait waits for that ownership to end while ctx allows.
//     An unknown id is ErrNotFound; an invalid lease ErrInvalidLease.
//     With a [Lease].Move, the take-over and the move are one write
//     ([Lease.TakeOver] builds it): if the record is no longer at the
//     move's revision, Acquire writes nothing, holds nothing and returns
//     the [*ConflictError]. Another acquirer's take-over still being
//     written is waited for, not reported as held: it may yet fail, and
//     then nobody held the record.
//   - Held reports the claim of the live holder of a record, if any.
//   - Revisions are positive and strictly increase with every write of a
//     record; a store may share one counter among all its records.
//   - A call whose context is already done returns the context's error and
//     writes nothing; a call must not block past its context's deadline.
//   - Records returned belong to the caller (no aliasing of store state).
type Store interface {
	Get(ctx context.Context, id string) (Record, error)
	Create(ctx context.Context, rec Record) (Record, error)
	CompareAndSwap(ctx context.Context, id string, expect uint64, next Record) (Record, error)
	Acquire(ctx context.Context, id string, lease Lease) (Ownership, Record, error)
	// Held returns the claim of the record's live holder and true, or
	// false when nobody holds it (never acquired, released, expired). An
	// unknown id is not an error: nobody holds it. A deadline reaper
	// asks it to find executions whose controller is gone.
	Held(ctx context.Context, id string) (Claim, bool, error)
}

// Lister is implemented by stores that can list their records, for a
// adoption pass or a deadline reaper that must visit every execution.
type Lister interface {
	// List returns every record the store can read, ordered by id, and,
	// apart, every one it cannot (see [Unreadable]): one unreadable
	// record never hides the others. The error is for the listing itself
	// (the store unreachable, ctx done); then both lists are nil.
	List(ctx context.Context) ([]Record, []Unreadable, error)
}

// Unreadable is a stored record a store cannot read: its bytes do not
// decode (damage, a foreign writer) or are in a format this build does
// not know (a newer version writing during a rolling upgrade). Stores list
// it apart from the records they can read and never overwrite it with a
// stale write. Report it and leave it alone: Get returns the same error.
type Unreadable struct {
	ID       string
	Revision uint64 // the store's revision of the unreadable value, if it has one
	Err      error  // matches ErrCorrupt
}

// WatchEvent says that the record ID was written (created or changed) at
// Revision. It carries no record on purpose: consumers are level-triggered
// and read the record as it is when they get to it.
type WatchEvent struct {
	ID       string
	Revision uint64
}

// Watcher is implemented by stores that can say what changed, so a
// recovery loop is driven by events and not only by resyncs.
//
// Watch delivers an event for every write with a revision above
// fromRevision (0: from the beginning), in revision order, then for every
// later write, until ctx is done. It never misses a change: when the
// store no longer remembers writes as old as fromRevision (its log was
// compacted), or its connection to the log broke, it delivers an event
// for every record it holds and carries on from there. Events may
// therefore repeat; they are never lost. The channel is closed when ctx
// is done, the store is closed or it fails; a consumer whose ctx is still
// live then watches again from the last revision it saw.
type Watcher interface {
	Watch(ctx context.Context, fromRevision uint64) (<-chan WatchEvent, error)
}

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
	records  map[string]Record
	revision uint64
	log      []watchlog.Entry
	dropped  uint64 // highest revision no longer in log
	hub      watchlog.Hub
	owners   locallease.Table
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
		s.records = map[string]Record{}
	}
	return s.put(rec), nil
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
	if err := KeepsClaim(id, cur, next); err != nil {
		return Record{}, err
	}
	return s.put(next), nil
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
	var written Record
	h, err := s.owners.Acquire(ctx, id, lease.Wait, func() (string, uint64, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		cur, ok := s.records[id]
		if !ok {
			return "", 0, fmt.Errorf("storage: %s: %w", quote.Limited(id), ErrNotFound)
		}
		next, err := lease.TakeOver(cur, cur.Epoch+1, time.Now())
		if err == nil {
			err = next.Validate()
		}
		if err != nil {
			return "", 0, err
		}
		written = s.put(next)
		return written.Owner, written.Epoch, nil
	})
	if err != nil {
		return nil, Record{}, localHeld(id, s.statusOf, err)
	}
	return localOwnership{h: h, id: id, cas: s.CompareAndSwap}, written, nil
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
	return s.records[id].Status
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
// with the record's status.
func localHeld(id string, statusOf func(id string) string, err error) error {
	var busy *locallease.BusyError
	if errors.As(err, &busy) {
		return &HeldError{ID: id, Holder: busy.Holder, Status: statusOf(id), Waited: busy.Waited}
	}
	return err
}

// put stores a copy of rec at the next revision and returns rec at it;
// s.mu must be held. The copy shares only the immutable trail with rec,
// and rec with the caller that passed it in, so nothing the store keeps
// can be changed from outside.
func (s *Memory) put(rec Record) Record {
	s.revision++
	rec.Revision = s.revision
	s.records[rec.ID] = rec.Clone()
	size := s.LogSize
	if size <= 0 {
		size = DefaultLogSize
	}
	s.log = append(s.log, watchlog.Entry{ID: rec.ID, Revision: rec.Revision})
	if len(s.log) >= 2*size {
		s.dropped = s.log[len(s.log)-size-1].Revision
		s.log = append(s.log[:0:0], s.log[len(s.log)-size:]...)
	}
	s.hub.Notify()
	return rec
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
