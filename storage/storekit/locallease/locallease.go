// Package locallease holds ownership of records in the process that holds
// their store, for the stores that live in one process (storage.Memory,
// boltstore). A holder there cannot die without the store dying with it
// (bbolt's file lock goes with its process), so an ownership lasts until
// it is released or the store is closed: exactly what a lease renewed by
// a live holder gives, with nothing to renew.
//
// It knows nothing of records: the store passes the write that takes a
// record over, and wraps what it gets back in its own types.
package locallease

import (
	"context"
	"errors"
	"sync"

	"github.com/execfsm/execfsm/storage/storekit/writegate"
)

// Table is the ownership of one store's records. Its zero value is ready.
type Table struct {
	mu     sync.Mutex
	held   map[string]*Held
	closed error // set by Close: what Acquire returns from then on
}

// Held is one ownership.
type Held struct {
	table   *Table
	id      string
	Owner   string
	Epoch   uint64
	pending bool          // the take-over write is still under way
	settled chan struct{} // closed once it is no longer: written, or failed
	gate    *writegate.Gate
	// parent is the ownership this one was taken under (nil: none), and
	// children those taken under this one; both under table.mu.
	parent   *Held
	children map[*Held]struct{}
}

// Lost is closed when the ownership ends.
func (h *Held) Lost() <-chan struct{} { return h.gate.Lost() }

// Release ends the ownership, and those taken under it; it is
// idempotent.
func (h *Held) Release() {
	h.table.mu.Lock()
	if h.table.held[h.id] == h {
		delete(h.table.held, h.id)
	}
	if h.parent != nil {
		delete(h.parent.children, h)
	}
	children := h.children
	h.children = nil
	h.table.mu.Unlock()
	h.end()
	for c := range children {
		c.Release()
	}
}

// Owns reports whether h is one of t's ownerships.
func (t *Table) Owns(h *Held) bool { return h != nil && h.table == t }

// Under reports whether h was taken under another ownership.
func (h *Held) Under() bool {
	h.table.mu.Lock()
	defer h.table.mu.Unlock()
	return h.parent != nil
}

// Live reports whether h still holds its record.
func (h *Held) Live() bool {
	h.table.mu.Lock()
	defer h.table.mu.Unlock()
	return h.table.held[h.id] == h && !h.pending
}

// Write runs write while the ownership lasts and reports true, or
// reports false without running it once the ownership has ended. The
// ownership cannot end while write runs: what it writes lands before
// Lost closes, or not at all.
func (h *Held) Write(write func()) bool { return h.gate.Write(write) }

func (h *Held) end() { h.gate.End() }

// Holder returns the owner and epoch of record id's live ownership, and
// false when nobody holds it (or its take-over is still being written).
func (t *Table) Holder(id string) (owner string, epoch uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[id]
	if h == nil || h.pending {
		return "", 0, false
	}
	return h.Owner, h.Epoch, true
}

// BusyError says that a holder has the record. Waited is the context's
// error when Acquire waited for the holder until its context ended.
type BusyError struct {
	Holder string
	Waited error
}

func (e *BusyError) Error() string { return "locallease: held by " + e.Holder }

// Acquire takes record id. If nobody holds it, it calls takeOver, which
// writes the take-over into the record and returns the new owner and
// epoch; the record is reserved meanwhile, so takeOver runs for one
// acquirer at a time. If a holder has it, Acquire fails with a
// [*BusyError] or, when wait is set, waits until that ownership ends or
// ctx is done. takeOver's error is returned as it is and nothing is held.
//
// Another acquirer's take-over still being written is waited for (one
// write, or ctx), whatever wait says: it may fail (a move decided on a
// record that has moved on), and then nobody held the record, so an
// answer of "held" would be untrue.
//
// With a parent (an ownership of this table, not itself taken under
// another), the ownership is taken under it: it ends when the parent's
// does. A parent that has ended fails Acquire with ErrParentEnded,
// before the take-over is written or, if it ends meanwhile, after (the
// write stands, the hold does not).
func (t *Table) Acquire(ctx context.Context, id string, wait bool, parent *Held, takeOver func() (owner string, epoch uint64, err error)) (*Held, error) {
	if parent != nil && !parent.Live() {
		return nil, ErrParentEnded
	}
	for {
		t.mu.Lock()
		if t.closed != nil {
			t.mu.Unlock()
			return nil, t.closed
		}
		cur := t.held[id]
		if cur == nil {
			break // t.mu stays locked
		}
		pending, holder := cur.pending, cur.Owner
		t.mu.Unlock()
		if pending {
			select {
			case <-cur.settled:
				continue // look again: held now, or free
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		if !wait {
			return nil, &BusyError{Holder: holder}
		}
		select {
		case <-cur.gate.Lost():
		case <-ctx.Done():
			return nil, &BusyError{Holder: holder, Waited: context.Cause(ctx)}
		}
	}
	h := &Held{table: t, id: id, pending: true, settled: make(chan struct{}), gate: writegate.New()}
	if t.held == nil {
		t.held = map[string]*Held{}
	}
	t.held[id] = h
	t.mu.Unlock()

	owner, epoch, err := takeOver()

	t.mu.Lock()
	defer t.mu.Unlock()
	defer close(h.settled)
	if err == nil && t.closed != nil {
		err = t.closed // closed while writing: the write stands, the hold does not
	}
	if err == nil && parent != nil && (t.held[parent.id] != parent || parent.pending) {
		err = ErrParentEnded // likewise
	}
	if err != nil {
		if t.held[id] == h {
			delete(t.held, id)
		}
		h.end() // wakes the waiters, who try again
		return nil, err
	}
	h.pending, h.Owner, h.Epoch = false, owner, epoch
	if parent != nil {
		h.parent = parent
		if parent.children == nil {
			parent.children = map[*Held]struct{}{}
		}
		parent.children[h] = struct{}{}
	}
	return h, nil
}

// ErrParentEnded is Acquire's error when the ownership a record was to be
// taken under has ended.
var ErrParentEnded = errors.New("locallease: the ownership to hold it under has ended")

// Close ends every ownership (their Lost channels close) and makes later
// calls to Acquire fail with err, which must not be nil.
func (t *Table) Close(err error) {
	t.mu.Lock()
	t.closed = err
	held := t.held
	t.held = nil
	t.mu.Unlock()
	for _, h := range held {
		h.end()
	}
}
