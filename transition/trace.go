package transition

import (
	"context"
	"maps"
)

// Tracer follows a Persisted's writes into a tracing system (the
// github.com/execfsm/execfsm/otel module's is one), the way a database
// driver's tracer does: a write starts in the context its caller gave,
// so its span has the caller's as its parent. Give it in [Observers]. A
// [Machine] writes nothing and calls no Tracer. Its methods are called
// on the writer's goroutine, from any goroutine writing, and must not
// block.
type Tracer[S comparable] interface {
	// StartWrite is called as a write of execution id begins (Create,
	// Acquire, Fire, Apply, each step of a Walk) with the caller's ctx;
	// the write runs in the ctx it returns: its store calls, its
	// guards.
	StartWrite(ctx context.Context, id string) context.Context
	// Annotate returns metadata to write with the move c, in the same
	// write (the trace context a move to relocating hands on to the
	// next controller); nil for none. It is called for moves only
	// (c.From differs from c.To), with StartWrite's ctx, again for a
	// write decided again after a conflict. Its entries win over the
	// update's own, and count against the record's metadata limits.
	Annotate(ctx context.Context, c Change[S]) map[string]string
	// EndWrite is called once for each StartWrite, with what the write
	// returns its caller: the change (one that moved nothing, when the
	// record already was as asked and nothing was written), or the zero
	// Change and the error that ended it.
	EndWrite(ctx context.Context, c Change[S], err error)
}

// tracers is several Tracers as one, called in the order given.
type tracers[S comparable] []Tracer[S]

func (ts tracers[S]) StartWrite(ctx context.Context, id string) context.Context {
	for _, t := range ts {
		ctx = t.StartWrite(ctx, id)
	}
	return ctx
}

func (ts tracers[S]) Annotate(ctx context.Context, c Change[S]) map[string]string {
	var meta map[string]string
	for _, t := range ts {
		if more := t.Annotate(ctx, c); len(more) > 0 {
			if meta == nil {
				meta = map[string]string{}
			}
			maps.Copy(meta, more)
		}
	}
	return meta
}

func (ts tracers[S]) EndWrite(ctx context.Context, c Change[S], err error) {
	for k := len(ts) - 1; k >= 0; k-- { // the last started ends first
		ts[k].EndWrite(ctx, c, err)
	}
}

// tracerOf joins the Tracers of observers, nil when there is none.
func tracerOf[S comparable](all []Tracer[S]) Tracer[S] {
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return tracers[S](all)
}

// annotated returns meta with the tracer's annotations of the move c
// (a copy when there are any: meta may be the stored record's).
func (p *Persisted[S]) annotated(ctx context.Context, c Change[S], meta map[string]string) map[string]string {
	if p.tracer == nil {
		return meta
	}
	extra := p.tracer.Annotate(ctx, c)
	if len(extra) == 0 {
		return meta
	}
	out := make(map[string]string, len(meta)+len(extra))
	maps.Copy(out, meta)
	maps.Copy(out, extra)
	return out
}
