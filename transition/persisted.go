package transition

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Claim is an ownership claim on a record: the owner's name and the epoch
// at which it took the record over. The zero Claim claims nothing.
type Claim struct {
	Owner string
	Epoch uint64
}

// Update is what one atomic write does to a record. The zero value is not
// meaningful: To must be set, to the current state for a write that
// changes no state.
type Update[S comparable] struct {
	To     S      // the state to move to
	Reason string // why; kept as the record's Reason and in its audit entry
	// Meta entries are set on the record, Unset keys removed from it, in
	// the same write as the move.
	Meta  map[string]string
	Unset []string
	// TakeOver, if not empty, makes the writer the record's owner at the
	// next epoch, which fences every write under an older claim.
	TakeOver string
}

// Persisted is one execution whose state lives in a [Store]: its table,
// the store and the record's id. Every write reads the record, checks the
// move against the table and its guards, and writes with compare-and-swap
// at the revision it read. When another writer got there first it re-reads
// and decides again on the fresh record, a bounded number of times (see
// [Retries]); it never overwrites what it has not seen.
//
// A Persisted may hold a [Claim] (see [Persisted.Acquire]). Its writes
// then fail with [ErrFenced] once the record is owned by anyone else or at
// another epoch, so a relocated controller that is still alive cannot
// drive the execution its successor has taken over. A Persisted without a
// claim writes as an outside authority (a cluster master asking an
// execution to stop) and is never fenced.
//
// A Persisted is safe for concurrent use; its writes are serialised, since
// they would only conflict with each other in the store.
type Persisted[S comparable] struct {
	table     *Table[S]
	store     Store
	id        string
	claim     Claim
	actor     string
	history   int
	retries   int
	clock     func() time.Time
	observers []func(Change[S])
	notify    *notifier[S]
	sem       chan struct{} // one write at a time; a channel so waiting honours ctx
	cache     Record        // the record as last read or written; guarded by sem
}

// NewPersisted returns the execution id of store, under table. It does not
// touch the store. It accepts [OnChange], [Clock], [Actor], [History] and
// [Retries].
func NewPersisted[S comparable](table *Table[S], store Store, id string, opts ...Option) (*Persisted[S], error) {
	s := newSettings(forPersisted, opts)
	if table == nil {
		s.errs = append(s.errs, errors.New("transition: NewPersisted: nil table"))
	}
	if store == nil {
		s.errs = append(s.errs, errors.New("transition: NewPersisted: nil store"))
	}
	if err := checkText("id", id, MaxIDLen, false); err != nil {
		s.errs = append(s.errs, fmt.Errorf("transition: NewPersisted: %w: %v", ErrInvalidRecord, err))
	}
	observers, err := observersFor[S](s)
	if err != nil {
		s.errs = append(s.errs, err)
	}
	if len(s.errs) > 0 {
		return nil, errors.Join(s.errs...)
	}
	return &Persisted[S]{
		table: table, store: store, id: id, actor: s.actor, history: s.history, retries: s.retries,
		clock: s.clock, observers: observers, notify: newNotifier(observers), sem: make(chan struct{}, 1),
	}, nil
}

// ID returns the record's id.
func (p *Persisted[S]) ID() string { return p.id }

// Table returns the table moves are checked against.
func (p *Persisted[S]) Table() *Table[S] { return p.table }

// Claim returns the ownership claim this Persisted writes under.
func (p *Persisted[S]) Claim() Claim { return p.claim }

// WithClaim returns a Persisted for the same record that writes under c,
// for a controller that learned its claim elsewhere (a lease it holds, a
// record it just wrote). It shares the observers but not the write queue.
func (p *Persisted[S]) WithClaim(c Claim) *Persisted[S] {
	return &Persisted[S]{
		table: p.table, store: p.store, id: p.id, claim: c, actor: p.actor, history: p.history,
		retries: p.retries, clock: p.clock, observers: p.observers, notify: newNotifier(p.observers),
		sem: make(chan struct{}, 1),
	}
}

// Create writes a new record in the state u.To (usually the table's
// initial state) with u's reason and metadata; u.TakeOver names the first
// owner, at epoch 1. A record with that id already present is [ErrExists].
func (p *Persisted[S]) Create(ctx context.Context, u Update[S]) (Record, error) {
	if err := checkCall(ctx, "Create"); err != nil {
		return Record{}, err
	}
	name, ok := p.table.Name(u.To)
	if !ok {
		return Record{}, &Error{ID: p.id, To: quoteLimited(name), Reason: "not a state of the table", Err: ErrUnknownState, kind: ErrNotAllowed}
	}
	at := p.now()
	rec := Record{ID: p.id, Status: name, UpdatedAt: at, Since: at, Reason: u.Reason, Owner: p.claim.Owner, Epoch: p.claim.Epoch}
	if u.TakeOver != "" {
		rec.Owner, rec.Epoch = u.TakeOver, 1
	}
	rec.Meta, _ = mergeMeta(nil, u.Meta, u.Unset)
	if p.history > 0 {
		rec.History = []Entry{{To: name, Reason: u.Reason, Actor: p.actor, Owner: rec.Owner, Epoch: rec.Epoch, At: at}}
	}
	return p.store.Create(ctx, rec)
}

