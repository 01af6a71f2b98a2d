// Package transition holds what any lifecycle needs, whatever its states:
// a validated transition [Table], guards, a lock-free in-memory [Machine],
// and [Persisted], which moves a record kept in a [storage.Store] by
// compare-and-swap, with an audit trail and ownership fencing.
//
// # Tables
//
// A table is built once, with [New] and its builder (see its example),
// and never changes. Build refuses a table with a mistake in it (a state nothing reaches, a
// state that can never finish, an edge out of a terminal state, a
// duplicate) and lists every mistake at once. States may be of any
// comparable type: an integer enum, a string type, a struct.
//
// # Moving
//
// [Machine.Fire] and [Persisted.Fire] move to a state if the table allows
// it and every guard agrees; otherwise they return an [*Error] that
// matches [ErrNotAllowed] or [ErrGuard]. Firing the current state is an
// idempotent success that changes nothing. A Machine's Fire returns the
// [Step] it took (from, to, its count of changes); a Persisted's the
// whole [Change], with the revision, owner and epoch the store wrote it
// under. A [Persisted] never overwrites
// what it has not read: on a concurrent write it re-reads and decides
// again ([Persisted.Apply] makes that decision a function of the fresh
// record).
//
// # Observers
//
// The OnChange functions of the [Observers] given to [NewMachine] or
// [NewPersisted] see every change it made exactly once, in the
// order the changes were written, one at a time, each change by every
// observer in the order they were given. No lock is held while an
// observer runs, so an observer may call back into the machine that
// called it: that change is delivered after the current one, once the
// observer returns. It follows that Fire may return before observers have
// seen its change, when another goroutine (or an observer up the stack)
// is delivering; they will see it.
//
// An observer that panics is recovered: the change it was given is made
// (and written) already, so the caller of Fire gets no panic for it, and
// the other observers still see it. The panic goes to OnObserverPanic,
// or is logged.
//
// # Ownership
//
// A controller drives an execution only while it owns it (see package
// storage for the contract every store keeps). [Persisted.Acquire]
// takes the record over through its store, with the move it decides on
// in the same atomic write, and turns the handle into the controller's
// for good: it writes under the new [storage.Claim] through the
// ownership, so from then on the previous owner's writes fail with
// [storage.ErrFenced], and so do this handle's once its Ownership's Lost
// channel has closed (the store refuses them too: none lands after). A
// handle from [NewPersisted] that has never taken the record over writes
// as an outside authority (a cluster master asking for a stop), never
// fenced; a controller's handle never writes as one, not even before it
// owns the record or after it lost it.
//
// # Return edges
//
// Some states remember where they came from. [Builder.Return] declares
// edges that may only lead back to the state the current one was entered
// from; records keep that state in [storage.Record.Previous]. The execution
// lifecycle uses it for relocation: a relocated paused execution comes
// back paused.
package transition
