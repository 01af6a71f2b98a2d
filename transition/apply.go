package transition

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// decider is what Apply asks for an update: decide, or, when it is nil, the
// fixed update (Fire's), for which no copy of the record is made.
type decider[S comparable] struct {
	decide func(cur S, rec storage.Record) (Update[S], error)
	update Update[S]
	// lent is the Meta of the copy of the record decide was given last:
	// the caller's own, which Apply hands back when it still holds what
	// the store does, instead of copying Meta a second time.
	lent map[string]string
}

// Apply is the general write: it reads the record, asks decide what to do
// with it, checks the answer against the table and the guards and writes
// it with compare-and-swap. If the record changed in between, decide is
// asked again with the fresh record, so a decision is always made on what
// the store really holds (a SIGTERM handler deciding "relocate" learns
// that the cluster master has just written "stopping"). An error from
// decide is returned as it is, and nothing is written. An update that
// changes nothing writes nothing.
//
// decide and the guards run with no lock held: they may call back into
// this Persisted (Load, Fire, Apply), as they may into a [Machine]. A
// write they make is a concurrent write like any other: this one then
// finds the record changed and decides again (a guard that writes on
// every call makes this Apply give up after its retries with
// [storage.ErrConflict]).
//
// It returns the change, with the revision written, and the record as
// stored: the caller's own copy, whose Meta is the very map decide was
// last given when decide left it as the store holds it.
func (p *Persisted[S]) Apply(ctx context.Context, decide func(cur S, rec storage.Record) (Update[S], error)) (Change[S], storage.Record, error) {
	if err := p.check(ctx, "Apply"); err != nil {
		return Change[S]{}, storage.Record{}, p.failures.fail(p.undecided(), err)
	}
	if decide == nil {
		return Change[S]{}, storage.Record{}, p.failures.fail(p.undecided(), errors.New("transition: Apply: nil decide function"))
	}
	var stored storage.Record
	d := decider[S]{decide: decide}
	c, err := p.apply(ctx, &d, &stored)
	// The handle keeps the record it returns as the start of its next
	// write: the caller gets its own copy. The Meta decide was lent is
	// one already, unless decide changed it (a reconcile that finds
	// nothing to do, the common case, copies Meta once, not twice: at
	// 100k executions the copies were most of what reconciling them
	// allocated).
	if stored.Meta != nil && d.lent != nil && maps.Equal(d.lent, stored.Meta) {
		stored.Meta = d.lent
		return c, stored, err
	}
	return c, stored.Clone(), err
}

// apply is Apply with the decision made by d, returning the record as
// stored (or as read, when nothing is written) in *stored unless it is
// nil. Its failures go to the OnFailure observers, with the last move it
// decided on, if any. The records go by pointer from here down: a record
// is 232 bytes, and copying it from call to call was a tenth of a Fire on
// storage.Memory.
func (p *Persisted[S]) apply(ctx context.Context, d *decider[S], stored *storage.Record) (written Change[S], err error) {
	if t := p.tracer; t != nil {
		ctx = t.StartWrite(ctx, p.id)
		defer func() { t.EndWrite(ctx, written, err) }()
	}
	f := p.undecided()
	var rec, next storage.Record
	cached, err := p.begin(ctx, &rec)
	if err != nil {
		return Change[S]{}, p.failures.fail(f, err)
	}
	for attempt := 1; ; {
		c, write, err := p.decide(ctx, &rec, d, &next)
		if c.ID != "" {
			f.Move, f.Decided = c, true
		}
		if cached && (err != nil || !write) && ctx.Err() == nil && !lostOwnership(err) {
			// A decision made on the cached record that does not write
			// is never trusted: decide again on what the store holds.
			cached = false
			if rec, err = p.fresh(ctx); err != nil {
				return Change[S]{}, p.failures.fail(f, err)
			}
			continue
		}
		if err != nil || !write {
			if stored != nil {
				*stored = rec
			}
			if err != nil {
				return Change[S]{}, p.failures.fail(f, err)
			}
			return c, nil
		}
		err = p.write(ctx, rec.Revision, &next, &c, stored)
		if err == nil {
			return c, nil
		}
		var conflict *storage.ConflictError
		if !errors.As(err, &conflict) {
			return Change[S]{}, p.failures.fail(f, err)
		}
		if attempt > p.retries {
			return Change[S]{}, p.failures.fail(f, fmt.Errorf("transition: %s: gave up after %d conflicting writes: %w", quote.Limited(p.id), attempt, err))
		}
		attempt++
		cached = false
		if rec = conflict.Current; rec.ID != p.id { // a store that did not include the record
			if rec, err = p.fresh(ctx); err != nil {
				return Change[S]{}, p.failures.fail(f, err)
			}
		}
	}
}

// undecided is a failure before any move was decided.
func (p *Persisted[S]) undecided() Failure[S] {
	c := p.writing()
	return Failure[S]{Move: Change[S]{ID: p.id, Actor: p.actor, Owner: c.Owner, Epoch: c.Epoch}}
}

