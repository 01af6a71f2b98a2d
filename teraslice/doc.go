// Package teraslice is the canonical preset: the execution lifecycle of
// Teraslice's cluster master and execution controller, with relocating
// added, as a transition table ([Lifecycle], or [LifecycleBuilder] to add
// guards first), and what each of its statuses means to the decisions of
// package recovery ([Roles]), with the deadline of the statuses nothing
// retries ([StrandedAfter]).
//
// A controller with its own lifecycle builds its own table with
// transition.New and its roles with recovery.DefineRoles; this package
// is the worked example and the default. The statuses themselves are
// the vocabulary of package state.
//
// The lifecycle as a diagram (docs/lifecycle.md's copy is checked against
// [Lifecycle] by this package's tests):
//
//	pending → scheduling → initializing → running ⇄ failing
//	                                      running ⇄ paused
//	                                      running → relocating → (back to running)
//	                                      running → stopping → stopped
//	                                      running → completed | failed | terminated
package teraslice
