package kube

import (
	"sync"

	"github.com/execfsm/execfsm/storage"
)

// claims remembers, per record, the claim it carried at the last
// revision this store read, listed or wrote it at. A ConfigMap at a given
// resourceVersion never changes, so when a CompareAndSwap expects the
// revision remembered, the claim it must keep is known without reading
// the record: the update's resourceVersion precondition makes sure the
// ConfigMap is still that one. That saves every write on a record the
// store has seen a round trip to the API server, half of what a
// transition cost (docs/decisions/2026-12-05-scale.md).
type claims struct {
	mu   sync.Mutex
	byID map[string]claimAt
}

type claimAt struct {
	revision uint64
	claim    storage.Claim
}

// maxClaims bounds what claims holds: past it, a record seen anew takes
// the place of another, whose next write reads it first, as every write
// did before.
const maxClaims = 1 << 16

// remember records rec's claim at its revision.
func (c *claims) remember(rec storage.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]claimAt{}
	}
	if _, ok := c.byID[rec.ID]; !ok && len(c.byID) >= maxClaims {
		for id := range c.byID {
			delete(c.byID, id)
			break
		}
	}
	c.byID[rec.ID] = claimAt{revision: rec.Revision, claim: rec.Claim()}
}

// at returns the claim record id carried at revision, if remembered.
func (c *claims) at(id string, revision uint64) (storage.Claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.byID[id]
	if !ok || got.revision != revision {
		return storage.Claim{}, false
	}
	return got.claim, true
}

// forget drops what is remembered of record id: it was deleted.
func (c *claims) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}
