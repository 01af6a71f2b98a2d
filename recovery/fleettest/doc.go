// Package fleettest explores every interleaving of a small fleet running an
// execution lifecycle: a cluster master, the controller pods of each
// execution, their platform (SIGTERMs for drains, SIGKILLs and lost nodes,
// replacement pods as a Kubernetes Job makes them), time (leases expiring,
// deadlines passing, restarts leaving their window) and the Reaper, with
// races at every write. The controllers run this library's own decisions
// (recovery.Decider's Start, Terminate, Finish and Abandon, the Reaper,
// transition.Persisted's writes) against storage.Memory under a clock the
// explorer moves, and the invariants a fleet must keep are checked at
// every state. It checks the code, not a model of it.
package fleettest
