package boltstore

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

var _ storage.Deleter = (*Store)(nil)

// deleteWrite is a Delete waiting in the group commit.
type deleteWrite struct {
	id     string
	expect uint64
}

// Delete implements [storage.Deleter]. A delete is a write in the group
// commit like any other, flushed before it returns: an entry of the log
// (a tombstone carrying the record's epoch), applied to the file by the
// checkpoint, which removes the record and raises the namespace's epoch
// floor. Watchers see it at its revision.
func (s *Store) Delete(ctx context.Context, id string, expect uint64) error {
	if err := s.check(ctx, "Delete"); err != nil {
		return err
	}
	if err := storage.ValidateID(id); err != nil {
		return err
	}
	_, err := s.enqueue(&request{ctx: ctx, store: s, drop: &deleteWrite{id: id, expect: expect}, done: make(chan outcome, 1)})
	return err
}

// applyDelete checks a delete against the store as the batch has left
// it and, if the record is at the revision expected and nobody holds it,
// adds the delete to the batch. The holder is looked up here, in the
// leader: a take-over still being written is not a holder yet, but its
// write moves the revision on, and the delete, checked after it, is a
// conflict.
func (s *Store) applyDelete(v *batchView, d *deleteWrite) error {
	cur, err := s.head(v, d.id)
	if err != nil {
		return err
	}
	if cur.revision != d.expect {
		full, err := s.current(v, d.id)
		if err != nil {
			return err
		}
		return &storage.ConflictError{ID: d.id, Expected: d.expect, Current: full}
	}
	if owner, _, held := s.owners.Holder(d.id); held {
		held := &storage.HeldError{ID: d.id, Holder: owner}
		if full, err := s.current(v, d.id); err == nil {
			held.Status = full.Status
		}
		return held
	}
	revision := max(s.db.revision, cur.revision) + 1
	s.db.revision = revision
	v.add(s, d.id, revision, wal.Tombstone(cur.claim.Epoch), "")
	s.db.heads.wrote(s.headKey(d.id), head{}) // gone: the next write looks it up
	return nil
}

// epochFloor returns the highest epoch a record deleted from the
// namespace had, as the batch sees it: its own deletes, the log's, and
// the file's.
func (s *Store) epochFloor(v *batchView) (uint64, error) {
	floor := floorInGens(v.gens, s.namespace)
	for _, e := range v.entries {
		if epoch, gone := wal.DeletedEpoch(e.Data); gone && e.Namespace == s.namespace {
			floor = max(floor, epoch)
		}
	}
	err := v.db.closedError(v.read(func(tx *bolt.Tx) error {
		if ns := tx.Bucket(s.bucket); ns != nil {
			floor = max(floor, getUint(ns.Get(epochFloorKey)))
		}
		return nil
	}))
	if err != nil {
		return 0, fmt.Errorf("boltstore: namespace %q, its epoch floor: %w", s.namespace, err)
	}
	return floor, nil
}
