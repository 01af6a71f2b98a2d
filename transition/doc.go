// Package transition holds what any lifecycle needs, whatever its states:
// a validated transition [Table], guards, a lock-free in-memory [Machine],
// and [Persisted], which moves a record kept in a [Store] by
// compare-and-swap, with an audit trail and ownership fencing.
//
// # Tables
//
// A table is built once and never changes:
//
//	table, err := transition.New(Idle).
//		Allow(Idle, Running).
//		Allow(Running, Paused, Done).
//		Allow(Paused, Running, Done).
//		Terminal(Done).
//		Build()
//
// Build refuses a table with a mistake in it (a state nothing reaches, a
// state that can never finish, an edge out of a terminal state, a
// duplicate) and lists every mistake at once. States may be of any
// comparable type: an integer enum, a string type, a struct.
//
// # Moving
//
// [Machine.Fire] and [Persisted.Fire] move to a state if the table allows
// it and every guard agrees; otherwise they return an [*Error] that
// matches [ErrNotAllowed] or [ErrGuard]. Firing the current state is an
// idempotent success that changes nothing. A [Persisted] never overwrites
// what it has not read: on a concurrent write it re-reads and decides
// again ([Persisted.Apply] makes that decision a function of the fresh
// record).
//
// # Ownership
//
// A controller drives an execution only while it owns it. Ownership is
// one contract every [Store] provides: Acquire takes a record over for a
// [Lease]'s holder only if no live holder owns it (otherwise [ErrHeld]),
// bumping the record's epoch in the same atomic step, and returns an
// [Ownership] that lasts until it is released or lost (each store keeps
// it alive its own way: the process for MemoryStore and boltstore, an etcd
// lease, a Kubernetes Lease). [Persisted.Acquire] returns a handle that
// writes under the new [Claim]; from then on the previous owner's writes
// fail with [ErrFenced], and so do this handle's once its Ownership's Lost
// channel has closed. During a relocation, when the old process may still
// be alive, only the new one drives the execution.
//
// Nothing else changes ownership: CompareAndSwap refuses a record whose
// owner or epoch differ from the stored one. A handle from
// [NewPersisted] owns nothing and writes as an outside authority (a
// cluster master asking for a stop), never fenced.
//
// # Return edges
//
// Some states remember where they came from. [Builder.Return] declares
// edges that may only lead back to the state the current one was entered
// from; records keep that state in [Record.Previous]. The execution
// lifecycle uses it for relocation: a relocated paused execution comes
// back paused.
package transition
