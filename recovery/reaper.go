package recovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/execfsm/execfsm/internal/nilstore"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Reaper is a [reconcile.Reconciler] of execution ids that enforces the
// roles' timers and budgets ([Roles.Due]): an execution relocating with
// nobody taking over, or stopping past the shutdown timeout, is moved on
// where its timer says, as Teraslice's cluster master reaps stuck
// stopping executions; a retry whose backoff is over is moved on; an
// exhausted budget moves to its end.
// With [ReaperOptions].Abandoned it also ends an abandoned execution: one
// in a running state whose controller holds it no more (it died, or lost
// its lease and never took the execution back) and that no controller
// took over within Abandoned; it is failed with the reason. Run it in a
// [reconcile.Loop] whose Known lists the executions' ids
// (reconcile.StoreKeys(store, table): those that have not ended). It writes as
// an outside authority (no ownership claim) and asks to be called again
// when the next timer falls due, so timers hold between resyncs.
//
// A holder's lease ending writes nothing to the record, so the Reaper
// notices an abandoned execution when it next looks at it: at the Loop's
// resync, or on any write of the record. It counts Abandoned from then
// (a restarted Reaper counts again), never from before.
//
// Make one with [Decider.NewReaper]; it is used through the pointer it
// returns.
type Reaper[S comparable] struct {
	roles        *Roles[S]
	store        storage.Store
	now          func() time.Time
	actor        string
	observer     Observer[S]
	abandonAfter time.Duration

	mu     sync.Mutex
	unheld map[string]unheld // executions seen running with no live holder
}

// ReaperOptions are a [Reaper]'s settings. The timers and budgets are the
// roles', and the observer the Decider's.
type ReaperOptions struct {
	Clock reconcile.Clock // nil: the system clock
	Actor string          // recorded as the writer; default "deadline-reaper"
	// Abandoned is how long a running execution may go on without a
	// live holder before it is failed; zero never fails one. Make it
	// longer than a controller's lease TTL plus the time its platform
	// takes to replace it (teraslice.AbandonedAfter is Teraslice's, 15
	// minutes: as long as a relocation may wait, for the same reason).
	Abandoned time.Duration
}

// newReaper is [Decider.NewReaper].
func newReaper[S comparable](roles *Roles[S], store storage.Store, opts ReaperOptions, observer Observer[S]) (*Reaper[S], error) {
	if nilstore.Is(store) {
		return nil, errors.New("recovery: NewReaper: nil store")
	}
	if opts.Abandoned < 0 {
		return nil, fmt.Errorf("recovery: NewReaper: %w: Abandoned %v is negative (zero never fails an abandoned execution)", ErrInvalidPolicy, opts.Abandoned)
	}
	r := &Reaper[S]{roles: roles, store: store, now: time.Now, actor: opts.Actor,
		observer: observer, abandonAfter: opts.Abandoned}
	if opts.Clock != nil {
		r.now = opts.Clock.Now
	}
	if r.actor == "" {
		r.actor = "deadline-reaper"
	}
	return r, nil
}

// unheld is when a Reaper first saw an execution running under claim
// with nobody holding it.
type unheld struct {
	claim storage.Claim
	since time.Time
}

// Reconcile implements [reconcile.Reconciler].
func (r *Reaper[S]) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	if r == nil || r.roles == nil {
		return reconcile.Result{}, reconcile.TerminalError(errors.New("recovery: Reaper: make one with Decider.NewReaper"))
	}
	now := r.now
	exec, err := transition.NewPersisted(r.roles.table, r.store, id, transition.PersistedOptions{Actor: r.actor, Clock: now})
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	var wait time.Duration
	var enforced Enforced[S]
	c, _, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		if _, err := r.roles.StateOf(rec); err != nil {
			return transition.Update[S]{}, err
		}
		at := now()
		wait, enforced = 0, Enforced[S]{}
		d, ok, err := r.roles.nextDue(rec, cur, at, true)
		if err != nil {
			return transition.Update[S]{}, err
		}
		if !ok {
			return r.abandoned(ctx, cur, rec, at, &wait, &enforced)
		}
		r.forget(id)
		if d.Due.After(at) {
			wait = d.Due.Sub(at)
			return transition.To(cur), nil
		}
		enforced = d.enforced(at)
		return d.update(at), nil
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		r.forget(id)
		return reconcile.Result{}, nil // nothing to reap
	case foreign(err):
		// A record of a newer table (a rolling upgrade, a rollback):
		// its deadlines are the newer controllers' to enforce. Looked
		// at again at the next resync.
		r.forget(id)
		return reconcile.Result{}, nil
	case errors.Is(err, storage.ErrInvalidRecord):
		// A count, limit or duration an operator wrote by hand that does
		// not read: retrying reads it again. Left as it is, said once; the
		// next write of the record brings it back.
		r.forget(id)
		return reconcile.Result{}, reconcile.TerminalError(err)
	case err != nil:
		return reconcile.Result{}, err
	}
	if c.Changed() {
		r.forget(id)
		if r.observer.Enforced != nil {
			r.observer.Enforced(enforced)
		}
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// abandoned decides on rec, in cur, a state with no timer running: a running state whose claim nobody holds ends once it has gone
// unheld for the Abandoned time.
func (r *Reaper[S]) abandoned(ctx context.Context, cur S, rec storage.Record, at time.Time, wait *time.Duration, enforced *Enforced[S]) (transition.Update[S], error) {
	keep := transition.To(cur)
	after := r.abandonAfter
	if role, _ := r.roles.Role(cur); role != RoleRunning || rec.Owner == "" || after == 0 {
		r.forget(rec.ID)
		return keep, nil
	}
	if _, held, err := r.store.Held(ctx, rec.ID); err != nil || held {
		// Held by its owner, or by a successor whose take-over is
		// still being written: not abandoned.
		r.forget(rec.ID)
		return keep, err
	}
	since := r.seenUnheld(rec.ID, rec.Claim(), at)
	gone := at.Sub(since)
	if gone < after {
		*wait = after - gone
		return keep, nil
	}
	reason := fmt.Sprintf("abandoned: %s status with nobody holding it for %v (controller %s, epoch %d, holds it no more and no controller took it over)",
		rec.Status, gone.Round(time.Second), rec.Owner, rec.Epoch)
	*enforced = Enforced[S]{ID: rec.ID, From: cur, To: r.roles.failed, Cause: CauseAbandoned, Reason: reason,
		Due: since.Add(after), Overdue: gone - after}
	return transition.Update[S]{To: r.roles.failed, Reason: reason, Meta: map[string]string{MetaFailure: reason}}, nil
}

// seenUnheld returns when the Reaper first saw id unheld under claim,
// remembering at if this is the first time.
func (r *Reaper[S]) seenUnheld(id string, claim storage.Claim, at time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.unheld[id]; ok && u.claim == claim {
		return u.since
	}
	if r.unheld == nil {
		r.unheld = map[string]unheld{}
	}
	r.unheld[id] = unheld{claim: claim, since: at}
	return at
}

func (r *Reaper[S]) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.unheld, id)
}
