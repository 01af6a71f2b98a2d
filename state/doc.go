// Package state names the statuses of an execution and the canonical
// table of moves between them.
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
// and handles within a restart budget instead of crash-looping.
//
// The text form of a status is its lowercase name, Teraslice's `_status`
// values, and is what [Status.MarshalText] writes and [Parse] reads.
//
// The lifecycle as a diagram (docs/lifecycle.md's copy is checked against
// [Lifecycle] by this package's tests):
//
//	pending → scheduling → initializing → running ⇄ failing
//	                                      running ⇄ paused
//	                                      running → relocating → (back to running)
//	                                      running → stopping → stopped
//	                                      running → completed | failed | terminated
package state