// Load reads the record from the store and returns it with its state.
func (p *Persisted[S]) Load(ctx context.Context) (S, Record, error) {
	var zero S
	if err := checkCall(ctx, "Load"); err != nil {
		return zero, Record{}, err
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, Record{}, ctx.Err()
	}
	rec, err := p.read(ctx)
	<-p.sem
	if err != nil {
		return zero, Record{}, err
	}
	cur, err := p.stateOf(rec)
	if err != nil {
		return zero, Record{}, err
	}
	return cur, rec, nil
}

// read gets the record from the store and remembers it; p.sem is held.
func (p *Persisted[S]) read(ctx context.Context) (Record, error) {
	rec, err := p.store.Get(ctx, p.id)
	if err != nil {
		p.cache = Record{}
		return Record{}, err
	}
	p.cache = rec
	return rec, nil
}

func (p *Persisted[S]) stateOf(rec Record) (S, error) {
	cur, err := p.table.Parse(rec.Status)
	if err != nil {
		return cur, fmt.Errorf("transition: record %s has a status its table does not know: %w", quoteLimited(p.id), err)
	}
	return cur, nil
}

// Fire moves the execution to to. Like [Machine.Fire], moving to the
// current state succeeds and writes nothing. The change returned carries
// the revision written.
func (p *Persisted[S]) Fire(ctx context.Context, to S, reason string) (Change[S], error) {
	c, _, err := p.Apply(ctx, func(S, Record) (Update[S], error) {
		return Update[S]{To: to, Reason: reason}, nil
	})
	return c, err
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
// It returns the change, with the revision written, and the record as
// stored.
func (p *Persisted[S]) Apply(ctx context.Context, decide func(cur S, rec Record) (Update[S], error)) (Change[S], Record, error) {
	return p.apply(ctx, decide, true)
}

// Acquire takes the record over for owner: one write that sets the owner
// and bumps the epoch, fencing every earlier claim. It returns a Persisted
// that writes under the new claim. It is unconditional; to take over only
// in some states, use Apply with [Update.TakeOver].
func (p *Persisted[S]) Acquire(ctx context.Context, owner, reason string) (*Persisted[S], Record, error) {
	if err := checkText("owner", owner, MaxOwnerLen, false); err != nil {
		return nil, Record{}, fmt.Errorf("transition: Acquire %s: %w: %v", quoteLimited(p.id), ErrInvalidRecord, err)
	}
	_, rec, err := p.apply(ctx, func(cur S, _ Record) (Update[S], error) {
		return Update[S]{To: cur, Reason: reason, TakeOver: owner}, nil
	}, false)
	if err != nil {
		return nil, Record{}, err
	}
	return p.WithClaim(Claim{Owner: rec.Owner, Epoch: rec.Epoch}), rec, nil
}

func (p *Persisted[S]) apply(ctx context.Context, decide func(S, Record) (Update[S], error), fence bool) (Change[S], Record, error) {
	if err := checkCall(ctx, "Apply"); err != nil {
		return Change[S]{}, Record{}, err
	}
	if decide == nil {
		return Change[S]{}, Record{}, errors.New("transition: Apply: nil decide function")
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return Change[S]{}, Record{}, ctx.Err()
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			<-p.sem
		}
	}
	defer unlock()

	// Start from the record this handle last wrote, if any: a controller
	// is usually its execution's only writer, and the compare-and-swap
	// catches the cases where it is not, so the common write is one round
	// trip instead of two. A decision not to write is never trusted to
	// the cache: the record may have moved on, so it is made again on a
	// fresh read.
	rec, fromCache := p.cache, p.cache.ID != ""
	if !fromCache {
		var err error
		if rec, err = p.read(ctx); err != nil {
			return Change[S]{}, Record{}, err
		}
	}
	refresh := func() error {
		fromCache = false
		var err error
		rec, err = p.read(ctx)
		return err
	}
	for attempt := 1; ; attempt++ {
		cur, err := p.stateOf(rec)
		if err != nil {
			if fromCache {
				if err := refresh(); err != nil {
					return Change[S]{}, Record{}, err
				}
				continue
			}
			return Change[S]{}, Record{}, err
		}
		if fence && p.claim.Owner != "" && (rec.Owner != p.claim.Owner || rec.Epoch != p.claim.Epoch) {
			if fromCache {
				if err := refresh(); err != nil {
					return Change[S]{}, Record{}, err
				}
				continue
			}
			return Change[S]{}, Record{}, &FencedError{ID: p.id, Owner: p.claim.Owner, Epoch: p.claim.Epoch,
				CurrentOwner: rec.Owner, CurrentEpoch: rec.Epoch}
		}
		u, err := decide(cur, rec.Clone())
		var next Record
		var c Change[S]
		write := false
		if err == nil {
			next, c, write, err = p.plan(ctx, cur, rec, u)
		}
		if err != nil || !write {
			if fromCache && ctx.Err() == nil {
				if err := refresh(); err != nil {
					return Change[S]{}, Record{}, err
				}
				continue
			}
			if err != nil {
				return Change[S]{}, Record{}, err
			}
			return c, rec, nil
		}
		stored, err := p.store.CompareAndSwap(ctx, p.id, rec.Revision, next)
		if err == nil {
			p.cache = stored
			c.Revision = stored.Revision
			if p.notify != nil {
				p.notify.enqueue(c)
				unlock()
				p.notify.drain()
			}
			return c, stored, nil
		}
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			p.cache = Record{} // the write may or may not have landed
			return Change[S]{}, Record{}, err
		}
		fromCache = false
		if attempt > p.retries {
			return Change[S]{}, Record{}, fmt.Errorf("transition: %s: gave up after %d conflicting writes: %w", quoteLimited(p.id), attempt, err)
		}
		rec = conflict.Current
		if rec.ID != p.id { // a store that did not include the record
			if rec, err = p.read(ctx); err != nil {
				return Change[S]{}, Record{}, err
			}
		}
	}
}

