// Package otelfsm shows what execfsm does in OpenTelemetry: a span for
// every decision a controller makes (its startup, its SIGTERM, its end)
// and for every write of a record (each move, each take-over), with the
// execution, the states, the actor, the owner, the epoch and the reason
// as attributes, and metrics beside the Prometheus ones of package prom.
// It is a module of its own, so that the core stays on the standard
// library.
//
// [RunObservers] makes, in one call, every observer the run harness and
// a manager tell (run.Config.Observers, run.ManagerConfig.Observers); a
// controller built on packages recovery and transition makes them with
// [New] and gives [Observers.Decisions] to its Decider
// (recovery.Decider.WithObserver) and [Observers.Moves] to each handle
// (transition.NewPersisted).
//
// # One trace for a relocation
//
// A span starts in its caller's context, as a driver's does: a decision
// made in a request's or a reconcile's span is its child, and the writes
// it makes are the decision's children. A relocation crosses processes:
// the controller that gets the SIGTERM writes relocating, and another
// pod's controller starts. The write to a relocating state carries the
// trace context of its span in the record's metadata (MetaTraceParent,
// W3C Trace Context), in the same write; the next controller's startup
// reads it and continues that trace, its span a child of the write, or,
// when the startup already runs in a trace of its own, linked to it. In
// Jaeger or Tempo one trace reads: the SIGTERM, the move to relocating,
// the new pod's startup, its take-over.
//
// No OpenTelemetry semantic convention covers jobs or state machines yet:
// the attributes are execfsm's own, under "execfsm." (AttrExecution and
// its siblings).
package otelfsm

import (
	"context"
	"errors"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the tracer and the meter: this module.
const instrumentationName = "github.com/execfsm/execfsm/otelfsm"

// The attributes of the spans and the metrics.
const (
	AttrExecution = attribute.Key("execfsm.execution.id")
	AttrFrom      = attribute.Key("execfsm.from")
	AttrTo        = attribute.Key("execfsm.to")
	AttrReason    = attribute.Key("execfsm.reason")
	AttrActor     = attribute.Key("execfsm.actor")
	AttrOwner     = attribute.Key("execfsm.owner")
	AttrEpoch     = attribute.Key("execfsm.epoch")
	AttrRevision  = attribute.Key("execfsm.revision")
	AttrMoment    = attribute.Key("execfsm.moment")   // startup, sigterm, end
	AttrDecision  = attribute.Key("execfsm.decision") // resume, relocate, write, ...
	AttrResult    = attribute.Key("execfsm.result")   // ok, or what went wrong
	AttrCause     = attribute.Key("execfsm.cause")    // of an enforced move: timer, budget, abandoned
)

// The spans' names.
const (
	SpanMove  = "execfsm.move"  // a write that moved the execution
	SpanWrite = "execfsm.write" // a write that did not: a take-over in place, metadata, a refused move
	// A decision's span is "execfsm." and its moment: execfsm.startup,
	// execfsm.sigterm, execfsm.end.
	spanDecisionPrefix = "execfsm."
)

// MetaTraceParent and MetaTraceState are the metadata keys a move to a
// relocating state writes the W3C Trace Context of its span under, for
// the next controller's startup to continue.
const (
	MetaTraceParent = "otel.traceparent"
	MetaTraceState  = "otel.tracestate"
)

// Options configure [New] and [RunObservers]; each is optional.
type Options struct {
	// TracerProvider makes the tracer; nil is the global one
	// (otel.GetTracerProvider()).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter; nil is the global one
	// (otel.GetMeterProvider()).
	MeterProvider metric.MeterProvider
}

// Observers trace and measure one table's executions: give Tracer to a
// Decider (recovery.Observer.Tracer) and to every handle
// (transition.Observers.Tracer), or take all of them from
// [RunObservers].
type Observers[S comparable] struct {
	roles   *recovery.Roles[S]
	tracer  trace.Tracer
	metrics metrics
}

var (
	_ transition.Tracer[string] = (*Observers[string])(nil)
	_ recovery.Tracer[string]   = (*Observers[string])(nil)
)

// New returns the observers of roles' executions. An instrument the
// meter cannot make is an error.
func New[S comparable](roles *recovery.Roles[S], opts Options) (*Observers[S], error) {
	if roles == nil {
		return nil, errors.New("otelfsm: New: nil roles")
	}
	tp, mp := opts.TracerProvider, opts.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m, err := newMetrics(mp.Meter(instrumentationName))
	if err != nil {
		return nil, err
	}
	return &Observers[S]{roles: roles, tracer: tp.Tracer(instrumentationName), metrics: m}, nil
}

// RunObservers returns every observer the run harness and a manager tell
// (run.Config.Observers, run.ManagerConfig.Observers), tracing and
// measuring roles' executions: the moves, the decisions and their
// spans. The manager's Loop is not measured here (prom's
// ReconcileObserver measures it as controller-runtime does).
func RunObservers[S comparable](roles *recovery.Roles[S], opts Options) (run.Observers[S], error) {
	o, err := New(roles, opts)
	if err != nil {
		return run.Observers[S]{}, err
	}
	return run.Observers[S]{Moves: o.Moves(), Decisions: o.Decisions()}, nil
}

// Moves returns the observers of a handle's writes: the spans, and the
// execfsm.transitions count.
func (o *Observers[S]) Moves() transition.Observers[S] {
	return transition.Observers[S]{
		OnChange:  []func(transition.Change[S]){o.moved},
		OnFailure: []func(transition.Failure[S]){o.failed},
		Tracer:    o,
	}
}

// Decisions returns the observer of a Decider: the spans, and the counts
// of decisions and enforced moves.
func (o *Observers[S]) Decisions() recovery.Observer[S] {
	return recovery.Observer[S]{
		Startup:   o.startup,
		Terminate: o.terminate,
		Enforced:  o.enforced,
		Tracer:    o,
	}
}

// writeStarted is the context key of a write's start, for its duration.
type writeStarted struct{}

// StartWrite implements transition.Tracer: a span for the write, a
// child of ctx's.
func (o *Observers[S]) StartWrite(ctx context.Context, id string) context.Context {
	ctx, _ = o.tracer.Start(ctx, SpanWrite, trace.WithAttributes(AttrExecution.String(id)))
	return context.WithValue(ctx, writeStarted{}, time.Now())
}

// Annotate implements transition.Tracer: a move to a relocating state
// carries its span's trace context to the next controller.
func (o *Observers[S]) Annotate(ctx context.Context, c transition.Change[S]) map[string]string {
	if role, ok := o.roles.Role(c.To); !ok || role != recovery.RoleRelocating {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	meta := map[string]string{}
	if v := carrier.Get("traceparent"); v != "" {
		meta[MetaTraceParent] = v
	}
	if v := carrier.Get("tracestate"); v != "" {
		meta[MetaTraceState] = v
	}
	return meta
}

// EndWrite implements transition.Tracer.
func (o *Observers[S]) EndWrite(ctx context.Context, c transition.Change[S], err error) {
	span := trace.SpanFromContext(ctx)
	result := resultOf(err)
	if started, ok := ctx.Value(writeStarted{}).(time.Time); ok {
		o.metrics.writeDuration.Record(ctx, time.Since(started).Seconds(), metric.WithAttributes(AttrResult.String(result)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, result)
		span.End()
		return
	}
	if c.ID != "" {
		if c.From != c.To {
			span.SetName(SpanMove)
		}
		span.SetAttributes(append(o.states(c.From, c.To),
			AttrReason.String(c.Reason), AttrActor.String(c.Actor), AttrOwner.String(c.Owner),
			AttrEpoch.Int64(int64(c.Epoch)), AttrRevision.Int64(int64(c.Revision)))...)
	}
	span.End()
}

// StartDecision implements recovery.Tracer: a span for the decision, a
// child of ctx's; a startup that finds a relocating record carrying a
// trace continues that trace (or links to it, when ctx has one of its
// own).
func (o *Observers[S]) StartDecision(ctx context.Context, moment recovery.Moment, id string, rec storage.Record) context.Context {
	opts := []trace.SpanStartOption{trace.WithAttributes(AttrExecution.String(id), AttrMoment.String(string(moment)))}
	if relocated, ok := o.relocatedFrom(rec); ok {
		if trace.SpanContextFromContext(ctx).IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: relocated}))
		} else {
			ctx = trace.ContextWithRemoteSpanContext(ctx, relocated)
		}
	}
	ctx, _ = o.tracer.Start(ctx, spanDecisionPrefix+string(moment), opts...)
	return ctx
}

