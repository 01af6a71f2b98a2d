package boltstore

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

var _ storage.TableKeeper = (*Store)(nil)

// tableWrite is a SetTable waiting in the group commit.
type tableWrite struct {
	expect uint64
	doc    []byte
}

// Table implements [storage.TableKeeper]. The document is written
// through the log like a record, and kept in the namespace's bucket
// (after its revision) once the log is applied; it is no record, so List
// and Watch never see it.
func (s *Store) Table(ctx context.Context) ([]byte, uint64, error) {
	if err := s.check(ctx, "Table"); err != nil {
		return nil, 0, err
	}
	if l, ok := s.db.overlay.table(s.namespace); ok {
		return append([]byte(nil), l.data...), l.revision, nil
	}
	// Not in the log: bbolt holds the latest write, unless one comes
	// after this read began, which is as good as after it returned.
	var doc []byte
	var rev uint64
	err := s.db.view("read", func(tx *bolt.Tx) error {
		var err error
		doc, rev, err = s.storedTable(tx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if doc == nil {
		return nil, 0, fmt.Errorf("boltstore: namespace %q, table: %w", s.namespace, storage.ErrNotFound)
	}
	return doc, rev, nil
}

// storedTable reads the table document bbolt holds: nil if none.
func (s *Store) storedTable(tx *bolt.Tx) ([]byte, uint64, error) {
	ns := tx.Bucket(s.bucket)
	if ns == nil {
		return nil, 0, nil
	}
	raw := ns.Get(tableKey)
	if raw == nil {
		return nil, 0, nil
	}
	if len(raw) < 9 || getUint(raw[:8]) == 0 || storage.CheckTable(raw[8:]) != nil {
		return nil, 0, fmt.Errorf("boltstore: namespace %q, table: %w: %d bytes stored", s.namespace, storage.ErrCorrupt, len(raw))
	}
	return append([]byte(nil), raw[8:]...), getUint(raw[:8]), nil
}

// SetTable implements [storage.TableKeeper]: a write in the group commit
// like a record's, flushed before it returns.
func (s *Store) SetTable(ctx context.Context, expect uint64, doc []byte) (uint64, error) {
	if err := s.check(ctx, "SetTable"); err != nil {
		return 0, err
	}
	if err := storage.CheckTable(doc); err != nil {
		return 0, err
	}
	rec, err := s.enqueue(&request{ctx: ctx, store: s, table: &tableWrite{expect: expect, doc: append([]byte(nil), doc...)},
		done: make(chan outcome, 1)})
	return rec.Revision, err
}

// applyTable checks a table write against the table as the batch has
// left it and, if it is at the revision expected, adds it to the batch
// at the next revision.
func (s *Store) applyTable(v *batchView, w *tableWrite) (uint64, error) {
	cur, err := v.tableRevision(s)
	if err != nil {
		return 0, err
	}
	if cur != w.expect {
		return 0, fmt.Errorf("boltstore: namespace %q, table: %w: at revision %d, not %d", s.namespace, storage.ErrConflict, cur, w.expect)
	}
	rev := max(s.db.revision, cur) + 1
	s.db.revision = rev
	v.add(s, wal.TableID, rev, w.doc, "")
	return rev, nil
}

// tableRevision is the revision of the namespace's table as the batch
// sees it: the batch's own write, then the log's, then bbolt's; 0 if
// there is none.
func (v *batchView) tableRevision(s *Store) (uint64, error) {
	if i, ok := v.written[s.headKey(wal.TableID)]; ok {
		return v.entries[i].Revision, nil
	}
	if l, ok := tableInGens(v.gens, s.namespace); ok {
		return l.revision, nil
	}
	var rev uint64
	err := v.db.closedError(v.read(func(tx *bolt.Tx) error {
		var err error
		_, rev, err = s.storedTable(tx)
		return err
	}))
	return rev, err
}
