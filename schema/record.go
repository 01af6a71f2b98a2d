package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
)

// ErrNoTable is matched by Load's error for a store that keeps no table
// yet: its records were written before tables were recorded, or by a
// controller that never recorded one.
var ErrNoTable = errors.New("no table recorded")

// ErrNotKept is matched by the error for a store that cannot keep a
// table (it does not implement storage.TableKeeper).
var ErrNotKept = errors.New("the store keeps no table")

// ErrIncompatible is matched by Save's error for a table that would
// strand records or change how they are decided: see IncompatibleError.
var ErrIncompatible = errors.New("incompatible table")

// IncompatibleError is Save's error for a table it refuses to record
// over the recorded one.
type IncompatibleError struct {
	Name     string
	Recorded int // the recorded version
	Changes  Changes
	// InStatus counts the records in each removed status, when the store
	// can list them.
	InStatus map[string]int
	// InPrevious counts, likewise, the records whose previous status is
	// a removed one: a relocating record returns there. A removed status
	// is in use while a record is in it or has it as its previous status.
	InPrevious map[string]int
}

func (e *IncompatibleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema: %s: %v: the table differs from version %d in ways that could strand a record:", e.Name, ErrIncompatible, e.Recorded)
	for _, line := range strings.Split(e.Changes.String(), "\n") {
		if strings.HasPrefix(line, "status added") || strings.HasPrefix(line, "move added") || strings.HasPrefix(line, "deadline") {
			continue
		}
		b.WriteString("\n  " + line)
		if status, ok := strings.CutPrefix(line, "status removed: "); ok && e.InStatus != nil {
			fmt.Fprintf(&b, " (%s in it", records(e.InStatus[status]))
			if n := e.InPrevious[status]; n > 0 {
				fmt.Fprintf(&b, ", %s with it as their previous status", records(n))
			}
			b.WriteString(")")
		}
	}
	if len(e.Changes.RemovedStates) > 0 {
		b.WriteString("\nto remove or rename a status, record the table with schema.SaveMigrating, " +
			"mapping each removed status to one of the new table's (docs/tables.md)")
	}
	return b.String()
}

// records says "1 record" or "n records".
func records(n int) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

// Unwrap makes errors.Is match ErrIncompatible.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }

// Load reads the table recorded in store. A store without one is
// ErrNoTable; one that cannot keep a table is ErrNotKept.
func Load(ctx context.Context, store storage.Store) (Document, error) {
	d, _, err := load(ctx, store)
	return d, err
}

func load(ctx context.Context, store storage.Store) (Document, uint64, error) {
	keeper, ok := store.(storage.TableKeeper)
	if !ok {
		return Document{}, 0, fmt.Errorf("schema: %T: %w", store, ErrNotKept)
	}
	data, rev, err := keeper.Table(ctx)
	if errors.Is(err, storage.ErrNotFound) {
		return Document{}, 0, fmt.Errorf("schema: %w", ErrNoTable)
	}
	if err != nil {
		return Document{}, 0, err
	}
	d, err := Decode(data)
	if err != nil {
		return Document{}, 0, err
	}
	return d, rev, nil
}

// maxRecordAttempts bounds Save's retries when other controllers record
// at the same time.
const maxRecordAttempts = 16

// Save records the table roles belong to, named name, in store, and
// returns the recorded document. It is what a controller does when it
// opens its executions, before it starts any:
//
//   - with no table recorded yet, the table is recorded as version 1;
//   - with the same table recorded, nothing is written;
//   - a table that only adds statuses and moves (or changes deadlines)
//     is recorded as the next version, the recorded one kept among the
//     earlier versions;
//   - anything else is refused with an *IncompatibleError matching
//     ErrIncompatible, naming each difference and how many records use
//     each removed status (are in it, or have it as their previous
//     status), and nothing is written: SaveMigrating records it, with
//     the controller's consent;
//   - a table recorded under another name is refused too.
//
// Controllers of two versions may record at once: each write is a
// compare-and-swap on the recorded document, and a loser reads it again
// and decides again. An older controller meeting a newer recorded table
// that contains all of its own is not refused: it runs, and leaves the
// records in statuses it does not know alone (see recovery's rolling
// upgrade).
func Save[S comparable](ctx context.Context, store storage.Store, name string, roles *recovery.Roles[S]) (Document, error) {
	next, err := Describe(name, roles)
	if err != nil {
		return Document{}, err
	}
	keeper, ok := store.(storage.TableKeeper)
	if !ok {
		return Document{}, fmt.Errorf("schema: %T: %w", store, ErrNotKept)
	}
	for range maxRecordAttempts {
		cur, rev, err := load(ctx, store)
		switch {
		case errors.Is(err, ErrNoTable):
			next.Version = 1
		case err != nil:
			return Document{}, err
		case cur.Name != name:
			return Document{}, otherName(cur, name)
		default:
			changes := Compare(cur, next)
			if changes.Same() {
				return cur, nil
			}
			if newer, ok := olderThan(cur, next); ok {
				return newer, nil
			}
			if !changes.Compatible() {
				return Document{}, incompatible(ctx, store, cur, changes)
			}
			next = next.after(cur)
		}
		if lost, err := put(ctx, keeper, rev, next); lost {
			continue
		} else if err != nil {
			return Document{}, err
		}
		return next, nil
	}
	return Document{}, fmt.Errorf("schema: %s: %w: the recorded table kept changing", name, storage.ErrConflict)
}

