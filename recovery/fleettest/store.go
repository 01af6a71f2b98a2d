package fleettest

import (
	"context"

	"github.com/execfsm/execfsm/storage"
)

// actorStore is the store as one actor of the fleet reaches it: every
// write is attributed to the actor, checked against the invariants that
// concern writes, and is a point where the explorer may let another actor's
// action land first (a race between the writer's read and its write).
type actorStore[S comparable] struct {
	w     *world[S]
	actor string
	pod   *pod[S] // nil for the master and the reaper
	inner *storage.Memory
}

var (
	_ storage.Store   = (*actorStore[string])(nil)
	_ storage.Lister  = (*actorStore[string])(nil)
	_ storage.Deleter = (*actorStore[string])(nil)

	_ storage.PageLister = (*actorStore[string])(nil)
)

func (s *actorStore[S]) Get(ctx context.Context, id string) (storage.Record, error) {
	return s.inner.Get(ctx, id)
}

func (s *actorStore[S]) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	return s.inner.List(ctx)
}

func (s *actorStore[S]) ListPage(ctx context.Context, q storage.Query) (storage.Page, error) {
	return s.inner.ListPage(ctx, q)
}

func (s *actorStore[S]) Held(ctx context.Context, id string) (storage.Claim, bool, error) {
	return s.inner.Held(ctx, id)
}

func (s *actorStore[S]) Create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	s.w.beforeWrite(s.actor)
	out, err := s.inner.Create(ctx, rec)
	if err == nil {
		s.w.landed(s, storage.Record{}, out, nil)
	}
	return out, err
}

func (s *actorStore[S]) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	s.w.beforeWrite(s.actor)
	before := s.w.beforeLanding(ctx, id)
	out, err := s.inner.CompareAndSwap(ctx, id, expect, next)
	if err == nil {
		s.w.landed(s, before, out, nil)
	}
	return out, err
}

// Delete is the Retirer's delete, checked as it lands: nobody may hold
// the execution.
func (s *actorStore[S]) Delete(ctx context.Context, id string, expect uint64) error {
	s.w.beforeWrite(s.actor)
	holders := s.w.holders(id)
	if err := s.inner.Delete(ctx, id, expect); err != nil {
		return err
	}
	s.w.retired(s.actor, id, holders)
	return nil
}

func (s *actorStore[S]) Acquire(ctx context.Context, id string, lease storage.Lease) (storage.Ownership, storage.Record, error) {
	s.w.beforeWrite(s.actor)
	before := s.w.beforeLanding(ctx, id)
	own, out, err := s.inner.Acquire(ctx, id, lease)
	if err != nil {
		return nil, out, err
	}
	claim := own.Claim()
	s.w.landed(s, before, out, &claim)
	return &actorOwnership[S]{Ownership: own, s: s, id: id}, out, nil
}

// actorOwnership is an ownership whose holder's writes go through its
// actorStore.
type actorOwnership[S comparable] struct {
	storage.Ownership
	s  *actorStore[S]
	id string
}

func (o *actorOwnership[S]) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	o.s.w.beforeWrite(o.s.actor)
	before := o.s.w.beforeLanding(ctx, o.id)
	out, err := o.Ownership.CompareAndSwap(ctx, expect, next)
	if err == nil {
		claim := o.Claim()
		o.s.w.landed(o.s, before, out, &claim)
	}
	return out, err
}
