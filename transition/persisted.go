package transition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/internal/nilstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Persisted is one execution whose state lives in a [storage.Store]: its table,
// the store and the record's id. Every write reads the record, checks the
// move against the table and its guards, and writes with compare-and-swap
// at the revision it read. When another writer got there first it re-reads
// and decides again on the fresh record, a bounded number of times (see
// [PersistedOptions].Retries); it never overwrites what it has not seen.
//
// A Persisted writes in one of two capacities, for the whole of its life:
//
//   - As an outside authority (a cluster master asking an execution to
//     stop, an operator, a deadline reaper): it never owns the record and
//     is never fenced. A Persisted from [NewPersisted] starts as one.
//   - As a controller: [Persisted.Acquire] takes the record over through
//     the store's [storage.Ownership] and turns the handle into the
//     controller's for good, whatever the outcome. From then on it writes
//     only while it owns the record: once its ownership has ended, the
//     record is owned by anyone else, or before it has taken the record
//     over at all, its writes fail with [storage.ErrFenced]. So a
//     relocated controller that is still alive cannot drive the execution
//     its successor has taken over, and no handle of a controller can
//     write as an outside authority by mistake.
//
// A Persisted is safe for concurrent use. Its writes are serialised (they
// would only conflict in the store) and its observers see them one at a
// time, in write order.
type Persisted[S comparable] struct {
	table   *Table[S]
	store   storage.Store
	id      string
	actor   string
	history int
	retries int
	clock   func() time.Time
	// owner is nil for an outside authority, and set for good by the
	// first Acquire.
	owner  atomic.Pointer[owning]
	shared handles[S] // in the handle: one allocation a handle, not two
	// failures are the OnFailure observers; nil: none.
	failures *failureReporter[S]
	tracer   Tracer[S] // nil: none
}

// owning is what a controller's handle holds.
type owning struct {
	// claim is the claim of the handle's last take-over: the one it
	// writes under while own lasts, and remembers after (zero before its
	// first take-over).
	claim storage.Claim
	own   storage.Ownership // nil: it holds nothing
	// tried is a take-over whose outcome the handle never learned (the
	// store call failed after it may have written); nil if none.
	tried *takeOver
}

// takeOver identifies a take-over this handle may have written: by its
// holder, and the revision of the record it was decided on (its audit
// entry's Revision).
type takeOver struct {
	holder   string
	revision uint64
}

// handles is what a Persisted's writes share.
type handles[S comparable] struct {
	notify *notifier[S]
	sem    chan struct{}  // one write at a time; a channel so waiting honours ctx
	cache  storage.Record // the record as last read or written; guarded by sem
	// observed is the revision of a record handed over by Prime that
	// the next decision may trust as a fresh read (0: none); guarded by
	// sem.
	observed uint64
	// trails appends to the trails these writes made, in place: one
	// copy every HistoryKept writes instead of one per write. The first
	// write makes it: a controller restarted over 100k executions holds a
	// handle for each, and one that only reconciles never writes (an
	// appender is 104 bytes; the pointer, 8).
	trails atomic.Pointer[storage.TrailAppender]
}

// appender returns the handle's trail appender, made by the first
// write; writes need no lock for it (decide and plan run unlocked).
func (h *handles[S]) appender() *storage.TrailAppender {
	if a := h.trails.Load(); a != nil {
		return a
	}
	made := new(storage.TrailAppender)
	if h.trails.CompareAndSwap(nil, made) {
		return made
	}
	return h.trails.Load()
}

// NewPersisted returns the execution id of store, under table, written as
// an outside authority (see [Persisted.Acquire] to own it), telling
// observers of its writes. It does not touch the store.
func NewPersisted[S comparable](table *Table[S], store storage.Store, id string, opts PersistedOptions, observers ...Observers[S]) (*Persisted[S], error) {
	var errs []error
	if err := table.usable("NewPersisted"); err != nil {
		errs = append(errs, err)
	}
	if nilstore.Is(store) {
		errs = append(errs, fmt.Errorf("transition: NewPersisted: nil store (%T)", store))
	}
	if err := storage.ValidateID(id); err != nil {
		errs = append(errs, fmt.Errorf("transition: NewPersisted: %w", err))
	}
	s, err := persistedSettings(opts, observers)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Persisted[S]{
		table: table, store: store, id: id, actor: s.actor, history: s.history, retries: s.retries, clock: s.clock,
		shared:   handles[S]{notify: newNotifier(s.observers, s.onPanic), sem: make(chan struct{}, 1)},
		failures: newFailureReporter(s.failures, s.onPanic), tracer: s.tracer,
	}, nil
}

