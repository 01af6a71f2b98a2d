package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/locallease"
)

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
	parent, err := s.parent(id, lease.Under)
	if err != nil {
		return nil, storage.Record{}, err
	}
	var written storage.Record
	h, err := s.owners.Acquire(ctx, id, lease.Wait, parent, func() (string, uint64, error) {
		var err error
		written, err = s.write(ctx, func(v *batchView) (storage.Record, error) {
			cur, err := s.current(v, id)
			if err != nil {
				return storage.Record{}, err
			}
			floor, err := s.epochFloor(v)
			if err != nil {
				return storage.Record{}, err
			}
			return lease.TakeOver(cur, max(cur.Epoch, floor)+1, time.Now())
		})
		return written.Owner, written.Epoch, err
	})
	if errors.Is(err, locallease.ErrParentEnded) {
		return nil, storage.Record{}, storage.UnderEnded(id, lease.Under)
	}
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

// parent returns the hold of the ownership a record is to be taken under
// ([storage.Lease].Under), nil for none: one of this DB's, not itself
// taken under another.
func (s *Store) parent(id string, under storage.Ownership) (*locallease.Held, error) {
	if under == nil {
		return nil, nil
	}
	o, ok := under.(ownership)
	switch {
	case !ok || !s.owners.Owns(o.h):
		return nil, fmt.Errorf("boltstore: lease for %q: %w: Under is not an ownership of this DB", id, storage.ErrInvalidLease)
	case o.h.Under():
		return nil, fmt.Errorf("boltstore: lease for %q: %w: Under was itself taken under another ownership", id, storage.ErrInvalidLease)
	}
	return o.h, nil
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
