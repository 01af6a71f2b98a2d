package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
)

// Decision is what a controller does with an execution it finds on
// startup.
type Decision uint8

// The startup decisions.
const (
	// Start: the execution has not started (an init status); set it up
	// as usual.
	Start Decision = iota + 1
	// Resume: carry on in Verdict.To as the execution's new owner, after
	// a relocation (To is the status it was relocated from) or within
	// the restart budget after a crash (To is the status it had).
	Resume
	// Stop: the execution was being stopped when its controller went
	// away. To is Stopping (finish the shutdown, then write Stopped) or,
	// past the stopping deadline, Stopped.
	Stop
	// Fail: the execution cannot go on; Failed is written with the
	// reason. Do not run it.
	Fail
	// Refuse: the execution is over (a terminal status). Write nothing,
	// do not run; Verdict.Err says why.
	Refuse
)

func (d Decision) String() string {
	switch d {
	case Start:
		return "start"
	case Resume:
		return "resume"
	case Stop:
		return "stop"
	case Fail:
		return "fail"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Verdict is the outcome of [Startup].
type Verdict struct {
	Decision Decision
	From     state.Status      // the status found
	To       state.Status      // the status to write (From for Start and Refuse)
	Reason   string            // for people and for the record
	Meta     map[string]string // metadata to write with it (the restart count)
	Err      error             // for Refuse: matches ErrTerminalStatus
}

// ErrTerminalStatus: the execution is already over.
var ErrTerminalStatus = errors.New("execution is in a terminal status")

// Startup decides what a controller starting for the execution in rec
// does. It is a pure function of the record and the policy; [ApplyStartup]
// writes its verdict. The rules:
//
//   - A terminal status: Refuse ("invalid state: terminal", as Teraslice
//     says), writing nothing.
//   - Relocating: Resume, back to the status it was relocated from (a
//     paused execution comes back paused), or Initializing when the
//     record does not say; Fail once it has been relocating past its
//     deadline.
//   - An init status: Start.
//   - Stopping: Stop, finishing the shutdown; past its deadline, straight
//     to Stopped.
//   - Any other running status: the previous controller died without
//     being asked (OOM kill, node loss). Resume in that status only if the
//     platform restarts controllers, the work is restartable and the
//     restart budget is not spent; otherwise Fail with the reason. Never
//     "start again and leave the status as it is": that is how a crash
//     becomes a crash loop.
//
// The error is for input no decision can be made on: an invalid policy
// ([ErrInvalidPolicy]) or a status the lifecycle does not know.
func Startup(rec storage.Record, p Policy) (Verdict, error) {
	p, err := p.withDefaults()
	if err != nil {
		return Verdict{}, err
	}
	cur, err := state.Parse(rec.Status)
	if err != nil {
		return Verdict{}, fmt.Errorf("recovery: execution %s: %w", rec.ID, err)
	}
	v := Verdict{From: cur, To: cur}
	switch {
	case cur.IsTerminal():
		v.Decision = Refuse
		v.Reason = fmt.Sprintf("execution %s was starting in %s status (invalid state: terminal)", rec.ID, cur)
		v.Err = fmt.Errorf("recovery: %s: %w", v.Reason, ErrTerminalStatus)
		return v, nil
	case cur.IsInit():
		v.Decision = Start
		v.Reason = fmt.Sprintf("controller started for %s execution", cur)
		return v, nil
	}
	if dl, left, ok := deadline(rec, cur, p.Deadlines, p.Now); ok && left <= 0 {
		u := deadlineUpdate(rec, cur, dl, p.Now)
		v.To, v.Reason, v.Meta = u.To, u.Reason, u.Meta
		v.Decision = Fail
		if dl.Then == state.Stopped {
			v.Decision = Stop
		}
		return v, nil
	}
	switch cur {
	case state.Relocating:
		v.Decision = Resume
		back, err := state.Parse(rec.Previous)
		if err != nil || !state.Lifecycle().IsReturn(state.Relocating, back) {
			v.To = state.Initializing
			v.Reason = "relocated controller took over; the record does not say what it was relocated from, so it re-initializes"
			return v, nil
		}
		v.To = back
		v.Reason = fmt.Sprintf("relocated controller took over; back to %s", back)
		return v, nil
	case state.Stopping:
		v.Decision = Stop
		v.Reason = "controller restarted while stopping; finishing the stop"
		return v, nil
	}
	return unexpectedRestart(rec, cur, p, v), nil
}

// unexpectedRestart decides on a running status found on startup.
func unexpectedRestart(rec storage.Record, cur state.Status, p Policy, v Verdict) Verdict {
	fail := func(reason string) Verdict {
		v.Decision, v.To = Fail, state.Failed
		v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status (OOM kill or node loss?): %s", cur, reason)
		if v.Meta == nil {
			v.Meta = map[string]string{}
		}
		v.Meta[MetaFailure] = v.Reason
		return v
	}
	if !p.Restarts {
		return fail("the platform does not restart controllers")
	}
	if !restartable(p.Work) {
		return fail("the work is not restartable")
	}
	recent, err := restartsSince(rec.Meta[MetaRestarts], p.Now.Add(-p.RestartWindow))
	if err != nil {
		return fail("the restart count is unreadable: " + err.Error())
	}
	recent = append(recent, p.Now)
	v.Meta = map[string]string{MetaRestarts: formatRestarts(recent)}
	if len(recent) > p.RestartBudget {
		return fail(fmt.Sprintf("restart budget spent: %d unexpected restarts within %v, at most %d",
			len(recent), p.RestartWindow, p.RestartBudget))
	}
	v.Decision = Resume
	v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status; resuming (unexpected restart %d of %d within %v)",
		cur, len(recent), p.RestartBudget, p.RestartWindow)
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
func deadline(rec storage.Record, cur state.Status, d Deadlines, now time.Time) (Deadline, time.Duration, bool) {
	dl, ok := d[cur]
	return dl, dl.After - now.Sub(since(rec)), ok
}

// deadlineUpdate is the write that ends an overdue status.
func deadlineUpdate(rec storage.Record, cur state.Status, dl Deadline, now time.Time) transition.Update[state.Status] {
	reason := fmt.Sprintf("%s for %v, past its deadline of %v", cur, now.Sub(since(rec)).Round(time.Second), dl.After)
	u := transition.Update[state.Status]{To: dl.Then, Reason: reason}
	if dl.Then != state.Stopped {
		u.Meta = map[string]string{MetaFailure: reason}
	}
	return u
}

// ApplyStartup is what a controller does first: it takes the execution
// over and writes what [Startup] decides. It always ends with the caller
// owning the execution at a new epoch, or with nothing written:
//
//  1. It reads the record. A terminal status is refused ([Refuse],
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
func ApplyStartup(ctx context.Context, exec *transition.Persisted[state.Status], lease storage.Lease, p Policy) (Verdict, *transition.Persisted[state.Status], error) {
	if exec == nil {
		return Verdict{}, nil, errors.New("recovery: ApplyStartup: nil execution")
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	if _, err := p.withDefaults(); err != nil {
		return Verdict{}, nil, err
	}
	_, rec, err := exec.Load(ctx)
	if err != nil {
		return Verdict{}, nil, err
	}
	owned := exec
	if !owns(exec, rec) {
		v, err := Startup(rec, p)
		if err != nil {
			return Verdict{}, nil, err
		}
		if v.Decision == Refuse {
			return v, nil, v.Err
		}
		if lease.Reason == "" {
			lease.Reason = "controller starting"
		}
		if owned, _, err = exec.Acquire(ctx, lease); err != nil {
			return Verdict{}, nil, fmt.Errorf("recovery: startup of %s: %w", rec.ID, err)
		}
	}
	var verdict Verdict
	_, _, err = owned.Apply(ctx, func(_ state.Status, rec storage.Record) (transition.Update[state.Status], error) {
		v, err := Startup(rec, p)
		if err != nil {
			return transition.Update[state.Status]{}, err
		}
		verdict = v
		if v.Decision == Refuse {
			return transition.Update[state.Status]{}, v.Err
		}
		return transition.Update[state.Status]{To: v.To, Reason: v.Reason, Meta: v.Meta}, nil
	})
	if err != nil {
		if owned != exec {
			_ = owned.Ownership().Release(context.WithoutCancel(ctx))
		}
		return verdict, nil, err
	}
	return verdict, owned, nil
}

// owns reports whether exec holds a live ownership of rec.
func owns(exec *transition.Persisted[state.Status], rec storage.Record) bool {
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
