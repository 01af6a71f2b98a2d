package recovery

import (
	"context"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Tracer follows a Decider's decisions into a tracing system (the
// github.com/execfsm/execfsm/otel module's is one): each decision
// starts in the context its caller gave and runs in the one StartDecision
// returns, so the writes it makes (traced by a transition.Tracer) are
// its children. Give it in [Observer]. Its methods are called on the
// deciding goroutine, from any goroutine deciding, and must not block.
type Tracer[S comparable] interface {
	// StartDecision is called as a decision on execution id begins, with
	// the caller's ctx. For a startup, rec is the record as a read made
	// for the tracer just before found it (so a trace a relocation left
	// in it can be continued); the zero Record otherwise, or when the
	// read failed.
	StartDecision(ctx context.Context, moment Moment, id string, rec storage.Record) context.Context
	// EndDecision is called once for each StartDecision, with what was
	// decided and the error that ended the decision.
	EndDecision(ctx context.Context, d Decided[S], err error)
}

// Moment is when a controller decides.
type Moment string

// The moments a Decider traces. A Decider.Advance is not a decision of
// its own: the move it makes, if any, is traced as a write.
const (
	MomentStartup Moment = "startup" // Decider.Start
	MomentSIGTERM Moment = "sigterm" // Decider.Terminate
	MomentEnd     Moment = "end"     // Decider.End and EndAs
)

// Decided is what a traced decision carried out.
type Decided[S comparable] struct {
	Moment Moment
	ID     string
	// Decision names what was decided: the startup's Decision
	// ("resume"), the SIGTERM's ActionKind ("relocate"), the end's
	// EndKind ("write").
	Decision string
	// From and To are the state found and the state written, for a
	// startup and an end; a SIGTERM's move is its write's.
	From, To S
	Reason   string
	// Claim is what the controller holds after the decision (its owner
	// and epoch); zero when it holds nothing.
	Claim storage.Claim
}

// startTrace starts the decision's trace, if the Decider has a Tracer;
// end ends it.
func (d *Decider[S]) startTrace(ctx context.Context, moment Moment, exec *transition.Persisted[S]) (context.Context, func(Decided[S], error)) {
	t := d.p.Observer.Tracer
	if t == nil || exec == nil {
		return ctx, func(Decided[S], error) {}
	}
	var rec storage.Record
	if moment == MomentStartup {
		if found, err := exec.Store().Get(ctx, exec.ID()); err == nil {
			rec = found
		}
	}
	ctx = t.StartDecision(ctx, moment, exec.ID(), rec)
	return ctx, func(done Decided[S], err error) {
		done.Moment, done.ID = moment, exec.ID()
		if own := exec.Ownership(); own != nil && !storage.Ended(own) {
			done.Claim = exec.Claim()
		}
		t.EndDecision(ctx, done, err)
	}
}
