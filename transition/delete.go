package transition

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Deletion says why and how [Persisted.Delete] removes an execution's
// record.
type Deletion struct {
	// Reason says why, in the deleter's words; required, at most
	// storage.MaxReasonLen bytes of UTF-8. The archive keeps it with the
	// record.
	Reason string
	// Force deletes an execution that has not ended, or whose status the
	// table does not know: a duplicate submission, a record written by
	// mistake. Without it only a record in a terminal state is deleted.
	// A live holder is never overruled either way (storage.ErrHeld).
	Force bool
	// Archive, if set, is handed the record with its audit trail before
	// it is deleted; an archive that fails stops the delete.
	Archive storage.Archive
}

// Delete removes the execution's record from the store for good, as an
// outside authority: an operator, a retirer past the record's retention.
// It reads the record, refuses one whose state is not terminal unless
// d.Force says otherwise ([ErrNotEnded]), hands it to d.Archive if one
// is given, and deletes it at the revision it read: a record that moved
// on meanwhile is a [*storage.ConflictError] (nothing deleted; decide
// again), one a live holder owns a [*storage.HeldError]. It returns the
// record as it was deleted.
//
// The store must implement [storage.Deleter] (every store of this
// module does); one that does not is an error matching
// errors.ErrUnsupported. A controller's handle (after Acquire) deletes
// nothing: the execution it drives is not its to remove, and its store
// would refuse it while it holds it.
//
// The id may be created again afterwards, as a new execution: the store
// keeps its revisions and epochs above every one of the old life, so no
// handle or claim of that life acts on the new one.
func (p *Persisted[S]) Delete(ctx context.Context, d Deletion) (storage.Record, error) {
	if err := p.check(ctx, "Delete"); err != nil {
		return storage.Record{}, err
	}
	switch {
	case d.Reason == "" || len(d.Reason) > storage.MaxReasonLen || !utf8.ValidString(d.Reason):
		return storage.Record{}, fmt.Errorf("transition: Delete %s: a reason is required: 1 to %d bytes of UTF-8 (got %d)",
			quote.Limited(p.id), storage.MaxReasonLen, len(d.Reason))
	case !p.Authority():
		return storage.Record{}, fmt.Errorf("transition: Delete %s: a controller's handle deletes nothing; delete through a handle of NewPersisted, as an outside authority",
			quote.Limited(p.id))
	}
	deleter, ok := p.store.(storage.Deleter)
	if !ok {
		return storage.Record{}, fmt.Errorf("transition: Delete %s: %w: %T does not implement storage.Deleter", quote.Limited(p.id), errors.ErrUnsupported, p.store)
	}
	if err := lock(ctx, p.shared.sem); err != nil {
		return storage.Record{}, err
	}
	defer p.unlock()
	rec, err := p.read(ctx)
	if err != nil {
		return storage.Record{}, err
	}
	cur, err := p.stateOf(&rec)
	switch {
	case err != nil && !d.Force:
		return storage.Record{}, fmt.Errorf("transition: Delete %s: %w (force it to delete a record of another table)", quote.Limited(p.id), err)
	case err == nil && !p.table.IsTerminal(cur) && !d.Force:
		return storage.Record{}, fmt.Errorf("transition: Delete %s: %w: it is %s (force it to delete a live execution)", quote.Limited(p.id), ErrNotEnded, quote.Limited(rec.Status))
	}
	if d.Archive != nil {
		kept := storage.Retired{Record: rec.Clone(), Reason: d.Reason, At: p.now()}
		if err := d.Archive.Keep(ctx, []storage.Retired{kept}); err != nil {
			return storage.Record{}, fmt.Errorf("transition: Delete %s: the archive did not keep it, so it was not deleted: %w", quote.Limited(p.id), err)
		}
	}
	if err := deleter.Delete(ctx, p.id, rec.Revision); err != nil {
		return storage.Record{}, err
	}
	p.shared.cache = storage.Record{}
	return rec, nil
}