// ID returns the record's id.
func (p *Persisted[S]) ID() string { return p.id }

// Store returns the store the record lives in.
func (p *Persisted[S]) Store() storage.Store { return p.store }

// Table returns the table moves are checked against.
func (p *Persisted[S]) Table() *Table[S] { return p.table }

// Claim returns the claim of this handle's last take-over: the one it
// writes under while its ownership lasts, and remembers after it ended;
// the zero Claim for an outside authority or a controller that has not
// taken the record over yet.
func (p *Persisted[S]) Claim() storage.Claim {
	if o := p.owner.Load(); o != nil {
		return o.claim
	}
	return storage.Claim{}
}

// Ownership returns the ownership of this handle's last take-over, or
// nil for an outside authority or a controller that holds nothing. Watch
// its Lost channel to learn that the execution must no longer be driven;
// Release it when handing the execution over.
func (p *Persisted[S]) Ownership() storage.Ownership {
	if o := p.owner.Load(); o != nil {
		return o.own
	}
	return nil
}

// Authority reports whether the handle writes as an outside authority:
// it has never been used to take the record over.
func (p *Persisted[S]) Authority() bool { return p.owner.Load() == nil }

// Owns reports whether the handle holds a live ownership whose claim rec
// carries: whether it may drive the execution rec is.
func (p *Persisted[S]) Owns(rec storage.Record) bool {
	o := p.owner.Load()
	return o != nil && p.lost(o) == nil && o.claim == rec.Claim()
}

// lock takes sem, or fails when ctx ends first.
func lock(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}: // uncontended: no need to watch ctx
		return nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock releases the write lock lock took.
func (p *Persisted[S]) unlock() { <-p.shared.sem }

// settle runs fn under the write lock and hands the change it returns, if
// it returns one, to the observers: enqueued under the lock, which keeps
// the queue in write order, and delivered once the lock is released, so
// an observer never holds up the next write. It fails only when ctx ends
// before the lock is had; fn has then not run.
func (p *Persisted[S]) settle(ctx context.Context, fn func() (Change[S], bool)) error {
	if err := lock(ctx, p.shared.sem); err != nil {
		return err
	}
	n := p.shared.notify
	queued := func() bool {
		defer p.unlock()
		c, ok := fn()
		if ok && n != nil {
			n.enqueue(c)
		}
		return ok
	}()
	if queued && n != nil {
		n.drain()
	}
	return nil
}

// remember makes stored the record a write starts from, unless the
// handle already knows a later one; the write lock is held.
func (p *Persisted[S]) remember(stored *storage.Record) {
	if stored.Revision > p.shared.cache.Revision {
		p.shared.cache = *stored
	}
}

// Create writes a new record in the state u.To (usually the table's
// initial state) with u's reason and metadata, owned by nobody. A record
// with that id already present is [storage.ErrExists]. Observers see the
// creation as a change from the zero value of S to u.To.
func (p *Persisted[S]) Create(ctx context.Context, u Update[S]) (_ storage.Record, err error) {
	if err := p.check(ctx, "Create"); err != nil {
		return storage.Record{}, err
	}
	var created Change[S]
	if t := p.tracer; t != nil {
		ctx = t.StartWrite(ctx, p.id)
		defer func() { t.EndWrite(ctx, created, err) }()
	}
	name, ok := p.table.Name(u.To)
	if !ok {
		return storage.Record{}, &Error{ID: p.id, To: quote.Limited(name), Reason: "not a state of the table"}
	}
	at := p.now()
	rec := storage.Record{ID: p.id, Status: name, UpdatedAt: at, Since: at, Reason: u.Reason, HistoryLimit: p.history}
	rec.Meta, _ = mergeMeta(nil, u.Meta, u.Unset)
	// The record's own check first: it names the record and the field.
	err = rec.Validate()
	if err == nil {
		rec.History, err = storage.NewTrail(storage.Entry{To: name, Reason: u.Reason, Actor: p.actor, At: at})
	}
	if err != nil {
		return storage.Record{}, err
	}
	stored, err := p.store.Create(ctx, rec)
	if err != nil {
		return storage.Record{}, err
	}
	// Observed like every other write: as a change from the zero state
	// (the audit trail's first entry has no From either). The record is
	// written whatever happens next, so a caller that gives up waiting
	// for the lock still learns of it.
	var zero S
	created = Change[S]{ID: p.id, From: zero, To: u.To, Reason: u.Reason, Actor: p.actor, At: at, Revision: stored.Revision}
	_ = p.settle(context.WithoutCancel(ctx), func() (Change[S], bool) {
		p.remember(&stored)
		return created, true
	})
	return stored.Clone(), nil
}

