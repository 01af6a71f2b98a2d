package boltstore

import (
	"github.com/execfsm/execfsm/storage"
)

// A compare-and-swap needs only the stored record's revision and claim,
// but reading them from the file means decoding the whole record (its
// JSON, audit trail included), inside the write transaction that every
// writer waits for: in the load run that decode was more than half of a
// batch's time. This process holds the file's lock, so no other writer
// exists: the revision and claim it last wrote (or read inside a write)
// are the ones stored. heads remembers them; a record it does not know
// is decoded as before, and one that does not decode is refused as
// before (nothing unreadable is remembered, so nothing unreadable is
// overwritten).
//
// heads is used only by the leader, which holds the writer's turn: it
// needs no lock. Writes of a batch go into pending first and are kept
// only if the transaction commits.

// maxHeads bounds what heads remembers (about 100 bytes each); past it
// it starts again from nothing, which costs decodes, never correctness.
const maxHeads = 1 << 16

// head is what a compare-and-swap checks of a stored record.
type head struct {
	revision uint64
	claim    storage.Claim
}

type heads struct {
	known   map[headKey]head // committed
	pending map[headKey]head // written by the batch in progress
}

func (h *heads) wrote(key headKey, hd head) {
	if h.pending == nil {
		h.pending = map[headKey]head{}
	}
	h.pending[key] = hd
}

// commit keeps the batch's heads.
func (h *heads) commit() {
	if len(h.known)+len(h.pending) > maxHeads {
		h.known = nil
	}
	if h.known == nil {
		h.known = make(map[headKey]head, len(h.pending))
	}
	for k, hd := range h.pending {
		h.known[k] = hd
	}
	h.rollback()
}

func (h *heads) rollback() { h.pending = reuse(h.pending) }

// reuse returns m emptied for the next batch. A lone writer's batch
// holds a key or two, and making its maps anew every write was a fifth
// of its allocations; a map a large batch grew is dropped instead, since
// clearing it costs in proportion to its size.
func reuse[K comparable, V any](m map[K]V) map[K]V {
	const smallMap = 8
	if len(m) > smallMap {
		return nil
	}
	clear(m)
	return m
}

func (h *heads) lookup(key headKey) (head, bool) {
	if hd, ok := h.pending[key]; ok {
		return hd, true
	}
	hd, ok := h.known[key]
	return hd, ok
}

// headKey names a record among all the DB's stores: its store's
// namespace and its id (two strings, not one made of them: a key is
// looked up or stored three times a write).
type headKey struct{ namespace, id string }

// headKey names record id of this store.
func (s *Store) headKey(id string) headKey { return headKey{s.namespace, id} }

// head returns the revision and claim of record id, inside a write
// transaction, decoding the record only if heads does not know it.
func (s *Store) head(v *batchView, id string) (head, error) {
	key := s.headKey(id)
	if hd, ok := s.db.heads.lookup(key); ok && hd.revision != 0 { // zero: deleted, looked up again
		return hd, nil
	}
	cur, err := s.current(v, id)
	if err != nil {
		return head{}, err
	}
	hd := head{revision: cur.Revision, claim: cur.Claim()}
	s.db.heads.wrote(key, hd) // read in this transaction: as good as written, if it commits
	return hd, nil
}
