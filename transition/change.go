package transition

import (
	"context"
	"time"
)

// Change is one move from a state to another, with who made it, why and
// when: what guards judge, what observers see and what [Persisted.Fire]
// returns. [Machine.Fire] returns the smaller [Step].
type Change[S comparable] struct {
	ID     string // the execution's id; empty for a Machine given none
	From   S
	To     S
	Reason string // why the move was made, as its caller said
	Actor  string // who made it (see [Actor])
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

// Guard decides whether a move may happen. A nil error lets it; any other
// error vetoes it, and the caller of Fire gets an [*Error] that matches
// [ErrGuard] and unwraps to the guard's error. A guard must not block for
// long without watching ctx, and may run more than once for one Fire when
// concurrent writers race (each run sees the state it would replace).
type Guard[S comparable] func(ctx context.Context, c Change[S]) error

// runGuards runs the table-wide guards, then those of the edge.
func runGuards[S comparable](ctx context.Context, t *Table[S], i, j int, c Change[S]) error {
	all, edge := t.guardsFor(i, j)
	for _, list := range [2][]Guard[S]{all, edge} {
		for _, g := range list {
			if err := g(ctx, c); err != nil {
				return &Error{ID: c.ID, From: t.names[i], To: t.names[j], Guard: err}
			}
		}
	}
	return nil
}
