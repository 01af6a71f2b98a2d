// Package state is the vocabulary of an execution's lifecycle: its
// statuses ([Status]), sets of them ([Set]) and their text form
// ([Parse]). It depends on the standard library alone, so a dashboard,
// a CLI or a log decoder can read a status without compiling the
// decisions or the reconcile runtime.
//
// An execution is submitted ([Pending]), placed by the cluster master
// ([Scheduling]), set up by its controller ([Initializing]) and then works
// in one of the running statuses ([Running], [Recovering], [Failing],
// [Paused], [Stopping], [Relocating]) until it reaches a terminal status
// ([Completed], [Stopped], [Rejected], [Failed], [Terminated]), which
// nothing leaves. The doc of each status says what it means, who moves an
// execution out of it and what a controller finding it on startup must do.
//
// [Relocating] is the status the rest of this module exists for. A
// controller told to terminate by its platform (its pod deleted, its node
// drained) while its work can be restarted writes Relocating and exits
// without shutting the execution down; its successor finds Relocating,
// takes the execution over and returns to the status it was relocated
// from. A controller that simply dies (an OOM kill) leaves a running
// status behind, which its successor reads as a crash, not a relocation,
// and handles within a failover allowance instead of crash-looping.
//
// The text form of a status is its lowercase name, Teraslice's `_status`
// values, and is what [Status.MarshalText] writes and [Parse] reads.
//
// The table of moves between these statuses, and what each means to the
// decisions of package recovery, are the canonical preset in package
// teraslice (teraslice.Lifecycle, teraslice.Roles).
package state
