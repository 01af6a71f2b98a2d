package storage

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Claim is an ownership claim on a record: the owner's name and the epoch
// at which it took the record over. The zero Claim claims nothing.
type Claim struct {
	Owner string
	Epoch uint64
}

// Limits of a [Lease]'s time-to-live. The lower bound is etcd's lease
// granularity; the upper one keeps a dead controller from blocking its
// execution for longer than an operator would wait. DefaultLeaseTTL is
// what a zero TTL means on the stores that use one.
const (
	MinLeaseTTL     = time.Second
	MaxLeaseTTL     = time.Hour
	DefaultLeaseTTL = 15 * time.Second
)

// Lease asks a store for ownership of one record: see [Store].Acquire.
type Lease struct {
	// Holder names the controller taking the record over; it becomes the
	// record's Owner. Make it unique to the process (a pod name, or a
	// host name and a process id): two processes under one name cannot
	// tell each other apart.
	Holder string
	// TTL is how long the ownership outlives a holder that stopped
	// renewing it (a process killed, a node lost, the store out of
	// reach): the time a successor may have to wait, and the longest
	// store outage a live holder rides out without losing the record.
	// The [Ownership] renews itself while its holder lives. Zero means
	// DefaultLeaseTTL; otherwise between MinLeaseTTL and MaxLeaseTTL.
	// Stores whose ownership lives in their process (Memory, boltstore)
	// have nothing to renew and ignore it.
	//
	// Sizing it: longer than the store outages the controller should
	// survive (an etcd leader election takes seconds; a kube-apiserver
	// restart tens of seconds), shorter than you would let an execution
	// whose controller died sit before a successor takes it. A holder
	// that lost its lease to an outage and finds, once the store is back,
	// that nobody took the record over, takes it back without counting a
	// restart (recovery.Decider.Start).
	TTL time.Duration
	// Wait makes Acquire wait, while ctx allows, for a live holder's
	// ownership to end (released, or expired) instead of failing with
	// [ErrHeld] at once. A controller restarted after a crash waits for
	// its dead predecessor's lease this way.
	Wait bool
	// Reason is recorded in the take-over's audit entry; empty means
	// "acquired".
	Reason string
	// Move, if set, is written in the same atomic step as the take-over:
	// a controller starting takes the record over and writes what it
	// decided on it at once, or writes nothing. See [Move].
	Move *Move
	// Under, if set, takes the record over under an ownership the holder
	// already has in the same store (of its own record: a manager's),
	// instead of a lease of its own: one lease for all of a manager's
	// executions, as a leader-elected operator holds one. The record is
	// held while Under lasts, nothing renews it on its own, and its
	// ownership ends when Under's does; releasing it lets this record go
	// alone. Under must be held by Holder and still live; TTL is Under's
	// and must be left zero. An ownership Acquire returned with Under may
	// not be the Under of another.
	Under Ownership
}

// Move is a change of status and metadata made in the same atomic write
// as a take-over ([Lease].Move). It was decided on the record at
// Revision; if the record has moved on since, the take-over writes
// nothing, holds nothing and fails with a [*ConflictError] carrying the
// record as it is now, so the caller decides again. Stores apply it with
// [Lease.TakeOver]; transition.Persisted builds it after checking the
// move against its table.
type Move struct {
	Revision uint64            // the revision of the record the move was decided on
	Status   string            // the status to write; the record's own to keep it
	Meta     map[string]string // the record's whole metadata after the move
	Actor    string            // recorded as the writer; empty: the lease's holder
	At       time.Time         // when it was decided; zero: the take-over's time
}

