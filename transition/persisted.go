package transition

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/internal/nilstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Update is what one atomic write does to a record. The zero value is not
// meaningful: To must be set, to the current state for a write that
// changes no state. [To] makes one without naming S, and its methods add
// the rest: transition.To(state.Running).Because("placed").Set("node", n).
type Update[S comparable] struct {
	To     S      // the state to move to
	Reason string // why; kept as the record's Reason and in its audit entry
	// Meta entries are set on the record, Unset keys removed from it, in
	// the same write as the move.
	Meta  map[string]string
	Unset []string
}

// To is the update that moves to state to, S inferred from it.
func To[S comparable](to S) Update[S] { return Update[S]{To: to} }

// Because returns u with its reason.
func (u Update[S]) Because(reason string) Update[S] {
	u.Reason = reason
	return u
}

// Set returns u setting the metadata entry key to value as well. u's
// own map is left as it was: an update built from another does not
// change it.
func (u Update[S]) Set(key, value string) Update[S] {
	meta := make(map[string]string, len(u.Meta)+1)
	maps.Copy(meta, u.Meta)
	meta[key] = value
	u.Meta = meta
	return u
}

// Remove returns u removing the metadata entries keys as well (its
// Unset field).
func (u Update[S]) Remove(keys ...string) Update[S] {
	u.Unset = append(slices.Clip(u.Unset), keys...)
	return u
}

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
		failures: newFailureReporter(s.failures, s.onPanic),
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

// Acquire takes the record over for this handle, through the store's
// ownership (see [storage.Store] and [storage.Lease]), and makes the
// move decide asks for in the same atomic write: the handle ends up
// owning the record with the move written, or has written nothing.
// decide is asked on the record as the store holds it, and again on the
// fresh record when it changed before the take-over landed (as for
// [Persisted.Apply]); an error from it is returned as it is. A nil decide
// takes the record over and changes nothing else. The move is checked
// against the table and its guards like any other; the audit entry is
// one for the whole write, with the update's reason (lease.Reason when it
// has none). lease.Move is Acquire's to fill in: leave it nil.
//
// If no live holder owns the record, lease.Holder becomes its owner at
// the next epoch, which fences every earlier claim. If a live holder owns
// it (this handle included) the error matches [storage.ErrHeld], a
// [*storage.HeldError] naming the holder and the status found; with
// lease.Wait, Acquire first waits for that ownership to end while ctx
// allows.
//
// The first call with a valid lease makes the handle a controller's for
// good (see [Persisted]); a later one, once its ownership has ended, takes the
// record over again at a new epoch. It returns the change written and
// the record as stored. Observers see the take-over as a change, from
// the state found to the one decided (the same state for a plain
// take-over).
func (p *Persisted[S]) Acquire(ctx context.Context, lease storage.Lease, decide func(cur S, rec storage.Record) (Update[S], error)) (Change[S], storage.Record, error) {
	if err := p.check(ctx, "Acquire"); err != nil {
		return Change[S]{}, storage.Record{}, err
	}
	if lease.Move != nil {
		return Change[S]{}, storage.Record{}, errors.New("transition: Acquire: lease.Move is set; Acquire makes it from decide")
	}
	if err := lease.Validate(); err != nil {
		return Change[S]{}, storage.Record{}, err // bad input changes nothing, not even the handle
	}
	p.owner.CompareAndSwap(nil, &owning{}) // a controller's from now on
	for attempt := 1; ; attempt++ {
		rec, err := p.fresh(ctx)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		cur, err := p.stateOf(&rec)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		u := Update[S]{To: cur}
		if decide != nil {
			if u, err = decide(cur, rec.Clone()); err != nil {
				return Change[S]{}, storage.Record{}, err
			}
		}
		l := lease
		if u.Reason != "" {
			l.Reason = u.Reason
		}
		c, move, err := p.planTakeOver(ctx, cur, rec, u, l)
		if err != nil {
			return Change[S]{}, storage.Record{}, err
		}
		l.Move = move
		own, stored, err := p.takeOver(ctx, l)
		var conflict *storage.ConflictError
		switch {
		case err == nil:
		case errors.As(err, &conflict) && attempt <= p.retries:
			continue // decided on a record that has moved on: decide again
		case errors.As(err, &conflict):
			return Change[S]{}, storage.Record{}, fmt.Errorf("transition: %s: gave up after %d conflicting take-overs: %w", quote.Limited(p.id), attempt, err)
		default:
			var held *storage.HeldError
			if errors.As(err, &held) && held.Status == "" {
				found := *held
				found.Status = rec.Status
				err = &found
			}
			return Change[S]{}, storage.Record{}, err
		}
		// The take-over is written whatever happens next: the handle learns
		// of it even if the caller has given up waiting.
		_ = p.settle(context.WithoutCancel(ctx), func() (Change[S], bool) {
			claim := own.Claim()
			p.owner.Store(&owning{claim: claim, own: own})
			p.remember(&stored)
			c.Revision, c.Owner, c.Epoch = stored.Revision, claim.Owner, claim.Epoch
			return c, true
		})
		return c, stored.Clone(), nil
	}
}