// check refuses a nil or done ctx and a zero Persisted.
func (p *Persisted[S]) check(ctx context.Context, op string) error {
	if p.shared.sem == nil {
		return errZeroPersisted
	}
	return storage.CheckContext(ctx, "transition", op)
}

// Load reads the record from the store and returns it with its state.
func (p *Persisted[S]) Load(ctx context.Context) (S, storage.Record, error) {
	var zero S
	if err := p.check(ctx, "Load"); err != nil {
		return zero, storage.Record{}, err
	}
	if err := lock(ctx, p.shared.sem); err != nil {
		return zero, storage.Record{}, err
	}
	rec, err := p.read(ctx)
	p.unlock()
	if err != nil {
		return zero, storage.Record{}, err
	}
	cur, err := p.stateOf(&rec)
	if err != nil {
		return zero, storage.Record{}, err
	}
	return cur, rec.Clone(), nil
}

// Prime hands the handle the record as the caller read it from the
// store, by a List or from a watch event, so that the next Apply, Fire
// or Walk decides on it as on a record the handle had just read itself:
// without reading it again, and trusting a decision to write nothing.
// Later decisions are as usual (a decision that writes nothing on a
// record only remembered is made again on a fresh read). A write decided
// on it is a compare-and-swap at its revision, like every write, so a
// record that moved on since it was read is a conflict, re-read and
// decided again: nothing is overwritten unseen.
//
// It is how a controller restarted over many executions reconciles
// each once without reading each twice: it lists them, hands each handle
// its record, and every reconcile that finds nothing to do costs no read
// (100k executions: one listing instead of a listing and 100k reads,
// docs/decisions/2026-12-05-scale.md). Hand it only what the store
// returned, never a record made or changed by the caller.
//
// A record no newer than the one the handle knows is ignored (a late
// watch event); a record of another execution, or without a revision
// (never stored), is an error matching [storage.ErrInvalidRecord], and
// the handle is unchanged. It waits for a write of the handle in flight,
// honouring ctx.
func (p *Persisted[S]) Prime(ctx context.Context, rec storage.Record) error {
	if err := p.check(ctx, "Prime"); err != nil {
		return err
	}
	switch {
	case rec.ID != p.id:
		return fmt.Errorf("transition: Prime %s: %w: the record is %s's", quote.Limited(p.id), storage.ErrInvalidRecord, quote.Limited(rec.ID))
	case rec.Revision == 0:
		return fmt.Errorf("transition: Prime %s: %w: the record has no revision: it was not read from a store", quote.Limited(p.id), storage.ErrInvalidRecord)
	}
	if err := lock(ctx, p.shared.sem); err != nil {
		return err
	}
	defer p.unlock()
	if rec.Revision <= p.shared.cache.Revision {
		return nil
	}
	p.learn(rec.Clone())
	p.shared.observed = rec.Revision
	return nil
}

// read gets the record from the store and remembers it; the write lock is
// held. A take-over of this handle's whose outcome it never learned is
// settled here: if the record carries it, the handle knows its claim
// (and that it holds nothing: whatever held it was never handed over).
func (p *Persisted[S]) read(ctx context.Context) (storage.Record, error) {
	rec, err := p.store.Get(ctx, p.id)
	if err != nil {
		p.shared.cache = storage.Record{}
		return storage.Record{}, err
	}
	p.learn(rec)
	return rec, nil
}