// relocatedFrom is the trace context a relocation left in rec, if rec
// is relocating and carries one.
func (o *Observers[S]) relocatedFrom(rec storage.Record) (trace.SpanContext, bool) {
	parent := rec.Meta[MetaTraceParent]
	if parent == "" {
		return trace.SpanContext{}, false
	}
	state, err := o.roles.StateOf(rec)
	if err != nil {
		return trace.SpanContext{}, false
	}
	if role, ok := o.roles.Role(state); !ok || role != recovery.RoleRelocating {
		return trace.SpanContext{}, false // a trace of a relocation over long ago
	}
	carrier := propagation.MapCarrier{"traceparent": parent, "tracestate": rec.Meta[MetaTraceState]}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	return sc, sc.IsValid()
}

// EndDecision implements recovery.Tracer.
func (o *Observers[S]) EndDecision(ctx context.Context, d recovery.Decided[S], err error) {
	span := trace.SpanFromContext(ctx)
	attrs := []attribute.KeyValue{AttrDecision.String(d.Decision), AttrReason.String(d.Reason)}
	if d.Moment != recovery.MomentSIGTERM {
		attrs = append(attrs, o.states(d.From, d.To)...)
	}
	if d.Claim.Owner != "" {
		attrs = append(attrs, AttrOwner.String(d.Claim.Owner), AttrEpoch.Int64(int64(d.Claim.Epoch)))
	}
	span.SetAttributes(attrs...)
	if err != nil && !errors.Is(err, recovery.ErrTerminalStatus) {
		span.RecordError(err)
		span.SetStatus(codes.Error, resultOf(err))
	}
	span.End()
}

// states are the attributes of a move from from to to, by the states'
// names.
func (o *Observers[S]) states(from, to S) []attribute.KeyValue {
	table := o.roles.Table()
	fromName, _ := table.Name(from)
	toName, _ := table.Name(to)
	return []attribute.KeyValue{AttrFrom.String(fromName), AttrTo.String(toName)}
}

// resultOf names what err says went wrong, as prom's results do.
func resultOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, transition.ErrNotAllowed):
		return "not_allowed"
	case errors.Is(err, storage.ErrFenced):
		return "fenced"
	case errors.Is(err, storage.ErrConflict):
		return "conflict"
	case errors.Is(err, storage.ErrHeld):
		return "held"
	}
	return "error"
}
