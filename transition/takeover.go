package transition

import (
	"context"
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Acquire takes the record over for this handle, through the store's
// ownership (see [storage.Store] and [storage.Lease]), and makes the
// move decide asks for in the same atomic write: the handle ends up
// owning the record with the move written, or has written nothing.
// decide is asked on the record as the store holds it, and again on the
// fresh record when it changed before the take-over landed (as for
// [Persisted.Apply]); an error from it is returned as it is. A nil decide
// takes the record over and changes nothing else. The move is checked
// against the table and its guards like any other; the audit entry is
// one for the whole write, with the update's reason (lease.Reason when it
// has none). lease.Move is Acquire's to fill in: leave it nil.
//
// If no live holder owns the record, lease.Holder becomes its owner at
// the next epoch, which fences every earlier claim. If a live holder owns
// it (this handle included) the error matches [storage.ErrHeld], a
// [*storage.HeldError] naming the holder and the status found; with
// lease.Wait, Acquire first waits for that ownership to end while ctx
// allows.
//
// The first call with a valid lease makes the handle a controller's for
// good (see [Persisted]); a later one, once its ownership has ended, takes the
// record over again at a new epoch. It returns the change written and
// the record as stored. Observers see the take-over as a change, from
// the state found to the one decided (the same state for a plain
// take-over).
func (p *Persisted[S]) Acquire(ctx context.Context, lease storage.Lease, decide func(cur S, rec storage.Record) (Update[S], error)) (written Change[S], _ storage.Record, err error) {
	if err := p.check(ctx, "Acquire"); err != nil {
		return Change[S]{}, storage.Record{}, err
	}
	if t := p.tracer; t != nil {
		ctx = t.StartWrite(ctx, p.id)
		defer func() { t.EndWrite(ctx, written, err) }()
	}
	if lease.Move != nil {
		return Change[S]{}, storage.Record{}, errors.New("transition: Acquire: lease.Move is set; Acquire makes it from decide")
	}
	if err := lease.Validate(); err != nil {
		return Change[S]{}, storage.Record{}, err // bad input changes nothing, not even the handle
	}
	p.owner.CompareAndSwap(nil, &owning{}) // a controller's from now on
	for attempt := 1; ; attempt++ {
		rec, err := p.fresh(ctx)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		cur, err := p.stateOf(&rec)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		u := Update[S]{To: cur}
		if decide != nil {
			if u, err = decide(cur, rec.Clone()); err != nil {
				return Change[S]{}, storage.Record{}, err
			}
		}
		l := lease
		if u.Reason != "" {
			l.Reason = u.Reason
		}
		c, move, err := p.planTakeOver(ctx, cur, rec, u, l)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		l.Move = move
		own, stored, err := p.takeOver(ctx, l)
		var conflict *storage.ConflictError
		switch {
		case err == nil:
		case errors.As(err, &conflict) && attempt <= p.retries:
			continue // decided on a record that has moved on: decide again
		case errors.As(err, &conflict):
			return Change[S]{}, storage.Record{}, fmt.Errorf("transition: %s: gave up after %d conflicting take-overs: %w", quote.Limited(p.id), attempt, err)
		default:
			var held *storage.HeldError
			if errors.As(err, &held) && held.Status == "" {
				found := *held
				found.Status = rec.Status
				err = &found
			}
			return Change[S]{}, storage.Record{}, err
		}
		// The take-over is written whatever happens next: the handle learns
		// of it even if the caller has given up waiting.
		_ = p.settle(context.WithoutCancel(ctx), func() (Change[S], bool) {
			claim := own.Claim()
			p.owner.Store(&owning{claim: claim, own: own})
			p.remember(&stored)
			c.Revision, c.Owner, c.Epoch = stored.Revision, claim.Owner, claim.Epoch
			return c, true
		})
		return c, stored.Clone(), nil
	}
}

// takeOver calls the store's Acquire, remembering the take-over while
// its outcome is unknown: a failure that may have written it leaves the
// handle able to recognise its own claim in the record (see read).
func (p *Persisted[S]) takeOver(ctx context.Context, l storage.Lease) (storage.Ownership, storage.Record, error) {
	last := p.owner.Load()
	tried := &owning{claim: last.claim, own: last.own, tried: &takeOver{holder: l.Holder, revision: l.Move.Revision}}
	p.owner.Store(tried)
	own, stored, err := p.store.Acquire(ctx, p.id, l)
	if err == nil || nothingWritten(err) {
		p.owner.CompareAndSwap(tried, last)
	}
	return own, stored, err
}

// nothingWritten reports whether err from a store's Acquire says that
// nothing was written.
func nothingWritten(err error) bool {
	for _, sentinel := range []error{storage.ErrHeld, storage.ErrConflict, storage.ErrNotFound,
		storage.ErrInvalidLease, storage.ErrInvalidRecord} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// planTakeOver checks the move u asks of rec (in state cur) like any
// other write and returns the change and the move a take-over makes.
func (p *Persisted[S]) planTakeOver(ctx context.Context, cur S, rec storage.Record, u Update[S], l storage.Lease) (Change[S], *storage.Move, error) {
	t := p.table
	i, _ := t.lookup(cur)
	j, ok := t.lookup(u.To)
	if !ok {
		return Change[S]{}, nil, &Error{ID: p.id, From: t.names[i], To: quote.Limited(nameOf(u.To)), Reason: "not a state of the table"}
	}
	reason := l.Reason
	if reason == "" {
		reason = "acquired"
	}
	c := Change[S]{ID: p.id, From: cur, To: u.To, Reason: reason, Actor: p.actor, At: p.now(), Revision: rec.Revision}
	if i != j {
		if err := p.checkMove(ctx, i, j, &rec, c); err != nil {
			return Change[S]{}, nil, err
		}
	}
	meta, changed := mergeMeta(rec.Meta, u.Meta, u.Unset)
	if i != j {
		meta = t.countMove(i, j, meta, changed, c.At)
		meta = p.annotated(ctx, c, meta)
	}
	probe := storage.Record{ID: p.id, Status: t.names[j], Reason: u.Reason, Meta: meta}
	if err := probe.Validate(); err != nil { // the reason and the metadata: the rest came from the store
		return Change[S]{}, nil, err
	}
	return c, &storage.Move{Revision: rec.Revision, Status: t.names[j], Meta: meta, Actor: p.actor, At: c.At}, nil
}

// tookOver reports whether the take-over t wrote rec's claim: rec is
// owned by t's holder, and the audit entry of that claim follows the
// revision t was decided on.
func tookOver(rec storage.Record, t takeOver) bool {
	if rec.Owner != t.holder {
		return false
	}
	for _, e := range rec.History.All() {
		if e.Owner == rec.Owner && e.Epoch == rec.Epoch {
			return e.Revision == t.revision
		}
	}
	return false
}
