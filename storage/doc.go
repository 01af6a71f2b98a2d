// Package storage is the contract between a lifecycle and the place its
// executions are kept: the [Record] and its limits and codec, the [Store]
// that changes records only by compare-and-swap, the optional [Lister]
// and [Watcher], ownership ([Lease], [Ownership], [Claim]), the errors
// every store returns, and [Memory], a Store in process memory.
//
// It is a leaf: it knows nothing of tables or decisions, so a store
// (boltstore, etcdstore, kube, or a user's own) depends on this package
// alone, as River's drivers depend on rivertype. Package transition
// moves records through a table; package recovery decides on them.
//
// # Records
//
// A [Record] is status-agnostic: it keeps the status as text, so one
// store serves any table. Every write is checked against the limits
// ([Record.Validate]), so a megabyte of reason is a clear error at the
// caller, not a rejected request later. The audit trail (History) is
// written in the same atomic write as the change it records.
//
// # Ownership
//
// A controller drives an execution only while it owns it. Acquire takes a
// record over for a [Lease]'s holder only if no live holder owns it
// (otherwise [ErrHeld]), bumping the record's epoch in the same atomic
// step, with the [Move] the holder decided on the record if it has one
// (a start is one write: taken over with its verdict, or nothing), and
// returns an [Ownership] that lasts until it is released or lost. Each
// store keeps it alive its own way: the process for Memory and
// boltstore, an etcd lease, a Kubernetes Lease. The holder writes
// through the Ownership's CompareAndSwap, which the store refuses once
// the ownership has ended; writes made under an older [Claim] fail with
// [ErrFenced]; nothing but Acquire changes a record's owner or epoch.
// Held says whether a record has a live holder, for a reaper that ends
// executions whose controller is gone.
//
// # Writing a store
//
// Implement [Store] (and [Lister] and [Watcher] if the backend can) and
// run the conformance suite in package storage/storagetest against it:
// it checks the contract documented on Store, ownership included.
package storage
