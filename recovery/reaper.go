package recovery

import (
	"context"
	"errors"
	"time"

	"github.com/execfsm/execfsm/reconcile"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/transition"
)

// Reaper is a [reconcile.Reconciler] of execution ids that enforces
// [Deadlines]: an execution relocating with nobody taking over, or
// stopping past the shutdown timeout, is moved on (to the roles' failed
// and stopped states by default), as Teraslice's cluster master reaps
// stuck stopping executions. Run it in a [reconcile.Loop] whose List
// returns the executions' ids. It writes as an outside authority (no
// ownership claim) and asks to be called again when the next deadline
// falls due, so deadlines hold between resyncs.
type Reaper[S comparable] struct {
	Roles     *Roles[S] // required: state.Roles() for the execution lifecycle
	Store     storage.Store
	Deadlines Deadlines[S]    // nil: Roles.DefaultDeadlines()
	Clock     reconcile.Clock // nil: the system clock
	Actor     string          // recorded as the writer; default "deadline-reaper"
	Observer  Observer[S]     // its Deadline is told of each deadline enforced
}

// Reconcile implements [reconcile.Reconciler].
func (r *Reaper[S]) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	if r.Store == nil || r.Roles == nil {
		return reconcile.Result{}, reconcile.TerminalError(errors.New("recovery: Reaper: nil Store or Roles"))
	}
	deadlines := r.Deadlines
	if deadlines == nil {
		deadlines = r.Roles.DefaultDeadlines()
	}
	if err := deadlines.Validate(r.Roles); err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	now := time.Now
	if r.Clock != nil {
		now = r.Clock.Now
	}
	actor := r.Actor
	if actor == "" {
		actor = "deadline-reaper"
	}
	exec, err := transition.NewPersisted(r.Roles.table, r.Store, id, transition.PersistedOptions[S]{Actor: actor, Clock: now})
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	var wait time.Duration
	var enforced Enforced[S]
	c, _, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		at := now()
		dl, left, ok := deadline(rec, cur, deadlines, at)
		wait, enforced = 0, Enforced[S]{}
		if !ok || left > 0 {
			wait = max(left, 0)
			return transition.Update[S]{To: cur}, nil
		}
		enforced = Enforced[S]{ID: id, From: cur, To: dl.Then, Deadline: dl.After, Overdue: -left}
		return deadlineUpdate(r.Roles, rec, dl, at), nil
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return reconcile.Result{}, nil // nothing to reap
	case err != nil:
		return reconcile.Result{}, err
	}
	if c.Changed() && r.Observer.Deadline != nil {
		r.Observer.Deadline(enforced)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}
