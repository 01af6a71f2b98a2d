package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry
// the details a caller needs to act.
var (
	// ErrNotFound: the store has no record with that id.
	ErrNotFound = errors.New("record not found")

	// ErrExists: Create found a record with that id already.
	ErrExists = errors.New("record already exists")

	// ErrConflict: the record changed since it was read; see
	// [ConflictError] for the current record.
	ErrConflict = errors.New("record changed concurrently")

	// ErrFenced: a controller's write without a live claim: another
	// owner took over with a newer epoch, the writer's own ownership
	// ended (released, expired), or it never took the record over; see
	// [FencedError]. Nothing was written.
	ErrFenced = errors.New("writer fenced")

	// ErrHeld: a live holder owns the record, so it cannot be acquired;
	// see [HeldError]. Every store's Acquire refuses with it.
	ErrHeld = errors.New("record is owned by a live holder")

	// ErrInvalidLease: a [Lease] breaks a limit; nothing was acquired.
	ErrInvalidLease = errors.New("invalid lease")

	// ErrInvalidRecord: a record breaks a limit or a rule of [Record];
	// nothing was written.
	ErrInvalidRecord = errors.New("invalid record")

	// ErrCorrupt: stored bytes do not decode into a valid record.
	ErrCorrupt = errors.New("corrupt record")
)

// ConflictError is returned by [Store].CompareAndSwap when the record's
// revision is not the expected one. It carries the record as it is now so
// the caller can re-decide without another read.
type ConflictError struct {
	ID       string
	Expected uint64 // the revision the writer expected
	Current  Record // the record as the store holds it now
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("storage: %s: %v: expected revision %d, found %d (status %q)",
		quote.Limited(e.ID), ErrConflict, e.Expected, e.Current.Revision, e.Current.Status)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FencedError is returned when a writer holding an ownership claim finds
// the record owned by someone else, or by itself at another epoch (it was
// relocated and a newer controller took over), when the writer's own
// [Ownership] has ended, or when a controller's writer owns nothing yet
// (Owner empty). Nothing was written.
type FencedError struct {
	ID           string
	Owner        string // the writer's claimed owner
	Epoch        uint64 // the writer's claimed epoch
	CurrentOwner string // the record's owner, when the store was read
	CurrentEpoch uint64
	// Lost: the writer's ownership ended (released, expired, the store
	// closed); the record was not read.
	Lost bool
}

func (e *FencedError) Error() string {
	if e.Owner == "" && !e.Lost {
		return fmt.Sprintf("storage: %s: %v: the writer owns nothing: a controller writes only once it has taken the execution over",
			quote.Limited(e.ID), ErrFenced)
	}
	if e.Lost {
		return fmt.Sprintf("storage: %s: %v: claim %s@%d: the ownership has ended",
			quote.Limited(e.ID), ErrFenced, quote.Limited(e.Owner), e.Epoch)
	}
	return fmt.Sprintf("storage: %s: %v: claim %s@%d, record owned by %s@%d",
		quote.Limited(e.ID), ErrFenced, quote.Limited(e.Owner), e.Epoch, quote.Limited(e.CurrentOwner), e.CurrentEpoch)
}

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// errNilContext is what CheckContext returns for a nil context. It is not
// exported: as in the standard library, a nil context is a programming
// error to fix, not a condition to handle. It is an error and not a panic
// only because nothing in this module panics on input.
var errNilContext = errors.New("nil context.Context (pass context.Background() or context.TODO())")

// CheckContext is how every call of a [Store] begins: it returns an error
// naming pkg and op ("boltstore: Get: …") for a nil ctx, and ctx's own
// error for a done one. A store of your own that starts its calls with it
// refuses a nil or done context the way storage/storagetest expects. The
// name comes in two parts so that no caller builds a string on every
// call for an error that is almost never returned.
func CheckContext(ctx context.Context, pkg, op string) error {
	if ctx == nil {
		return nilContext(pkg, op)
	}
	return ctx.Err()
}

// nilContext is CheckContext's error, apart so that CheckContext is
// small enough to be inlined into the hot paths that start with it.
func nilContext(pkg, op string) error {
	return fmt.Errorf("%s: %s: %w", pkg, op, errNilContext)
}