// learn makes rec, as the store holds it, the record the handle knows;
// the write lock is held.
func (p *Persisted[S]) learn(rec storage.Record) {
	p.shared.cache = rec
	if o := p.owner.Load(); o != nil && o.tried != nil && tookOver(rec, *o.tried) {
		p.owner.CompareAndSwap(o, &owning{claim: rec.Claim()})
	}
}

func (p *Persisted[S]) stateOf(rec *storage.Record) (S, error) {
	cur, err := p.table.Parse(rec.Status)
	if err != nil {
		return cur, fmt.Errorf("transition: record %s has a status its table does not know: %w", quote.Limited(p.id), err)
	}
	return cur, nil
}

// Fire moves the execution to to. Like [Machine.Fire], moving to the
// current state succeeds and writes nothing. The change returned carries
// the revision written.
func (p *Persisted[S]) Fire(ctx context.Context, to S, reason string) (Change[S], error) {
	if err := p.check(ctx, "Fire"); err != nil {
		return Change[S]{}, p.failures.fail(p.undecided(), err)
	}
	return p.apply(ctx, &decider[S]{update: Update[S]{To: to, Reason: reason}}, nil)
}

// Walk moves the record to the state to along the table's shortest path
// from the state it is in (Table.Path), one write per move, each checked
// and guarded as Fire's, each with reason; it returns the changes it made,
// in order. A controller whose execution has not started uses it to reach
// its running state, however many moves away (Teraslice's pending is
// three: scheduling, initializing, running).
//
// Every move is decided on the record as it is then. Until Walk's first
// move lands, the path is planned from wherever the record is; from then
// on, the walk keeps to that path: another writer that moved the record
// along it (the cluster master placed it while the controller set up) is
// walked from, but one that moved it anywhere else (a stop) ends the walk
// there, with an error matching ErrNotAllowed and the changes made so far.
// Planning again from the stop would walk over it in a table where a
// stop's end leads back to the start. A record already in to writes
// nothing. When to cannot be reached from where the record is, Walk stops
// there with an error matching ErrNotAllowed and the changes made so far;
// so it does on any other error.
func (p *Persisted[S]) Walk(ctx context.Context, to S, reason string) ([]Change[S], error) {
	if err := p.check(ctx, "Walk"); err != nil {
		return nil, p.failures.fail(p.undecided(), err)
	}
	var (
		changes []Change[S]
		plan    []S // the path of the first move that landed, its start first
		planned []S // the path the last decision planned
	)
	// A path is at most every state long; writes by others may lengthen
	// the walk, but never past this without the record going round.
	for range 4 * p.table.Len() {
		c, err := p.apply(ctx, &decider[S]{decide: func(cur S, rec storage.Record) (Update[S], error) {
			if cur == to {
				return To(cur), nil
			}
			if plan != nil {
				k := slices.Index(plan, cur)
				if k < 0 || k+1 >= len(plan) {
					from, _ := p.table.Name(cur)
					target, _ := p.table.Name(to)
					return Update[S]{}, &Error{ID: p.id, From: from, To: target, Reason: "another writer moved it off the walk's path"}
				}
				return To(plan[k+1]).Because(reason), nil
			}
			path := p.table.Path(cur, to)
			if len(path) == 0 {
				from, _ := p.table.Name(cur)
				target, _ := p.table.Name(to)
				return Update[S]{}, &Error{ID: p.id, From: from, To: target, Reason: "no path leads there in the table"}
			}
			planned = append([]S{cur}, path...)
			return To(path[0]).Because(reason), nil
		}}, nil)
		if err != nil {
			return changes, err
		}
		if !c.Changed() {
			return changes, nil // in to
		}
		if plan == nil {
			plan = planned
		}
		changes = append(changes, c)
	}
	return changes, fmt.Errorf("transition: Walk %s: still not in its target after %d moves: other writers keep moving it", p.id, len(changes))
}

func (p *Persisted[S]) now() time.Time { return p.clock().UTC().Round(0) }