// plan turns an update of rec (in state cur) into the record to write and
// the change it makes; write is false when it would change nothing.
func (p *Persisted[S]) plan(ctx context.Context, cur S, rec Record, u Update[S]) (next Record, c Change[S], write bool, err error) {
	t := p.table
	i, _ := t.lookup(cur)
	j, ok := t.lookup(u.To)
	if !ok {
		return Record{}, Change[S]{}, false, &Error{ID: p.id, From: t.names[i], To: quoteLimited(nameOf(u.To)),
			Reason: "not a state of the table", Err: ErrUnknownState, kind: ErrNotAllowed}
	}
	owner, epoch := p.claim.Owner, p.claim.Epoch
	if u.TakeOver != "" {
		owner, epoch = u.TakeOver, rec.Epoch+1
	}
	c = Change[S]{ID: p.id, From: cur, To: u.To, Reason: u.Reason, Actor: p.actor, At: p.now(),
		Revision: rec.Revision, Owner: owner, Epoch: epoch}
	moves := i != j
	if moves {
		prevPlus1 := noPrev
		if k, known := t.byName[rec.Previous]; known && rec.Previous != "" {
			prevPlus1 = int(k) + 1
		}
		flags := t.edges[i*t.n+j]
		if err := checkEdge(t, p.id, i, j, prevPlus1, flags); err != nil {
			return Record{}, Change[S]{}, false, err
		}
		if flags&edgeGuarded != 0 || len(t.anyGuard) > 0 {
			if err := runGuards(ctx, t, i, j, c); err != nil {
				return Record{}, Change[S]{}, false, err
			}
		}
	}
	meta, metaChanged := mergeMeta(rec.Meta, u.Meta, u.Unset)
	if !moves && !metaChanged && u.TakeOver == "" {
		return Record{}, c, false, nil
	}
	if err := ctx.Err(); err != nil {
		return Record{}, Change[S]{}, false, err
	}
	next = rec.Clone()
	next.Status = t.names[j]
	if moves {
		next.Previous = t.names[i]
		next.Since = c.At
	}
	if moves || u.Reason != "" {
		next.Reason = u.Reason
	}
	next.UpdatedAt = c.At
	if u.TakeOver != "" {
		next.Owner, next.Epoch = owner, epoch
	}
	next.Meta = meta
	next.History = nil
	if p.history > 0 {
		keep := rec.History
		if len(keep) >= p.history {
			keep = keep[len(keep)-p.history+1:]
		}
		next.History = append(append(make([]Entry, 0, len(keep)+1), keep...), Entry{
			From: t.names[i], To: t.names[j], Reason: u.Reason, Actor: p.actor,
			Owner: owner, Epoch: epoch, At: c.At, Revision: rec.Revision,
		})
	}
	if err := next.Validate(); err != nil {
		return Record{}, Change[S]{}, false, err
	}
	return next, c, true, nil
}

// mergeMeta applies set and unset to a copy of meta and reports whether
// anything changed. An empty result is nil.
func mergeMeta(meta, set map[string]string, unset []string) (map[string]string, bool) {
	out := maps.Clone(meta)
	changed := false
	for k, v := range set {
		if old, ok := out[k]; !ok || old != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
			changed = true
		}
	}
	for _, k := range unset {
		if _, ok := out[k]; ok {
			delete(out, k)
			changed = true
		}
	}
	if len(out) == 0 {
		out = nil
	}
	return out, changed
}

func (p *Persisted[S]) now() time.Time { return p.clock().UTC().Round(0) }