// writing is the claim this handle's writes carry: its own while it is a
// controller's, none for an outside authority.
func (p *Persisted[S]) writing() storage.Claim {
	if o := p.owner.Load(); o != nil {
		return o.claim
	}
	return storage.Claim{}
}

// lostOwnership reports whether err is a handle's own ownership ended: no
// fresher read can change that.
func lostOwnership(err error) bool {
	var fenced *storage.FencedError
	return errors.As(err, &fenced) && fenced.Lost
}

// begin returns the record a write starts from: the one this handle (or
// one it shares a queue with) last read or wrote, if any, and otherwise a
// fresh read. A controller is usually its execution's only writer, and
// the compare-and-swap catches the cases where it is not, so the common
// write is one round trip instead of two. A handle whose ownership has
// ended fails at once: no read can change that.
func (p *Persisted[S]) begin(ctx context.Context, rec *storage.Record) (cached bool, err error) {
	if err := lock(ctx, p.shared.sem); err != nil {
		return false, err
	}
	*rec = p.shared.cache
	trusted := rec.ID != "" && rec.Revision == p.shared.observed
	p.shared.observed = 0 // trusted once: what the store holds may move on
	p.unlock()
	if rec.ID != "" {
		return !trusted, nil // decide's fence check fails a lost handle, with the move it refused
	}
	if err := p.lost(p.owner.Load()); err != nil {
		return false, err
	}
	*rec, err = p.fresh(ctx)
	return false, err
}

// fresh reads the record from the store and remembers it.
func (p *Persisted[S]) fresh(ctx context.Context) (storage.Record, error) {
	if err := lock(ctx, p.shared.sem); err != nil {
		return storage.Record{}, err
	}
	defer p.unlock()
	return p.read(ctx)
}

// write stores next if the record is still at revision expect, remembers
// it, sets c's revision to the one written and hands c to the observers;
// the record as stored goes to *stored unless it is nil. The write lock
// is held from the compare-and-swap to the enqueueing, so observers see
// changes in the order they were written; it is released before they are
// called.
func (p *Persisted[S]) write(ctx context.Context, expect uint64, next *storage.Record, c *Change[S], stored *storage.Record) error {
	var err error
	if lerr := p.settle(ctx, func() (Change[S], bool) {
		var written storage.Record
		if written, err = p.swap(ctx, expect, next); err != nil {
			var conflict *storage.ConflictError
			if !errors.As(err, &conflict) {
				p.shared.cache = storage.Record{} // the write may or may not have landed
			}
			return Change[S]{}, false
		}
		p.remember(&written)
		if stored != nil {
			*stored = written
		}
		c.Revision = written.Revision
		return *c, true
	}); lerr != nil {
		return lerr
	}
	return err
}

// swap is write's compare-and-swap: through the handle's ownership when
// it has one, refused when the claim the write was planned under is no
// longer the handle's.
func (p *Persisted[S]) swap(ctx context.Context, expect uint64, next *storage.Record) (storage.Record, error) {
	switch o := p.owner.Load(); {
	case o == nil:
		return p.store.CompareAndSwap(ctx, p.id, expect, *next)
	case o.own == nil || o.claim != next.Claim():
		// A take-over since the write was planned: it was planned under
		// another claim.
		if err := p.lost(o); err != nil {
			return storage.Record{}, err
		}
		return storage.Record{}, &storage.FencedError{ID: p.id, Owner: next.Owner, Epoch: next.Epoch, Lost: true}
	default:
		return o.own.CompareAndSwap(ctx, expect, *next)
	}
}

// decide checks the fence, asks decide for an update of rec and plans it
// into next. Once the update is known, the change comes back with the
// error too (the move that was refused), with its ID set; before, it is
// zero.
func (p *Persisted[S]) decide(ctx context.Context, rec *storage.Record, d *decider[S], next *storage.Record) (Change[S], bool, error) {
	cur, err := p.stateOf(rec)
	if err != nil {
		return Change[S]{}, false, err
	}
	u := d.update
	if err := p.fenced(rec); err != nil {
		if d.decide != nil {
			return Change[S]{}, false, err
		}
		return p.asked(cur, rec, u), false, err
	}
	if d.decide != nil {
		lent := rec.Clone()
		d.lent = lent.Meta
		if u, err = d.decide(cur, lent); err != nil {
			return Change[S]{}, false, err
		}
	}
	c, write, err := p.plan(ctx, cur, rec, u, next)
	if err != nil {
		c = p.asked(cur, rec, u)
	}
	return c, write, err
}

// asked is the change u asks of rec, in state cur, stamped as plan
// stamps it (the time only when someone will see it).
func (p *Persisted[S]) asked(cur S, rec *storage.Record, u Update[S]) Change[S] {
	claim := p.writing()
	c := Change[S]{ID: p.id, From: cur, To: u.To, Reason: u.Reason, Actor: p.actor,
		Revision: rec.Revision, Owner: claim.Owner, Epoch: claim.Epoch}
	if p.failures != nil {
		c.At = p.now()
	}
	return c
}