// otherName is the error for a store that records another lifecycle.
func otherName(recorded Document, name string) error {
	return fmt.Errorf("schema: %w: the store keeps table %q, not %q", ErrIncompatible, recorded.Name, name)
}

// after returns d as the version that follows cur, cur's states kept
// among the earlier versions.
func (d Document) after(cur Document) Document {
	d.Version = cur.Version + 1
	d.Earlier = append(slices.Clone(cur.Earlier), Version{Version: cur.Version, States: cur.Table.States})
	return d
}

// put writes d over the document at revision rev; lost says another
// writer got there first (read it again and decide again).
func put(ctx context.Context, keeper storage.TableKeeper, rev uint64, d Document) (lost bool, err error) {
	data, err := d.Encode()
	if err != nil {
		return false, err
	}
	_, err = keeper.SetTable(ctx, rev, data)
	if errors.Is(err, storage.ErrConflict) {
		return true, nil
	}
	return false, err
}

// olderThan reports whether next is an earlier version of the recorded
// table (an older controller during a rolling upgrade): the recorded one
// only adds to it. Then it returns the recorded document.
func olderThan(recorded, next Document) (Document, bool) {
	back := Compare(next, recorded)
	if back.Compatible() && len(back.Policy) == 0 {
		return recorded, true
	}
	return Document{}, false
}

// incompatible builds the error for changes, counting the records in
// each removed status when the store can list them.
func incompatible(ctx context.Context, store storage.Store, recorded Document, changes Changes) error {
	e := &IncompatibleError{Name: recorded.Name, Recorded: recorded.Version, Changes: changes}
	if lister, ok := store.(storage.Lister); ok && len(changes.RemovedStates) > 0 {
		recs, err := using(ctx, lister, changes.RemovedStates)
		if err != nil {
			return errors.Join(e, err)
		}
		e.InStatus, e.InPrevious = map[string]int{}, map[string]int{}
		for _, s := range changes.RemovedStates {
			e.InStatus[s], e.InPrevious[s] = 0, 0
		}
		for _, r := range recs {
			if _, removed := e.InStatus[r.Status]; removed {
				e.InStatus[r.Status]++
			}
			if _, removed := e.InPrevious[r.Previous]; removed {
				e.InPrevious[r.Previous]++
			}
		}
	}
	return e
}

// using lists the records that use one of statuses: they are in it, or
// it is their previous status.
func using(ctx context.Context, lister storage.Lister, statuses []string) ([]storage.Record, error) {
	recs, _, err := lister.List(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r storage.Record) bool {
		return !slices.Contains(statuses, r.Status) && !slices.Contains(statuses, r.Previous)
	}), nil
}

// Listing is a store's records as the table it records sees them.
type Listing struct {
	Table Document
	// Known are the records in a status of the table or of an earlier
	// version of it, ordered by id.
	Known []storage.Record
	// Foreign are those in a status no version knows (written by
	// another table, or by hand): report them, never write over them.
	Foreign []storage.Record
	// Unreadable are those the store cannot read (storage.Lister).
	Unreadable []storage.Unreadable
}

// List lists store's records and sorts them by whether a version of the
// recorded table knows their status. A store without a table is
// ErrNoTable: nothing can be known then.
func List(ctx context.Context, store storage.Store) (Listing, error) {
	d, err := Load(ctx, store)
	if err != nil {
		return Listing{}, err
	}
	lister, ok := store.(storage.Lister)
	if !ok {
		return Listing{}, fmt.Errorf("schema: %T cannot list its records", store)
	}
	recs, bad, err := lister.List(ctx)
	if err != nil {
		return Listing{}, err
	}
	l := Listing{Table: d, Unreadable: bad}
	for _, r := range recs {
		if _, known := d.Knows(r.Status); known {
			l.Known = append(l.Known, r)
		} else {
			l.Foreign = append(l.Foreign, r)
		}
	}
	return l, nil
}
