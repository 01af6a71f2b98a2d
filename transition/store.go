package transition

import (
	"context"
	"fmt"
	"sync"
)

// Store keeps records and changes them only by compare-and-swap. It knows
// nothing of tables: a [Persisted] reads a record, checks the move against
// its table and writes the result back at the revision it read, so two
// writers can never both win and a stale writer never overwrites.
//
// Every implementation must pass the conformance suite in package
// transition/storetest. The contract:
//
//   - Get returns ErrNotFound (wrapped) for an unknown id.
//   - Create validates the record (ErrInvalidRecord), fails with ErrExists
//     if the id is taken, ignores the given Revision and assigns a new one.
//   - CompareAndSwap writes next only if the record's revision is still
//     expected; otherwise it returns a [*ConflictError] carrying the
//     current record. An unknown id is ErrNotFound, next.ID must be id,
//     and next is validated like Create's record.
//   - Revisions are positive and strictly increase with every write of a
//     record; a store may share one counter among all its records.
//   - A call whose context is already done returns the context's error and
//     writes nothing; a call must not block past its context's deadline.
//   - Records returned belong to the caller (no aliasing of store state).
type Store interface {
	Get(ctx context.Context, id string) (Record, error)
	Create(ctx context.Context, rec Record) (Record, error)
	CompareAndSwap(ctx context.Context, id string, expect uint64, next Record) (Record, error)
}

// MemoryStore is a Store in process memory, for tests, examples and
// controllers whose state may die with them. Its zero value is ready to
// use and it is safe for concurrent use.
type MemoryStore struct {
	mu       sync.Mutex
	records  map[string]Record
	revision uint64
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

func checkCall(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("transition: %s: %w", op, ErrNilContext)
	}
	return ctx.Err()
}

// Get implements [Store].
func (s *MemoryStore) Get(ctx context.Context, id string) (Record, error) {
	if err := checkCall(ctx, "Get"); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok {
		return Record{}, fmt.Errorf("transition: %s: %w", quoteLimited(id), ErrNotFound)
	}
	return rec.Clone(), nil
}

// Create implements [Store].
func (s *MemoryStore) Create(ctx context.Context, rec Record) (Record, error) {
	if err := checkCall(ctx, "Create"); err != nil {
		return Record{}, err
	}
	if err := rec.Validate(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[rec.ID]; ok {
		return Record{}, fmt.Errorf("transition: %s: %w", quoteLimited(rec.ID), ErrExists)
	}
	if s.records == nil {
		s.records = map[string]Record{}
	}
	return s.put(rec), nil
}

// CompareAndSwap implements [Store].
func (s *MemoryStore) CompareAndSwap(ctx context.Context, id string, expect uint64, next Record) (Record, error) {
	if err := checkCall(ctx, "CompareAndSwap"); err != nil {
		return Record{}, err
	}
	if next.ID != id {
		return Record{}, fmt.Errorf("transition: CompareAndSwap %s: %w: record id is %s", quoteLimited(id), ErrInvalidRecord, quoteLimited(next.ID))
	}
	if err := next.Validate(); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[id]
	if !ok {
		return Record{}, fmt.Errorf("transition: %s: %w", quoteLimited(id), ErrNotFound)
	}
	if cur.Revision != expect {
		return Record{}, &ConflictError{ID: id, Expected: expect, Current: cur.Clone()}
	}
	return s.put(next), nil
}

// put stores a copy of rec at the next revision; s.mu must be held.
func (s *MemoryStore) put(rec Record) Record {
	s.revision++
	rec = rec.Clone()
	rec.Revision = s.revision
	s.records[rec.ID] = rec
	return rec.Clone()
}
