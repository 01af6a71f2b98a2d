// Package reconcile runs a level-triggered [Reconciler] over the items of
// the world, as controller-runtime's pkg/reconcile and its controller do,
// for controllers that do not (or cannot) run on Kubernetes.
//
// [Loop] starts with an adoption pass: it lists the world ([Options].World)
// and hands every item to the [Adopter] under the [Identity] the world
// keeps (a Job's labels and annotations, never a private checkpoint that
// may have drifted), and reports the keys the controller expected
// ([Options].Known, from its own store: [StoreKeys]) that the world no
// longer has. The two are two things: the world says what exists, the
// store what the controller expects, and a key of the store given as
// World would never be gone. Then it reconciles every key of both, and
// afterwards the keys that events bring ([Options].Events, [StoreEvents]
// for a store's watch, [Loop.Add]) and, at every resync, both again,
// with dedup, per-key exclusivity, per-key exponential backoff with
// jitter, an optional global rate limit, panic recovery and a clean stop.
//
// A Reconcile that fails is retried with backoff; one that fails with an
// error wrapped by [TerminalError] is not; one that asks for
// Result.RequeueAfter is called again after that long. Observers
// ([ReconcileObserver], [AdoptionObserver]) and [Loop.Stats] feed
// metrics. Package reconcile/reconciletest has a clock a test moves by
// hand and helpers that run a loop for a test.
package reconcile
