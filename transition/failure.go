package transition

// Failure is a move that was not made: what the OnFailure observers of a
// [Machine] or a [Persisted] are told of each Fire (and Apply) that
// returns an error. Metrics count moves by their outcome from it; match
// Err with errors.Is against [ErrNotAllowed], [ErrGuard],
// storage.ErrConflict (the retries ran out), storage.ErrFenced, or a
// context's error.
type Failure[S comparable] struct {
	// Move is the move the call decided on, as far as it got: ID, Actor,
	// Owner and Epoch always; From, To, Reason, Revision (the revision it
	// would have replaced) and At when Decided.
	Move Change[S]
	// Decided is false when the call failed before it knew the move: the
	// record could not be read, the context ended first, an Apply's
	// decide function failed or was not reached (its handle was fenced).
	Decided bool
	Err     error
}

// failureReporter calls the OnFailure observers on the failing caller's
// goroutine: failures need no order among writers, and nothing is held
// while they run.
type failureReporter[S comparable] struct {
	observers []func(Failure[S])
	onPanic   func(Change[S], any)
}

func newFailureReporter[S comparable](observers []func(Failure[S]), onPanic func(Change[S], any)) *failureReporter[S] {
	if len(observers) == 0 {
		return nil
	}
	return &failureReporter[S]{observers: observers, onPanic: onPanic}
}

// fail tells every observer of f with err and returns err; on a nil
// reporter (no observers) it only returns err. An observer that panics
// is reported with the move, and the others still run.
func (r *failureReporter[S]) fail(f Failure[S], err error) error {
	if r == nil {
		return err
	}
	f.Err = err
	for _, o := range r.observers {
		callObserver(o, f, r.onPanic, f.Move)
	}
	return err
}