// takeOver calls the store's Acquire, remembering the take-over while
// its outcome is unknown: a failure that may have written it leaves the
// handle able to recognise its own claim in the record (see read).
func (p *Persisted[S]) takeOver(ctx context.Context, l storage.Lease) (storage.Ownership, storage.Record, error) {
	last := p.owner.Load()
	tried := &owning{claim: last.claim, own: last.own, tried: &takeOver{holder: l.Holder, revision: l.Move.Revision}}
	p.owner.Store(tried)
	own, stored, err := p.store.Acquire(ctx, p.id, l)
	if err == nil || nothingWritten(err) {
		p.owner.CompareAndSwap(tried, last)
	}
	return own, stored, err
}

// nothingWritten reports whether err from a store's Acquire says that
// nothing was written.
func nothingWritten(err error) bool {
	for _, sentinel := range []error{storage.ErrHeld, storage.ErrConflict, storage.ErrNotFound,
		storage.ErrInvalidLease, storage.ErrInvalidRecord} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// planTakeOver checks the move u asks of rec (in state cur) like any
// other write and returns the change and the move a take-over makes.
func (p *Persisted[S]) planTakeOver(ctx context.Context, cur S, rec storage.Record, u Update[S], l storage.Lease) (Change[S], *storage.Move, error) {
	t := p.table
	i, _ := t.lookup(cur)
	j, ok := t.lookup(u.To)
	if !ok {
		return Change[S]{}, nil, &Error{ID: p.id, From: t.names[i], To: quote.Limited(nameOf(u.To)), Reason: "not a state of the table"}
	}
	reason := l.Reason
	if reason == "" {
		reason = "acquired"
	}
	c := Change[S]{ID: p.id, From: cur, To: u.To, Reason: reason, Actor: p.actor, At: p.now(), Revision: rec.Revision}
	if i != j {
		if err := p.checkMove(ctx, i, j, &rec, c); err != nil {
			return Change[S]{}, nil, err
		}
	}
	meta, changed := mergeMeta(rec.Meta, u.Meta, u.Unset)
	if i != j {
		meta = t.countMove(i, j, meta, changed, c.At)
	}
	probe := storage.Record{ID: p.id, Status: t.names[j], Reason: u.Reason, Meta: meta}
	if err := probe.Validate(); err != nil { // the reason and the metadata: the rest came from the store
		return Change[S]{}, nil, err
	}
	return c, &storage.Move{Revision: rec.Revision, Status: t.names[j], Meta: meta, Actor: p.actor, At: c.At}, nil
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
func (p *Persisted[S]) Create(ctx context.Context, u Update[S]) (storage.Record, error) {
	if err := p.check(ctx, "Create"); err != nil {
		return storage.Record{}, err
	}
	name, ok := p.table.Name(u.To)
	if !ok {
		return storage.Record{}, &Error{ID: p.id, To: quote.Limited(name), Reason: "not a state of the table"}
	}
	at := p.now()
	rec := storage.Record{ID: p.id, Status: name, UpdatedAt: at, Since: at, Reason: u.Reason, HistoryLimit: p.history}
	rec.Meta, _ = mergeMeta(nil, u.Meta, u.Unset)
	// The record's own check first: it names the record and the field.
	err := rec.Validate()
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
	_ = p.settle(context.WithoutCancel(ctx), func() (Change[S], bool) {
		p.remember(&stored)
		var zero S
		return Change[S]{ID: p.id, From: zero, To: u.To, Reason: u.Reason, Actor: p.actor, At: at, Revision: stored.Revision}, true
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

// tookOver reports whether the take-over t wrote rec's claim: rec is
// owned by t's holder, and the audit entry of that claim follows the
// revision t was decided on.
func tookOver(rec storage.Record, t takeOver) bool {
	if rec.Owner != t.holder {
		return false
	}
	for _, e := range rec.History.All() {
		if e.Owner == rec.Owner && e.Epoch == rec.Epoch {
			return e.Revision == t.revision
		}
	}
	return false
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
func (p *Persisted[S]) apply(ctx context.Context, d *decider[S], stored *storage.Record) (Change[S], error) {
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

func (p *Persisted[S]) now() time.Time { return p.clock().UTC().Round(0) }
