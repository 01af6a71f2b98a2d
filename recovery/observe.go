package recovery

// Observer is told what a [Decider] and its [Reaper] carried out,
// for metrics and logs (the prom module counts from one). Every field
// may be nil. The functions run on the caller's goroutine before the
// helper returns; one that panics is not recovered, as any code the
// caller runs itself.
type Observer[S comparable] struct {
	// Startup is told of each [Decider.Start] that reached a verdict, with
	// the error that ended it: nil when the verdict was written,
	// ErrTerminalStatus for DecisionRefuse, the store's or the take-over's
	// error otherwise (then the verdict counts no restart: nothing was
	// written). A retried start that returns the verdict already written
	// is not told again: it decided nothing.
	Startup func(v Verdict[S], err error)
	// Terminate is told of each [Decider.Terminate] that decided, with its
	// action (ActionLeave when the write was fenced) and the error that
	// ended it, if any.
	Terminate func(a Action, err error)
	// Enforced is told of each move a Reaper or [Decider.Advance] made
	// because something fell due (a timer, an exhausted budget, an
	// abandoned execution), once the write that made it landed.
	Enforced func(e Enforced[S])
	// Retired is told of each pass of a [Retirer], with what it did and
	// the error that ended it, if any.
	Retired func(r RetireReport, err error)
	// Tracer, if set, follows each decision of a Decider into a tracing
	// system (see [Tracer]).
	Tracer Tracer[S]
}

func (o Observer[S]) startup(v Verdict[S], err error) {
	if o.Startup != nil && v.Decision != 0 {
		o.Startup(v, err)
	}
}

func (o Observer[S]) terminate(a Action, err error) {
	if o.Terminate != nil && a.Kind != 0 {
		o.Terminate(a, err)
	}
}

func (o Observer[S]) enforce(e Enforced[S]) {
	if o.Enforced != nil && e.Cause != 0 {
		o.Enforced(e)
	}
}
