package transition

import (
	"context"
	"maps"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// Change is one move from a state to another, with who made it, why and
// when: what guards judge, what observers see and what [Persisted.Fire]
// returns. [Machine.Fire] returns the smaller [Step].
type Change[S comparable] struct {
	ID     string // the execution's id; empty for a Machine given none
	From   S
	To     S
	Reason string // why the move was made, as its caller said
	Actor  string // who made it (see [PersistedOptions].Actor)
	// At is when the move was made. A [Machine] with neither guards nor
	// observers leaves it zero: reading the clock would cost more than
	// the move itself, and nobody would see the time.
	At time.Time
	// Revision: for an observer or a caller of Fire, the revision the
	// change was written at (for a Machine, its count of changes); for a
	// guard, the revision of the state it would replace.
	Revision uint64
	Owner    string // the writer's ownership claim, if it holds one
	Epoch    uint64
}

// Changed reports whether the move changed the state. Writing the state a
// record already has succeeds and changes nothing (Teraslice allows it).
func (c Change[S]) Changed() bool { return c.From != c.To }

// Step is what a [Machine.Fire] did: the state it left, the state it
// entered and the machine's count of changes after the move. The rest of
// the [Change] (the machine's id and actor, the caller's reason) is what
// the caller already holds; a Step is small enough to come back in
// registers, which is a third of what a Fire costs (see
// docs/decisions/2026-12-06-step.md).
type Step[S comparable] struct {
	From     S
	To       S
	Revision uint64 // the machine's count of changes after the move
}

// Changed reports whether the move changed the state: false for a Fire
// to the state the machine was already in.
func (s Step[S]) Changed() bool { return s.From != s.To }

// Guard decides whether a move may happen, from the change and the record
// it would be written over (rec: its metadata, its counts; read once per
// write, never again for the guard). A nil error lets it; any other error
// vetoes it, and the caller of Fire gets an [*Error] that matches
// [ErrGuard] and unwraps to the guard's error. A guard must not block for
// long without watching ctx, and may run more than once for one Fire when
// concurrent writers race (each run sees the record it would replace).
// A [Machine] has no record: its guards get the zero View.
type Guard[S comparable] func(ctx context.Context, c Change[S], rec View) error

// View is what a guard sees of the record a move would be written over:
// read only, and shared with the writer, so that looking costs nothing.
// The zero View has no record (a Machine's move).
type View struct{ rec *storage.Record }

// Exists reports whether there is a record: false for a Machine's move.
func (v View) Exists() bool { return v.rec != nil }

// Meta returns the record's metadata value for key, and whether it has
// one.
func (v View) Meta(key string) (string, bool) {
	if v.rec == nil {
		return "", false
	}
	value, ok := v.rec.Meta[key]
	return value, ok
}

// Count returns the record's count of counter (see [Count]).
func (v View) Count(counter string) (Count, error) {
	if v.rec == nil {
		return Count{}, nil
	}
	return CountOf(*v.rec, counter)
}

// Record returns a copy of the record the guard may keep or change (its
// Meta is its own): what recovery's Roles.Spending and Roles.Due take.
// The zero Record for a Machine's move.
func (v View) Record() storage.Record {
	if v.rec == nil {
		return storage.Record{}
	}
	out := *v.rec
	out.Meta = maps.Clone(v.rec.Meta)
	return out
}

// runGuards runs the table-wide guards, then those of the edge.
func runGuards[S comparable](ctx context.Context, t *Table[S], i, j int, c Change[S], rec View) error {
	all, edge := t.guardsFor(i, j)
	for _, list := range [2][]Guard[S]{all, edge} {
		for _, g := range list {
			if err := g(ctx, c, rec); err != nil {
				return &Error{ID: c.ID, From: t.names[i], To: t.names[j], Guard: err}
			}
		}
	}
	return nil
}
