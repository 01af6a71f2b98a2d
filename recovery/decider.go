package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Decider makes one controller's decisions, with one set of roles and one
// policy: it takes an execution over and decides at startup
// ([Decider.Start]), on SIGTERM ([Decider.Terminate]) and when the work
// ends ([Decider.End]), and makes the Reaper that enforces the roles'
// deadlines ([Decider.NewReaper]); its observer, if it has one
// ([Decider.WithObserver]), is told what each carried out. The state type
// comes from the roles, so no call spells it. Make one per process with
// [NewDecider] and use it for every execution it drives: it never
// changes, and is safe for concurrent use.
type Decider[S comparable] struct {
	roles *Roles[S]
	p     policy[S]
}

// errZeroDecider is what a Decider not made by NewDecider returns.
var errZeroDecider = errors.New("recovery: zero Decider: make one with NewDecider")

// NewDecider returns the Decider of roles and p. Nil roles are an error
// matching [ErrInvalidRoles], a policy that cannot be honoured one
// matching [ErrInvalidPolicy]: here, not at the first decision.
func NewDecider[S comparable](roles *Roles[S], p Policy) (*Decider[S], error) {
	if roles == nil {
		return nil, fmt.Errorf("recovery: NewDecider: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidRoles)
	}
	check := policy[S]{Policy: p}
	if _, err := check.withDefaults(roles); err != nil {
		return nil, err
	}
	return &Decider[S]{roles: roles, p: policy[S]{Policy: p}}, nil
}

// WithObserver returns a Decider like d whose decisions, and whose
// Reapers' deadlines, o is told of.
func (d *Decider[S]) WithObserver(o Observer[S]) *Decider[S] {
	if d == nil {
		return nil
	}
	c := *d
	c.p.Observer = o
	return &c
}

// Roles returns the roles d decides with.
func (d *Decider[S]) Roles() *Roles[S] {
	if d == nil {
		return nil
	}
	return d.roles
}

// Start is what a controller does first: it takes the execution
// over through exec (a handle of its own, from
// [transition.NewPersisted]) and writes what [Startup] decides, in one
// atomic write ([transition.Persisted.Acquire]). It ends with exec
// owning the execution at a new epoch with the verdict written, or with
// nothing written and nothing owned:
//
//   - A live holder (another controller that is running, or that has
//     just started) is never taken over: the error matches
//     [storage.ErrHeld] (a [*storage.HeldError] naming the holder and the
//     status found). With lease.Wait it waits, while ctx allows, for that
//     holder's lease to end (a crashed predecessor's expires). A
//     controller that gives up waiting has taken nothing over: it exits
//     as a Leave does, with [Policy.LeaveExitCode], since an exit 0 would
//     complete a Job whose execution is still in another's hands.
//   - The decision is made on the record exactly as the take-over finds
//     it, with no live holder: a running status found so can only mean
//     that the previous controller died unasked, so only then is a
//     restart counted against the budget. If the record changes before
//     the take-over lands (the predecessor wrote relocating, the cluster
//     master failed the execution), it decides again on the fresh record.
//   - A terminal status is refused ([DecisionRefuse], the error matches
//     [ErrTerminalStatus]): nothing is written, nothing is owned.
//   - A record of another table (a status the table does not know, or a
//     relocation back to one: a newer version of the table wrote it) is
//     left alone: the error matches [ErrForeignStatus], nothing is
//     written, nothing is owned, no restart is counted.
//
// exec becomes the controller's handle for good (see
// [transition.Persisted]): it writes under the new claim; watch its
// Ownership().Lost() and stop driving the execution when it closes.
//
// Retrying is safe, with the same exec:
//
//   - By the live holder (a retry after a timeout, a second call by
//     mistake): while the record is still where its start left it, it
//     writes nothing, counts nothing and returns the verdict already
//     written (from [MetaStartup] and the start's audit entry). Once the
//     record has moved on (the controller set up and ran, the cluster
//     master stopped it), that verdict is stale: it decides again on the
//     record as it is, counting no restart, so a retried start never
//     sets up an execution that is running or being stopped.
//   - By a controller whose ownership ended while it lived (a store
//     outage outlasted its lease), or that never learned whether its
//     take-over landed: if the record still carries its claim, nobody
//     took the execution over meanwhile, and it takes it back at a new
//     epoch, deciding as usual except that a running status resumes
//     without counting a restart. If another controller took it over, it
//     starts like any controller.
//
// On an error the verdict is the zero Verdict but for From, the status
// found, when the record could be read.
func (d *Decider[S]) Start(ctx context.Context, exec *transition.Persisted[S], lease storage.Lease) (Verdict[S], error) {
	if d == nil || d.roles == nil {
		return Verdict[S]{}, errZeroDecider
	}
	ctx, traced := d.startTrace(ctx, MomentStartup, exec)
	v, err := applyStartup(ctx, d.roles, exec, lease, d.p.at(d.p.clock()))
	if foreign(err) && !errors.Is(err, ErrForeignStatus) {
		// transition.Persisted refused the status before any decision.
		v, err = Verdict[S]{}, fmt.Errorf("recovery: start of %s: %w: %w", exec.ID(), ErrForeignStatus, err)
	}
	traced(Decided[S]{Decision: v.Decision.String(), From: v.From, To: v.To, Reason: v.Reason}, err)
	return v, err
}

// Terminate handles a SIGTERM for the controller writing through
// exec (which should hold the controller's claim). It decides with
// [Terminate]; when that says Relocate, it calls checkpoint (if not nil)
// to flush in-flight work, then writes relocating with compare-and-swap,
// remembering the status it leaves. If the record changed meanwhile (the
// cluster master has just written stopping) it decides again on the
// fresh record, so exactly one outcome happens: relocated, or shut down.
// A fenced write means another controller took over, or this one's
// ownership ended: Leave.
//
// A controller's handle that holds no live ownership (it ended, or the
// controller never took the execution over: a handle no start has been
// made with, which transition.Persisted takes for an outside authority's)
// decides Leave at once, without reading the store: whatever the store
// says, it is not this controller's to drive, and a store out of reach
// must not keep it from exiting.
//
// After writing relocating it releases exec's ownership, so the
// controller that replaces this one takes over at once instead of after
// the lease's TTL; exec writes nothing more (its writes are fenced). On
// Shutdown the caller still owns the execution: it writes the final
// status, then releases.
func (d *Decider[S]) Terminate(ctx context.Context, exec *transition.Persisted[S], checkpoint func(context.Context) error) (Action, error) {
	if d == nil || d.roles == nil {
		return Action{}, errZeroDecider
	}
	ctx, traced := d.startTrace(ctx, MomentSIGTERM, exec)
	a, err := applyTerminate(ctx, d.roles, exec, d.p.at(d.p.clock()), checkpoint)
	traced(Decided[S]{Decision: a.Kind.String(), Reason: a.Reason}, err)
	return a, err
}

// End writes the final status of the execution exec drives
// (exec should hold the controller's claim), as [End] decides it for
// ending, with meta (the work's statistics; nil for none) in the same
// write, by compare-and-swap; if the record changed meanwhile (the
// cluster master wrote stopping) it decides again on the fresh record. A
// fenced write means another controller owns the execution: Leave.
//
// A controller's handle that holds no live ownership decides Leave at
// once, without reading the store (as [Decider.Terminate] does).
//
// A retry (Ending.Retry) that spent its budget past the allowance is
// moved on to the budget's end in a second write, at once; End.To and
// End.Reason then say so.
//
// After writing it releases exec's ownership: the execution is over,
// stopped, or retried by the next controller, and this one writes
// nothing more. The controller then exits with Outcome.ExitCode: 0, but on
// a platform that restarts controllers the relocation's after a Leave or
// a retry that goes on, so that the controller that drives the
// execution on comes.
func (d *Decider[S]) End(ctx context.Context, exec *transition.Persisted[S], ending Ending, meta map[string]string) (Outcome[S], error) {
	if d == nil || d.roles == nil {
		return Outcome[S]{}, errZeroDecider
	}
	if err := checkFinish(d.roles, ending); err != nil {
		return Outcome[S]{}, err
	}
	ctx, traced := d.startTrace(ctx, MomentEnd, exec)
	o, err := applyFinish(ctx, d.roles, exec, d.p, meta, func(rec storage.Record, claim storage.Claim) (Outcome[S], error) {
		return End(d.roles, rec, claim, ending)
	})
	traced(Decided[S]{Decision: o.Kind.String(), From: o.From, To: o.To, Reason: o.Reason}, err)
	return o, err
}

// EndAs writes the end the caller names for the execution exec drives,
// as [EndAs] decides it, with meta in the same write, and lets the
// execution go, as [Decider.End] does.
func (d *Decider[S]) EndAs(ctx context.Context, exec *transition.Persisted[S], to S, reason string, meta map[string]string) (Outcome[S], error) {
	if d == nil || d.roles == nil {
		return Outcome[S]{}, errZeroDecider
	}
	ctx, traced := d.startTrace(ctx, MomentEnd, exec)
	o, err := applyFinish(ctx, d.roles, exec, d.p, meta, func(rec storage.Record, claim storage.Claim) (Outcome[S], error) {
		return EndAs(d.roles, rec, claim, to, reason)
	})
	traced(Decided[S]{Decision: o.Kind.String(), From: o.From, To: o.To, Reason: o.Reason}, err)
	return o, err
}

// NewReaper returns the Reaper of the executions store keeps, enforcing
// the roles' deadlines; see [Reaper]. A nil or typed-nil store is an
// error here, never at the first reconcile.
func (d *Decider[S]) NewReaper(store storage.Store, opts ReaperOptions) (*Reaper[S], error) {
	if d == nil || d.roles == nil {
		return nil, errZeroDecider
	}
	return newReaper(d.roles, store, opts, d.p.Observer)
}

// Advance makes the move that has fallen due for the execution exec
// drives (see [Roles.Due]): an exhausted budget's, or a timer's. It is
// what a controller calls from its own loop (a manager's reconcile of
// each execution) so that budgets and timers hold while it drives the
// execution, where the [Reaper] would be later; exec writes as whoever
// it is (its owner's claim, or an outside authority). It writes by
// compare-and-swap, deciding again on a record that changed meanwhile.
//
// It returns the move made (Cause zero when nothing was due) and how long
// until the next thing falls due (zero: nothing will). Its observer is
// told of the move. The error is the store's, a fenced write's, or a
// record of another table or whose counts, limits or durations do not
// read ([storage.ErrInvalidRecord]); nothing is written then.
func (d *Decider[S]) Advance(ctx context.Context, exec *transition.Persisted[S]) (Enforced[S], time.Duration, error) {
	if d == nil || d.roles == nil {
		return Enforced[S]{}, 0, errZeroDecider
	}
	if exec == nil {
		return Enforced[S]{}, 0, errors.New("recovery: Advance: nil execution")
	}
	if err := d.roles.fits(exec.Table()); err != nil {
		return Enforced[S]{}, 0, err
	}
	var (
		enforced Enforced[S]
		wait     time.Duration
	)
	c, after, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		enforced, wait = Enforced[S]{}, 0
		now := d.p.clock()
		due, ok, err := d.roles.nextDue(rec, cur, now, true)
		switch {
		case err != nil:
			return transition.Update[S]{}, err
		case !ok:
			return transition.To(cur), nil
		case due.Due.After(now):
			wait = due.Due.Sub(now)
			return transition.To(cur), nil
		}
		enforced = due.enforced(now)
		return due.update(now), nil
	})
	if err != nil {
		return Enforced[S]{}, 0, err
	}
	if !c.Changed() {
		return Enforced[S]{}, wait, nil
	}
	d.p.Observer.enforce(enforced)
	// What falls due next is in the state the move entered.
	if next, ok, err := d.roles.Due(after, d.p.clock()); err == nil && ok {
		wait = max(time.Nanosecond, next.Due.Sub(d.p.clock()))
	}
	return enforced, wait, nil
}
