package otelfsm

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the instruments, named as OpenTelemetry names them (dots,
// units apart) and counting what prom's do.
type metrics struct {
	transitions   metric.Int64Counter
	startups      metric.Int64Counter
	terminations  metric.Int64Counter
	failovers     metric.Int64Counter
	enforced      metric.Int64Counter
	writeDuration metric.Float64Histogram
}

func newMetrics(m metric.Meter) (metrics, error) {
	var ms metrics
	var errs []error
	counter := func(name, unit, description string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(description))
		errs = append(errs, err)
		return c
	}
	ms.transitions = counter("execfsm.transitions", "{move}",
		"Moves of executions by the state they left, the state they asked for and their result (ok, not_allowed, conflict, fenced, held, error).")
	ms.startups = counter("execfsm.startup.decisions", "{decision}",
		"Startup decisions carried out by Decider.Start, by decision (start, resume, stop, fail, refuse, wait, end) and result.")
	ms.terminations = counter("execfsm.sigterm.actions", "{action}",
		"SIGTERM actions carried out by Decider.Terminate, by action (shutdown, relocate, leave, handover) and result.")
	ms.failovers = counter("execfsm.failovers", "{restart}",
		"Failovers: unexpected restarts of a controller counted against the failover allowance.")
	ms.enforced = counter("execfsm.enforced.moves", "{move}",
		"Moves made because something fell due, by the state left, the state entered and the cause (timer, budget, abandoned).")
	var err error
	ms.writeDuration, err = m.Float64Histogram("execfsm.write.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a write of a record took, its conflicts and retries included, by result."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return metrics{}, err
	}
	return ms, nil
}

// moved counts a change written (an OnChange observer); a take-over in
// place or a write of metadata moves nothing and is not counted.
func (o *Observers[S]) moved(c transition.Change[S]) {
	if c.From == c.To {
		return
	}
	o.metrics.transitions.Add(context.Background(), 1, metric.WithAttributes(append(o.states(c.From, c.To), AttrResult.String("ok"))...))
}

// failed counts a move refused or failed (an OnFailure observer).
func (o *Observers[S]) failed(f transition.Failure[S]) {
	if !f.Decided {
		return // no move was asked for yet: nothing to count it under
	}
	o.metrics.transitions.Add(context.Background(), 1, metric.WithAttributes(append(o.states(f.Move.From, f.Move.To), AttrResult.String(resultOf(f.Err)))...))
}

func (o *Observers[S]) startup(v recovery.Verdict[S], err error) {
	result := resultOf(err)
	if errors.Is(err, recovery.ErrTerminalStatus) {
		result = "ok" // a refusal is what was decided
	}
	o.metrics.startups.Add(context.Background(), 1, metric.WithAttributes(AttrDecision.String(v.Decision.String()), AttrResult.String(result)))
	if err == nil && v.Failovers > 0 {
		o.metrics.failovers.Add(context.Background(), 1)
	}
}

func (o *Observers[S]) terminate(a recovery.Action, err error) {
	o.metrics.terminations.Add(context.Background(), 1, metric.WithAttributes(AttrDecision.String(a.Kind.String()), AttrResult.String(resultOf(err))))
}

func (o *Observers[S]) enforced(e recovery.Enforced[S]) {
	o.metrics.enforced.Add(context.Background(), 1, metric.WithAttributes(append(o.states(e.From, e.To), AttrCause.String(e.Cause.String()))...))
}
