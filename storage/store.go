package storage

import (
	"context"
	"fmt"
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
//   - With a [Lease].Under, Acquire takes the record over under that
//     ownership (this store's, the holder's, live, not itself taken under
//     another; otherwise ErrInvalidLease, or a [*FencedError] when it has
//     ended): no lease of its own; the record is held while Under lasts,
//     and its ownership ends when Under's does. Releasing it lets that
//     record go alone.
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

// Deleter is implemented by stores that can delete a record, so that a
// fleet that runs for years keeps only what it has not retired. The
// contract, which storagetest checks for every store that implements it:
//
//   - Delete removes record id only if its revision is still expect;
//     otherwise it returns a *ConflictError with the current record, and
//     deletes nothing. An unknown id is ErrNotFound.
//   - It never deletes a record a live holder owns: that is a *HeldError
//     (ErrHeld), and nothing is deleted.
//   - A deleted record is gone for Get (ErrNotFound), List and every
//     later read; a Watcher delivers an event for its id at a new
//     revision (a level-triggered consumer reads it and finds it gone).
//   - An id created again starts a new life: its revisions are above
//     every revision of the old one, and every epoch its take-overs get
//     is above every epoch the old life had, so no claim of the old life
//     ever matches one of the new.
//   - A done context deletes nothing.
//
// The store knows no table: which records may be deleted (an ended
// execution past its retention, or one an authority removes) is decided
// above it.
type Deleter interface {
	Delete(ctx context.Context, id string, expect uint64) error
}

// Lister is implemented by stores that can list their records, for an
// adoption pass or a deadline reaper that must visit every execution.
type Lister interface {
	// List returns every record the store can read, ordered by id, and,
	// apart, every one it cannot (see [Unreadable]): one unreadable
	// record never hides the others. The error is for the listing itself
	// (the store unreachable, ctx done); then both lists are nil.
	List(ctx context.Context) ([]Record, []Unreadable, error)
}

// TableKeeper is implemented by stores that keep, beside their records
// and apart from them, one document describing the table the records
// follow (package schema writes and reads it; the store never interprets
// it). List and Watch never see it.
type TableKeeper interface {
	// Table returns the document and its revision, or an error matching
	// ErrNotFound when none is kept.
	Table(ctx context.Context) ([]byte, uint64, error)
	// SetTable replaces the document if the kept one is at revision
	// expect (0: none is kept yet) and returns its new revision, higher
	// than any before; otherwise it writes nothing and returns an error
	// matching ErrConflict. A document is 1 to MaxTableLen bytes.
	SetTable(ctx context.Context, expect uint64, doc []byte) (uint64, error)
}

// MaxTableLen bounds a table's document: a table of MaxStates states
// with every move allowed and long names fits, and it fits every
// store's value limit.
const MaxTableLen = 512 << 10

// CheckTable refuses a document no store keeps: empty, or longer than
// MaxTableLen. Stores call it before anything else in SetTable.
func CheckTable(doc []byte) error {
	if len(doc) == 0 || len(doc) > MaxTableLen {
		return fmt.Errorf("storage: %w: a table's document is %d bytes, want 1 to %d", ErrInvalidRecord, len(doc), MaxTableLen)
	}
	return nil
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
// reconcile loop is driven by events and not only by resyncs.
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