// TTLOrDefault returns the lease's TTL, or DefaultLeaseTTL when it is
// zero: what a store whose ownership expires holds it for.
func (l Lease) TTLOrDefault() time.Duration {
	if l.TTL == 0 {
		return DefaultLeaseTTL
	}
	return l.TTL
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
	if l.TTL != 0 && (l.TTL < MinLeaseTTL || l.TTL > MaxLeaseTTL) {
		return bad("TTL %v, want %v to %v (0: %v)", l.TTL, MinLeaseTTL, MaxLeaseTTL, DefaultLeaseTTL)
	}
	if l.Under != nil {
		switch owner := l.Under.Claim().Owner; {
		case owner != l.Holder:
			return bad("under an ownership of %s: a holder takes records under its own", quote.Limited(owner))
		case l.TTL != 0:
			return bad("TTL %v under another ownership, which has its own", l.TTL)
		}
	}
	if m := l.Move; m != nil {
		if err := checkText("move's status", m.Status, MaxStatusLen, false); err != nil {
			return bad("%v", err)
		}
		if err := checkText("move's actor", m.Actor, MaxOwnerLen, true); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// TakeOver returns the record an Acquire writes over rec: owned by the
// lease's holder at epoch, with the lease's [Move] made if it has one,
// and one audit entry for the whole change, at the given time. Stores
// call it to build the record their Acquire writes, and validate what it
// returns. The audit trail keeps the record's own [Record.HistoryKept]
// entries, dropping the oldest.
//
// With a Move decided on another revision than rec's, the error is a
// [*ConflictError] carrying rec: the store writes nothing and returns it.
// Otherwise the error (matching [ErrInvalidRecord]) says the entry cannot
// follow the record's trail: a trail at or above the record's own
// revision.
func (l Lease) TakeOver(rec Record, epoch uint64, at time.Time) (Record, error) {
	next := rec.Clone()
	at = at.UTC().Round(0)
	reason := l.Reason
	if reason == "" {
		reason = "acquired"
	}
	e := Entry{From: rec.Status, To: rec.Status, Reason: reason, Actor: l.Holder, Owner: l.Holder, Epoch: epoch,
		At: at, Revision: rec.Revision}
	if m := l.Move; m != nil {
		if m.Revision != rec.Revision {
			return Record{}, &ConflictError{ID: rec.ID, Expected: m.Revision, Current: rec.Clone()}
		}
		if !m.At.IsZero() {
			e.At = m.At.UTC().Round(0)
		}
		if m.Actor != "" {
			e.Actor = m.Actor
		}
		e.To = m.Status
		if m.Status != rec.Status {
			next.Status, next.Previous, next.Since = m.Status, rec.Status, e.At
		}
		next.Meta = maps.Clone(m.Meta)
		if len(next.Meta) == 0 {
			next.Meta = nil
		}
		if m.Status != rec.Status || l.Reason != "" {
			next.Reason = l.Reason
		}
	}
	next.Owner, next.Epoch, next.UpdatedAt = l.Holder, epoch, e.At
	trail, err := next.History.Append(e, rec.HistoryKept())
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
// way for everyone: Lost is closed when the ownership ends for any reason,
// and from then on none of the holder's writes lands.
//
//   - Memory and boltstore hold it in the process that holds the
//     store: a holder cannot die without the store going with it (bbolt's
//     file lock is released when its process dies), so it lasts until
//     Release or until the store is closed. A write is checked and made
//     under the store's own lock, so it lands before Release or not at
//     all.
//   - etcdstore binds it to an etcd lease kept alive in the background;
//     every write compares the lease in its transaction, so etcd applies
//     it only while the lease exists, and Release revokes the lease
//     before Lost closes.
//   - kube holds a coordination.k8s.io/v1 Lease renewed in the
//     background. Kubernetes has no transaction across two objects: a
//     write is sent only while the Lease is unexpired by the holder's
//     clock (counted from the start of its last renewal), with the
//     request's deadline at that expiry, and Lost closes at the latest
//     then. An API server applies what it has received, so a write sent
//     just before the expiry may be applied just after it; a successor's
//     take-over fences it all the same.
type Ownership interface {
	// Claim is the holder and the epoch the record was taken over at.
	Claim() Claim
	// Lost is closed when the ownership has ended: released, expired,
	// revoked, taken by another holder after it expired, or the store
	// closed. The holder must stop driving the execution: its writes
	// fail with [ErrFenced] from then on (see CompareAndSwap), and Lost
	// closes only once the writes in flight have returned.
	Lost() <-chan struct{}
	// CompareAndSwap is the store's CompareAndSwap made by the holder: it
	// writes next only while the ownership lasts, and otherwise writes
	// nothing and fails with a [*FencedError] whose Lost is set. next
	// must carry the ownership's claim (ErrInvalidRecord otherwise); the
	// rest of the contract is [Store].CompareAndSwap's.
	CompareAndSwap(ctx context.Context, expect uint64, next Record) (Record, error)
	// Release ends the ownership at once, so the next controller need
	// not wait for it to expire. It writes nothing to the record, closes
	// Lost and is safe to call more than once. To the next holder a
	// released ownership and an expired one look the same: a test plays
	// a controller that died by releasing its ownership.
	Release(ctx context.Context) error
}

// Ended reports whether o has ended (its Lost channel is closed), or is
// nil: whether its holder holds nothing now.
func Ended(o Ownership) bool {
	if o == nil {
		return true
	}
	select {
	case <-o.Lost():
		return true
	default:
		return false
	}
}

// HeldError is returned by Acquire when a live holder owns the record. It
// matches [ErrHeld]; when Acquire waited ([Lease].Wait) until its context
// ended, it also matches the context's error.
type HeldError struct {
	ID     string // the record
	Holder string // who holds it, when the store knows
	Status string // the record's status when it was found held, when known
	Waited error  // the context's error, when Acquire waited until it ended
}

func (e *HeldError) Error() string {
	msg := fmt.Sprintf("storage: %s: %v", quote.Limited(e.ID), ErrHeld)
	if e.Holder != "" {
		msg += ": held by " + quote.Limited(e.Holder)
	}
	if e.Status != "" {
		msg += " in status " + quote.Limited(e.Status)
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

// KeepsOwnClaim returns nil if next carries claim, and otherwise the
// error an [Ownership]'s CompareAndSwap returns for it (matching
// [ErrInvalidRecord]).
func KeepsOwnClaim(id string, claim Claim, next Record) error {
	if next.Claim() != claim {
		return fmt.Errorf("storage: CompareAndSwap %s: %w: the ownership is %s@%d, the record carries %s@%d",
			quote.Limited(id), ErrInvalidRecord, quote.Limited(claim.Owner), claim.Epoch, quote.Limited(next.Owner), next.Epoch)
	}
	return nil
}

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
