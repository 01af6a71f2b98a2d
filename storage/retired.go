package storage

import (
	"context"
	"time"
)

// Retired is a record on its way out of a store ([Deleter]): what an
// [Archive] keeps of it.
type Retired struct {
	// Record is the record as it was when it was retired, with its audit
	// trail and the revision the delete was made at.
	Record Record
	// Reason says why it was retired: "failed, kept 720h0m0s" for a
	// retention, an operator's own words for a delete by hand.
	Reason string
	// At is when it was retired.
	At time.Time
}

// Archive keeps retired records outside the store, so that a fleet that
// deletes what it no longer runs keeps what its users asked to keep.
// The retirer hands every record to the archive before deleting it, and
// deletes nothing the archive did not take.
type Archive interface {
	// Keep stores every record given, durably, before it returns nil; an
	// error means none may be counted on, and none is deleted. The same
	// record (id and revision) may be given twice: when a delete after
	// Keep lost a race, or two retirers ran at once. A reader of the
	// archive keeps the last copy of each id and revision.
	Keep(ctx context.Context, retired []Retired) error
}
