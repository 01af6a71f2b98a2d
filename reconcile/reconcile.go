package reconcile

import (
	"context"
	"errors"
	"time"
)

// Reconciler brings one item of the world in line with what the controller
// wants, and is the contract of [Loop].
//
// Reconciliation is level-triggered: the key names an item and carries no
// event. Reconcile must not ask "what happened?" but read the item as it
// is now (the store record, the Kubernetes Job, the child process) and
// act on the difference between that and the desired state. Events only
// say "look at this key soon"; several may be folded into one call, and a
// periodic resync calls Reconcile for every item even when nothing
// happened. That is what makes the loop correct after a crash: whatever
// changed while the controller was down is found by looking, not by
// replaying a log that was never written.
//
// Consequences for an implementation:
//
//   - It must be idempotent: calling it twice on an unchanged world does
//     nothing the second time.
//   - It must tolerate items that no longer exist (return nil, after
//     marking the item gone if the controller tracks it).
//   - It is never called for one key by two workers at once, so it needs
//     no lock per item; different keys run concurrently.
//   - It should watch ctx: the loop cancels it on shutdown.
//
// The outcome tells the loop what next: a nil error and zero Result is
// done; an error is retried with per-key exponential backoff; an error
// wrapped with [TerminalError] is not retried (the item is broken in a way
// retrying cannot fix); Result.RequeueAfter asks for another look after
// that long (polling something that has no events) and resets the
// backoff. A panic is recovered and treated as an error.
type Reconciler[K comparable] interface {
	Reconcile(ctx context.Context, key K) (Result, error)
}

// ReconcilerFunc adapts a function to [Reconciler].
type ReconcilerFunc[K comparable] func(ctx context.Context, key K) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc[K]) Reconcile(ctx context.Context, key K) (Result, error) { return f(ctx, key) }

// Result is what a successful Reconcile asks of the loop.
type Result struct {
	// RequeueAfter, if positive, reconciles the key again after this long
	// (sooner if an event or resync brings it back).
	RequeueAfter time.Duration
}

// ErrTerminal is matched by every error made with [TerminalError].
var ErrTerminal = errors.New("terminal reconcile error")

// TerminalError marks err as not worth retrying: the loop records it and
// forgets the key until an event or the next resync brings it back. It
// is controller-runtime's reconcile.TerminalError; the result matches
// [ErrTerminal] and unwraps to err. TerminalError(nil) is nil.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalErr{err}
}

type terminalErr struct{ err error }

func (e *terminalErr) Error() string        { return "terminal: " + e.err.Error() }
func (e *terminalErr) Unwrap() error        { return e.err }
func (e *terminalErr) Is(target error) bool { return target == ErrTerminal }
