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
	known   map[string]head // committed
	pending map[string]head // written by the transaction in progress
}

func (h *heads) wrote(key string, hd head) {
	if h.pending == nil {
		h.pending = map[string]head{}
	}
	h.pending[key] = hd
}

func (h *heads) commit() {
	if len(h.known)+len(h.pending) > maxHeads {
		h.known = nil
	}
	if h.known == nil {
		h.known = make(map[string]head, len(h.pending))
	}
	for k, hd := range h.pending {
		h.known[k] = hd
	}
	h.pending = nil
}

func (h *heads) rollback() { h.pending = nil }

func (h *heads) lookup(key string) (head, bool) {
	if hd, ok := h.pending[key]; ok {
		return hd, true
	}
	hd, ok := h.known[key]
	return hd, ok
}

// headKey names record id of this store among all the DB's stores.
func (s *Store) headKey(id string) string { return s.namespace + "\x00" + id }

// head returns the revision and claim of record id, inside a write
// transaction, decoding the record only if heads does not know it.
func (s *Store) head(v *batchView, id string) (head, error) {
	key := s.headKey(id)
	if hd, ok := s.db.heads.lookup(key); ok {
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
