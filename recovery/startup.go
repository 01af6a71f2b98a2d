package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/internal/quote"
	"github.com/execfsm/execfsm/transition"
)

// Decision is what a controller does with an execution it finds on
// startup.
type Decision uint8

// The startup decisions.
const (
	// DecisionStart: the execution has not started (a not-started
	// state); set it up as usual.
	DecisionStart Decision = iota + 1
	// DecisionResume: carry on in Verdict.To as the execution's new
	// owner, after a relocation (To is the state it was relocated from)
	// or within the restart budget after a crash (To is the state it
	// had).
	DecisionResume
	// DecisionStop: the execution was being stopped when its controller
	// went away. To is the stopping state (finish the shutdown, then
	// write the stop's end) or, past the stopping deadline, its end.
	DecisionStop
	// DecisionFail: the execution cannot go on; the roles' Failed state
	// is written with the reason. Do not run it.
	DecisionFail
	// DecisionRefuse: the execution is over (a terminal state). Write
	// nothing, do not run; Verdict.Err says why.
	DecisionRefuse
)

func (d Decision) String() string {
	switch d {
	case DecisionStart:
		return "start"
	case DecisionResume:
		return "resume"
	case DecisionStop:
		return "stop"
	case DecisionFail:
		return "fail"
	case DecisionRefuse:
		return "refuse"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Verdict is the outcome of [Startup].
type Verdict[S comparable] struct {
	Decision Decision
	From     S                 // the state found
	To       S                 // the state to write (From for DecisionStart and DecisionRefuse)
	Reason   string            // for people and for the record
	Meta     map[string]string // metadata to write with it (the restart count)
	Err      error             // for DecisionRefuse: matches ErrTerminalStatus
	// Restarts is, when the verdict counts an unexpected restart, the
	// unexpected restarts within the window, this one included, and
	// RestartBudget the budget they are counted against: Restarts above
	// it is DecisionFail. Both are 0 for any other verdict.
	Restarts, RestartBudget int
	// Recovers is the id of the execution this one recovers ([Recover]),
	// "" if it is not a recovery. A recovery that starts runs in its
	// recovering state after its setup (state.Recovering, not Running),
	// re-processing what the old execution left unfinished.
	Recovers string
}

// ErrTerminalStatus: the execution is already over.
var ErrTerminalStatus = errors.New("execution is in a terminal status")

// Startup decides what a controller starting for the execution in rec
// does, by the role of the state it finds (see [Roles]). It is a pure
// function of the record, the roles and the policy; [ApplyStartup]
// writes its verdict. The rules:
//
//   - A terminal state: Refuse ("invalid state: terminal", as Teraslice
//     says), writing nothing.
//   - A not-started state: Start.
//   - A state past its deadline ([Policy].Deadlines): what the deadline
//     says (Stop if that is the stop's end, Fail otherwise).
//   - Relocating: Resume, back to the running state it was relocated
//     from (a paused execution comes back paused), or to the roles'
//     restart state when the record does not say.
//   - Stopping: Stop, finishing the shutdown.
//   - A running state: the previous controller died without being asked
//     (OOM kill, node loss). Resume in that state only if the platform
//     restarts controllers, the work is restartable and the restart
//     budget is not spent; otherwise Fail with the reason. Never "start
//     again and leave the status as it is": that is how a crash becomes
//     a crash loop.
//
// The error is for input no decision can be made on: nil roles, an
// invalid policy ([ErrInvalidPolicy]) or a status the table does not
// know (transition.ErrUnknownState).
func Startup[S comparable](roles *Roles[S], rec storage.Record, p Policy[S]) (Verdict[S], error) {
	v, err := startup(roles, rec, p)
	if err != nil || v.Decision == DecisionRefuse || p.Work == nil {
		return v, err
	}
	// The work has answered: record what it said, for operators and for
	// the next controller that cannot ask it.
	if flag := strconv.FormatBool(p.Work.IsRestartable()); rec.Meta[MetaRelocatable] != flag {
		v.Meta = maps.Clone(v.Meta)
		if v.Meta == nil {
			v.Meta = map[string]string{}
		}
		v.Meta[MetaRelocatable] = flag
	}
	return v, nil
}

func startup[S comparable](roles *Roles[S], rec storage.Record, p Policy[S]) (Verdict[S], error) {
	p, err := p.withDefaults(roles)
	if err != nil {
		return Verdict[S]{}, err
	}
	t := roles.table
	cur, err := t.Parse(rec.Status)
	if err != nil {
		return Verdict[S]{}, fmt.Errorf("recovery: execution %s: %w", quote.Limited(rec.ID), err)
	}
	role, _ := roles.Role(cur)
	v := Verdict[S]{From: cur, To: cur}
	v.Recovers, _ = RecoveredFrom(rec)
	switch role {
	case RoleTerminal:
		v.Decision = DecisionRefuse
		v.Reason = fmt.Sprintf("execution %s was starting in %s status (invalid state: terminal)", rec.ID, rec.Status)
		v.Err = fmt.Errorf("recovery: %s: %w", v.Reason, ErrTerminalStatus)
		return v, nil
	case RoleNotStarted:
		v.Decision = DecisionStart
		v.Reason = fmt.Sprintf("controller started for %s execution", rec.Status)
		return v, nil
	}
	if dl, left, ok := deadline(rec, cur, p.Deadlines, p.Now); ok && left <= 0 {
		u := deadlineUpdate(roles, rec, dl, p.Now)
		v.To, v.Reason, v.Meta = u.To, u.Reason, u.Meta
		v.Decision = DecisionFail
		if roles.stopEnd(dl.Then) {
			v.Decision = DecisionStop
		}
		return v, nil
	}
	switch role {
	case RoleRelocating:
		v.Decision = DecisionResume
		back, err := t.Parse(rec.Previous)
		if err != nil || !t.IsReturn(cur, back) {
			v.To = roles.restart
			restart, _ := t.Name(roles.restart)
			v.Reason = fmt.Sprintf("relocated controller took over; the record does not say what it was relocated from, so it goes back to %s", restart)
			return v, nil
		}
		v.To = back
		v.Reason = fmt.Sprintf("relocated controller took over; back to %s", rec.Previous)
		return v, nil
	case RoleStopping:
		v.Decision = DecisionStop
		v.Reason = "controller restarted while stopping; finishing the stop"
		return v, nil
	}
	return unexpectedRestart(roles, rec, p, v), nil
}

// unexpectedRestart decides on a running state found on startup.
func unexpectedRestart[S comparable](roles *Roles[S], rec storage.Record, p Policy[S], v Verdict[S]) Verdict[S] {
	fail := func(reason string) Verdict[S] {
		v.Decision, v.To = DecisionFail, roles.failed
		v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status (OOM kill or node loss?): %s", rec.Status, reason)
		if v.Meta == nil {
			v.Meta = map[string]string{}
		}
		v.Meta[MetaFailure] = v.Reason
		return v
	}
	if !p.Restarts {
		return fail("the platform does not restart controllers")
	}
	if ok, why := restartability(p.Work, rec); !ok {
		return fail(why)
	}
	recent, err := restartsSince(rec.Meta[MetaRestarts], p.Now.Add(-p.RestartWindow))
	if err != nil {
		return fail("the restart count is unreadable: " + err.Error())
	}
	recent = append(recent, p.Now)
	v.Meta = map[string]string{MetaRestarts: formatRestarts(recent)}
	v.Restarts, v.RestartBudget = len(recent), p.RestartBudget
	if len(recent) > p.RestartBudget {
		return fail(fmt.Sprintf("restart budget spent: %d unexpected restarts within %v, at most %d",
			len(recent), p.RestartWindow, p.RestartBudget))
	}
	v.Decision = DecisionResume
	v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status; resuming (unexpected restart %d of %d within %v)",
		rec.Status, len(recent), p.RestartBudget, p.RestartWindow)
	return v
}

func since(rec storage.Record) time.Time {
	if rec.Since.IsZero() {
		return rec.UpdatedAt
	}
	return rec.Since
}

// deadline returns the deadline of cur, if it has one, and how much of it
// is left (zero or less: overdue).
func deadline[S comparable](rec storage.Record, cur S, d Deadlines[S], now time.Time) (Deadline[S], time.Duration, bool) {
	dl, ok := d[cur]
	return dl, dl.After - now.Sub(since(rec)), ok
}

// deadlineUpdate is the write that ends an overdue state. A deadline
// that ends in anything but the stop's end is a failure, and says so in
// the record's metadata.
func deadlineUpdate[S comparable](roles *Roles[S], rec storage.Record, dl Deadline[S], now time.Time) transition.Update[S] {
	reason := fmt.Sprintf("%s for %v, past its deadline of %v", rec.Status, now.Sub(since(rec)).Round(time.Second), dl.After)
	u := transition.Update[S]{To: dl.Then, Reason: reason}
	if !roles.stopEnd(dl.Then) {
		u.Meta = map[string]string{MetaFailure: reason}
	}
	return u
}

// ApplyStartup is what a controller does first: it takes the execution
// over and writes what [Startup] decides. It always ends with the caller
// owning the execution at a new epoch, or with nothing written:
//
//  1. It reads the record. A terminal status is refused ([DecisionRefuse],
//     ErrTerminalStatus): nothing is written, nothing is owned.
//  2. It acquires the execution through the store ([storage.Lease]):
//     the holder becomes the owner at the next epoch, which fences every
//     earlier controller, relocated or not. A live holder (another
//     controller that is running, or that has just started) is never
//     taken over: the error matches [storage.ErrHeld] and nothing is
//     written. With lease.Wait it waits, while ctx allows, for that
//     holder's lease to end (a crashed predecessor's expires).
//  3. It decides with [Startup] on the record as the take-over left it and
//     writes the verdict under the new claim. Only now, with the previous
//     holder's lease gone, can a running status mean a crash, so only now
//     is a restart counted against the budget.
//
// If exec already owns the record (an ownership that has not ended, whose
// claim the record still carries), step 2 is skipped. If the verdict is
// not written (the execution became terminal meanwhile, or a write
// failed), the ownership is released again. The returned handle writes
// under the new claim; watch its Ownership().Lost() and stop driving the
// execution when it closes.
func ApplyStartup[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], lease storage.Lease, p Policy[S]) (Verdict[S], *transition.Persisted[S], error) {
	if exec == nil {
		return Verdict[S]{}, nil, errors.New("recovery: ApplyStartup: nil execution")
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	if _, err := p.withDefaults(roles); err != nil {
		return Verdict[S]{}, nil, err
	}
	if err := roles.fits(exec.Table()); err != nil {
		return Verdict[S]{}, nil, err
	}
	_, rec, err := exec.Load(ctx)
	if err != nil {
		return Verdict[S]{}, nil, err
	}
	owned := exec
	if !owns(exec, rec) {
		v, err := Startup(roles, rec, p)
		if err != nil {
			return Verdict[S]{}, nil, err
		}
		if v.Decision == DecisionRefuse {
			p.Observer.startup(v, v.Err)
			return v, nil, v.Err
		}
		if lease.Reason == "" {
			lease.Reason = "controller starting"
		}
		if owned, _, err = exec.Acquire(ctx, lease); err != nil {
			// Decided on the record as read, before the take-over: a
			// restart is counted only once the holder's lease is gone.
			v.Restarts = 0
			err = fmt.Errorf("recovery: startup of %s: %w", rec.ID, err)
			p.Observer.startup(v, err)
			return Verdict[S]{}, nil, err
		}
	}
	var verdict Verdict[S]
	_, _, err = owned.Apply(ctx, func(_ S, rec storage.Record) (transition.Update[S], error) {
		v, err := Startup(roles, rec, p)
		if err != nil {
			return transition.Update[S]{}, err
		}
		verdict = v
		if v.Decision == DecisionRefuse {
			return transition.Update[S]{}, v.Err
		}
		return transition.Update[S]{To: v.To, Reason: v.Reason, Meta: v.Meta}, nil
	})
	p.Observer.startup(verdict, err)
	if err != nil {
		if owned != exec {
			_ = owned.Ownership().Release(context.WithoutCancel(ctx))
		}
		return verdict, nil, err
	}
	return verdict, owned, nil
}

// owns reports whether exec holds a live ownership of rec.
func owns[S comparable](exec *transition.Persisted[S], rec storage.Record) bool {
	own := exec.Ownership()
	if own == nil {
		return false
	}
	select {
	case <-own.Lost():
		return false
	default:
	}
	c := exec.Claim()
	return c.Owner != "" && c == rec.Claim()
}
