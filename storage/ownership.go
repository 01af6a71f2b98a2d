package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/internal/quote"
)

// Claim is an ownership claim on a record: the owner's name and the epoch
// at which it took the record over. The zero Claim claims nothing.
type Claim struct {
	Owner string
	Epoch uint64
}

// Limits of a [Lease]'s time-to-live. The lower bound is etcd's lease
// granularity; the upper one keeps a dead controller from blocking its
// execution for longer than an operator would wait.
const (
	MinLeaseTTL = time.Second
	MaxLeaseTTL = time.Hour
)

// Lease asks a store for ownership of one record: see [Store].Acquire.
type Lease struct {
	// Holder names the controller taking the record over; it becomes the
	// record's Owner. Make it unique to the process (a pod name, or a
	// host name and a process id): two processes under one name cannot
	// tell each other apart.
	Holder string
	// TTL is how long the ownership outlives a holder that stopped
	// renewing it (a process killed, a node lost): the time a successor
	// may have to wait. The [Ownership] renews itself while its holder
	// lives. Between MinLeaseTTL and MaxLeaseTTL.
	TTL time.Duration
	// Wait makes Acquire wait, while ctx allows, for a live holder's
	// ownership to end (released, or expired) instead of failing with
	// [ErrHeld] at once. A controller restarted after a crash waits for
	// its dead predecessor's lease this way.
	Wait bool
	// Reason is recorded in the take-over's audit entry; empty means
	// "acquired".
	Reason string
}

// Validate checks the lease against the limits; the error matches
// [ErrInvalidLease].
func (l Lease) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("storage: lease for %s: %w: %s", quote.Limited(l.Holder), ErrInvalidLease, fmt.Sprintf(format, args...))
	}
	if err := checkText("holder", l.Holder, MaxOwnerLen, false); err != nil {
		return bad("%v", err)
	}
	if err := checkText("reason", l.Reason, MaxReasonLen, true); err != nil {
		return bad("%v", err)
	}
	if l.TTL < MinLeaseTTL || l.TTL > MaxLeaseTTL {
		return bad("TTL %v, want %v to %v", l.TTL, MinLeaseTTL, MaxLeaseTTL)
	}
	return nil
}

// TakeOver returns a copy of rec owned by the lease's holder at epoch,
// with an audit entry for the take-over at the given time. Stores call it
// to build the record their Acquire writes. The audit trail keeps the
// record's own [Record.HistoryKept] entries, dropping the oldest. The
// error (matching [ErrInvalidRecord]) says the entry cannot follow the
// record's trail: a trail at or above the record's own revision.
func (l Lease) TakeOver(rec Record, epoch uint64, at time.Time) (Record, error) {
	next := rec.Clone()
	at = at.UTC().Round(0)
	reason := l.Reason
	if reason == "" {
		reason = "acquired"
	}
	next.Owner, next.Epoch, next.UpdatedAt = l.Holder, epoch, at
	trail, err := next.History.Append(Entry{From: rec.Status, To: rec.Status, Reason: reason,
		Actor: l.Holder, Owner: l.Holder, Epoch: epoch, At: at, Revision: rec.Revision}, rec.HistoryKept())
	if err != nil {
		return Record{}, fmt.Errorf("storage: record %s: %w", quote.Limited(rec.ID), err)
	}
	next.History = trail
	return next, nil
}

// Ownership is a controller's hold on one record, as a store's Acquire
// grants it. While it lasts no other holder can acquire the record; the
// record's Owner and Epoch are its [Claim], and every write made under an
// older claim fails with [ErrFenced].
//
// Each store keeps the ownership alive its own way and ends it the same
// way for everyone: Lost is closed when the ownership ends for any reason.
//
//   - Memory and boltstore hold it in the process that holds the
//     store: a holder cannot die without the store going with it (bbolt's
//     file lock is released when its process dies), so it lasts until
//     Release or until the store is closed.
//   - etcdstore binds it to an etcd lease kept alive in the background.
//   - kube holds a coordination.k8s.io/v1 Lease renewed in the background.
type Ownership interface {
	// Claim is the holder and the epoch the record was taken over at.
	Claim() Claim
	// Lost is closed when the ownership has ended: released, expired,
	// revoked, taken by another holder after it expired, or the store
	// closed. The holder must stop driving the execution; its writes
	// through a transition.Persisted fail with [ErrFenced] from then on.
	Lost() <-chan struct{}
	// Release ends the ownership at once, so the next controller need
	// not wait for it to expire. It writes nothing to the record, closes
	// Lost and is safe to call more than once. To the next holder a
	// released ownership and an expired one look the same: a test plays
	// a controller that died by releasing its ownership.
	Release(ctx context.Context) error
}

// HeldError is returned by Acquire when a live holder owns the record. It
// matches [ErrHeld]; when Acquire waited ([Lease].Wait) until its context
// ended, it also matches the context's error.
type HeldError struct {
	ID     string // the record
	Holder string // who holds it, when the store knows
	Waited error  // the context's error, when Acquire waited until it ended
}

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("storage: %s: %v", quote.Limited(e.ID), ErrHeld)
	if e.Holder != "" {
		msg += ": held by " + quote.Limited(e.Holder)
	}
	if e.Waited != nil {
		msg += " (gave up waiting: " + e.Waited.Error() + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrHeld) hold.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Unwrap returns the context's error, if Acquire waited.
func (e *HeldError) Unwrap() error { return e.Waited }

// Claim returns the record's ownership claim: its owner and epoch.
func (r Record) Claim() Claim { return Claim{Owner: r.Owner, Epoch: r.Epoch} }

// KeepsClaim returns nil if next has the stored record's owner and epoch,
// and otherwise the [ClaimChanged] error a store's CompareAndSwap returns.
func KeepsClaim(id string, stored, next Record) error {
	if stored.Claim() != next.Claim() {
		return ClaimChanged(id, stored.Claim(), next.Claim())
	}
	return nil
}

// ClaimChanged returns the error a store's CompareAndSwap returns when
// next has another Owner or Epoch than the stored record: only Acquire
// changes ownership. It matches [ErrInvalidRecord].
func ClaimChanged(id string, stored, next Claim) error {
	return fmt.Errorf("storage: CompareAndSwap %s: %w: it would change the claim from %s@%d to %s@%d; ownership changes only through Acquire",
		quote.Limited(id), ErrInvalidRecord, quote.Limited(stored.Owner), stored.Epoch, quote.Limited(next.Owner), next.Epoch)
}
