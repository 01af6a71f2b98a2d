package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
)

// Migration is a controller's explicit consent to a table that is not
// compatible with the recorded one: every difference Compare finds is
// accepted, and the records in each removed status are moved to the
// status Statuses maps it to, before the new table is recorded.
type Migration struct {
	// Statuses maps every status the new table removes (renamed ones
	// included) to a status of the new table. A removed status it does
	// not map is refused, whether records are in it or not.
	Statuses map[string]string
	// Reason is written as each migrated record's reason and in its
	// audit trail. Required.
	Reason string
	// Actor names who migrates, in the audit trail; empty is
	// "schema-migration".
	Actor string
}

// ErrMigration is matched by SaveMigrating's errors for a migration
// that cannot be carried out: one that does not map a removed status,
// maps one to a status the new table lacks, or meets a record a live
// controller holds.
var ErrMigration = errors.New("migration refused")

// SaveMigrating records the table roles belong to, as Save does,
// where the recorded table differs in ways Save refuses, with the
// controller's consent: m. Every record in a removed status is moved to
// the status m maps it to, and every removed previous status (a
// relocating record returns there) is mapped likewise, by
// compare-and-swap as an outside authority (its claim kept, an audit
// entry with m's reason), then the table is recorded as the next
// version; if records using a removed status appear meanwhile (an old
// controller still writing them), they are migrated too before the
// table is. A record a live controller holds is not
// migrated under it: SaveMigrating stops with an error matching
// ErrMigration and storage.ErrHeld, having recorded nothing; run it
// again when the holder has gone. It returns the recorded document and
// the ids of the records it moved.
//
// With a table Save accepts (the same, compatible, an older version),
// it does what Save does and migrates nothing.
func SaveMigrating[S comparable](ctx context.Context, store storage.Store, name string, roles *recovery.Roles[S], m Migration) (Document, []string, error) {
	if m.Reason == "" {
		return Document{}, nil, fmt.Errorf("schema: %w: a migration needs a reason, for the audit trail", ErrMigration)
	}
	if m.Actor == "" {
		m.Actor = "schema-migration"
	}
	next, err := Describe(name, roles)
	if err != nil {
		return Document{}, nil, err
	}
	keeper, ok := store.(storage.TableKeeper)
	if !ok {
		return Document{}, nil, fmt.Errorf("schema: %T: %w", store, ErrNotKept)
	}
	lister, ok := store.(storage.Lister)
	if !ok {
		return Document{}, nil, fmt.Errorf("schema: %w: %T cannot list its records to migrate them", ErrMigration, store)
	}
	var moved []string
	for range maxRecordAttempts {
		cur, rev, err := load(ctx, store)
		if err != nil {
			return Document{}, moved, err
		}
		if cur.Name != name {
			return Document{}, moved, otherName(cur, name)
		}
		changes := Compare(cur, next)
		if changes.Compatible() {
			d, err := Save(ctx, store, name, roles)
			return d, moved, err
		}
		for _, s := range changes.RemovedStates {
			to, mapped := m.Statuses[s]
			if !mapped {
				return Document{}, moved, fmt.Errorf("schema: %w: status %s is removed and the migration does not say where its records go", ErrMigration, s)
			}
			if !slices.Contains(next.Table.States, to) {
				return Document{}, moved, fmt.Errorf("schema: %w: status %s maps to %s, which the new table does not have", ErrMigration, s, to)
			}
		}
		more, err := migrate(ctx, store, lister, changes.RemovedStates, m)
		moved = append(moved, more...)
		if err != nil {
			return Document{}, moved, err
		}
		left, err := using(ctx, lister, changes.RemovedStates)
		if err != nil {
			return Document{}, moved, err
		}
		if len(left) > 0 {
			continue // written meanwhile: migrate those too
		}
		recorded := next.after(cur)
		if lost, err := put(ctx, keeper, rev, recorded); lost {
			continue
		} else if err != nil {
			return Document{}, moved, err
		}
		return recorded, moved, nil
	}
	return Document{}, moved, fmt.Errorf("schema: %s: %w: records or the recorded table kept changing", name, storage.ErrConflict)
}

// migrate moves every record in a removed status to its mapped status,
// and maps every removed previous status likewise.
func migrate(ctx context.Context, store storage.Store, lister storage.Lister, removed []string, m Migration) ([]string, error) {
	recs, err := using(ctx, lister, removed)
	if err != nil {
		return nil, err
	}
	var moved []string
	for _, rec := range recs {
		if err := migrateOne(ctx, store, rec, m); err != nil {
			return moved, err
		}
		moved = append(moved, rec.ID)
	}
	return moved, nil
}

// migrateOne migrates rec (listed using a removed status) by
// compare-and-swap, reading it again after a conflict. A record in a
// removed status moves to the status it maps to; its previous status is
// kept, mapped too if it is removed, so that a relocating record renamed
// still returns where it left (moving from paused is relocating from
// paused). A record whose previous status alone is removed keeps its
// status; its previous status is mapped, and the audit trail says so.
func migrateOne(ctx context.Context, store storage.Store, rec storage.Record, m Migration) error {
	for range maxRecordAttempts {
		to, moves := m.Statuses[rec.Status]
		previous, remaps := m.Statuses[rec.Previous]
		if !moves && !remaps {
			return nil // moved on by someone else meanwhile
		}
		if claim, held, err := store.Held(ctx, rec.ID); err != nil {
			return err
		} else if held {
			return fmt.Errorf("schema: %w: record %s: %w", ErrMigration, rec.ID,
				&storage.HeldError{ID: rec.ID, Holder: claim.Owner, Status: rec.Status})
		}
		next := rec.Clone()
		now := time.Now()
		reason := m.Reason
		if !moves {
			to = rec.Status
			if long := fmt.Sprintf("%s (its previous status %s is %s now)", m.Reason, rec.Previous, previous); len(long) <= storage.MaxReasonLen {
				reason = long
			}
		}
		if !remaps {
			previous = rec.Previous
		}
		history, err := rec.History.Append(storage.Entry{From: rec.Status, To: to, Reason: reason, Actor: m.Actor,
			Epoch: rec.Epoch, At: now, Revision: rec.Revision}, rec.HistoryKept())
		if err != nil {
			return fmt.Errorf("schema: record %s: %w", rec.ID, err)
		}
		next.Previous, next.Status, next.Reason, next.History = previous, to, reason, history
		next.UpdatedAt = now
		if moves {
			next.Since = now
		}
		_, err = store.CompareAndSwap(ctx, rec.ID, rec.Revision, next)
		var conflict *storage.ConflictError
		if errors.As(err, &conflict) {
			rec = conflict.Current
			continue
		}
		return err
	}
	return fmt.Errorf("schema: record %s: %w: it kept changing", rec.ID, storage.ErrConflict)
}