// lost returns a [*storage.FencedError] if o, a controller's handle,
// holds nothing: its ownership has ended, or it has none.
func (p *Persisted[S]) lost(o *owning) error {
	if o == nil || !storage.Ended(o.own) {
		return nil // an outside authority, or a live ownership
	}
	// Lost only if it had a claim: before its first take-over the handle
	// owns nothing and never did.
	return &storage.FencedError{ID: p.id, Owner: o.claim.Owner, Epoch: o.claim.Epoch, Lost: o.claim.Owner != ""}
}

// fenced returns a [*storage.FencedError] if this handle is a
// controller's that does not own rec.
func (p *Persisted[S]) fenced(rec *storage.Record) error {
	o := p.owner.Load()
	if err := p.lost(o); err != nil || o == nil {
		return err
	}
	if rec.Claim() != o.claim {
		return &storage.FencedError{ID: p.id, Owner: o.claim.Owner, Epoch: o.claim.Epoch,
			CurrentOwner: rec.Owner, CurrentEpoch: rec.Epoch}
	}
	return nil
}

// plan turns an update of rec (in state cur) into the record to write,
// in next, and the change it makes; write is false when it would change
// nothing (next is then as it was). The
// record keeps its owner and epoch: only Acquire changes them.
func (p *Persisted[S]) plan(ctx context.Context, cur S, rec *storage.Record, u Update[S], next *storage.Record) (c Change[S], write bool, err error) {
	t := p.table
	i, _ := t.lookup(cur)
	j, ok := t.lookup(u.To)
	if !ok {
		return Change[S]{}, false, &Error{ID: p.id, From: t.names[i], To: quote.Limited(nameOf(u.To)),
			Reason: "not a state of the table"}
	}
	claim := rec.Claim() // fenced checked that a controller's is its own
	c = Change[S]{ID: p.id, From: cur, To: u.To, Reason: u.Reason, Actor: p.actor, At: p.now(),
		Revision: rec.Revision}
	if p.owner.Load() != nil {
		c.Owner, c.Epoch = claim.Owner, claim.Epoch
	}
	moves := i != j
	if moves {
		if err := p.checkMove(ctx, i, j, rec, c); err != nil {
			return Change[S]{}, false, err
		}
	}
	meta, metaChanged := mergeMeta(rec.Meta, u.Meta, u.Unset)
	if !moves && !metaChanged {
		return c, false, nil
	}
	if moves {
		meta = t.countMove(i, j, meta, metaChanged, c.At)
		meta = p.annotated(ctx, c, meta)
	}
	if err := ctx.Err(); err != nil {
		return Change[S]{}, false, err
	}
	// rec is this handle's own (the cache, never modified): next shares
	// its unchanged Meta and its immutable trail.
	*next = *rec
	next.Status = t.names[j]
	if moves {
		next.Previous = t.names[i]
		next.Since = c.At
	}
	if moves || u.Reason != "" {
		next.Reason = u.Reason
	}
	next.UpdatedAt = c.At
	next.Meta = meta
	if err := next.Validate(); err != nil { // the reason and the metadata: the rest came from the store
		return Change[S]{}, false, err
	}
	// The trail keeps the record's own length, whoever writes.
	next.History, err = p.shared.appender().Append(rec.History, storage.Entry{
		From: t.names[i], To: t.names[j], Reason: u.Reason, Actor: p.actor,
		Owner: c.Owner, Epoch: c.Epoch, At: c.At, Revision: rec.Revision,
	}, rec.HistoryKept())
	if err != nil {
		return Change[S]{}, false, fmt.Errorf("transition: record %s: %w", quote.Limited(p.id), err)
	}
	return c, true, nil
}

// checkMove checks the move from state i to state j of rec against the
// table's edges and runs its guards, for the change c.
func (p *Persisted[S]) checkMove(ctx context.Context, i, j int, rec *storage.Record, c Change[S]) error {
	t := p.table
	prevPlus1 := noPrev
	if k, known := t.byName[rec.Previous]; known && rec.Previous != "" {
		prevPlus1 = int(k) + 1
	}
	flags := t.edges[i*t.n+j]
	if err := checkEdge(t, p.id, i, j, prevPlus1, flags); err != nil {
		return err
	}
	if flags&edgeGuarded != 0 || len(t.anyGuard) > 0 {
		return runGuards(ctx, t, i, j, c, View{rec})
	}
	return nil
}

// mergeMeta applies set and unset to meta and reports whether anything
// changed. meta is never modified: a change is made to a copy (nil when
// it leaves nothing), and an unchanged meta is returned as it is.
func mergeMeta(meta, set map[string]string, unset []string) (map[string]string, bool) {
	if !changesMeta(meta, set, unset) {
		return meta, false
	}
	out := maps.Clone(meta)
	if out == nil {
		out = make(map[string]string, len(set))
	}
	maps.Copy(out, set)
	for _, k := range unset {
		delete(out, k)
	}
	if len(out) == 0 {
		out = nil
	}
	return out, true
}

// changesMeta reports whether set or unset would change meta.
func changesMeta(meta, set map[string]string, unset []string) bool {
	for k, v := range set {
		if old, ok := meta[k]; !ok || old != v {
			return true
		}
	}
	for _, k := range unset {
		if _, ok := meta[k]; ok {
			return true
		}
	}
	return false
}
