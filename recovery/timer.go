package recovery

import (
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Timer moves an execution on from State once it falls due: After (or
// the execution's own duration, TimerKey(Name)) has passed since the
// record entered State, or since the first move the Since counter
// counted; and, with Budget, no earlier than the budget's not-before
// time. Then is any state State may move to, but a relocating or a
// finishing one (those a controller enters with work in hand).
//
// Deadlines are timers: "relocating for 15 minutes fails" is
// Timer{State: Relocating, After: 15 * time.Minute, Then: Failed}
// ([RolesBuilder.Deadline]). A retry that waits out its backoff is
// Timer{State: RetryPending, Budget: "failures", Then: Submitted}; a
// job-wide active deadline is a timer on each live state with Since the
// counter of the job's start and Name set so the job's spec can carry
// its own duration.
//
// A [Decider] ([Decider.Advance], [Decider.Start]) and the [Reaper]
// enforce timers as they fall due, the Reaper as an outside authority;
// the reason is written in the record's trail. A controller starting
// in a not-started state starts it without waiting for its plain timers
// (they are for executions nobody picks up) but waits for a Budget's
// not-before time.
type Timer[S comparable] struct {
	// State is the state the timer runs in.
	State S
	// After is how long: measured from entry into State, or from the
	// first move Since counts. Zero with Budget: due at the budget's
	// not-before time. Zero with Name and no Budget: only executions
	// that carry their own duration have the timer.
	After time.Duration
	// Since is "" to measure from entry into State (storage.Record.Since),
	// or a counter of the table to measure from the first move it counted
	// (the execution's start, across restarts): then the timer runs only
	// once that counter has counted.
	Since string
	// Budget is "" or the counter of a [Budget]: the timer is not due
	// before the budget's not-before time (its backoff), and does not
	// run once the budget is exhausted (no retry past the allowance).
	Budget string
	// Name is "" or the timer's name: an execution may carry its own
	// After under TimerKey(Name), a Go duration ("90s").
	Name string
	// Then is where the timer moves the execution.
	Then S
}

// timerKeyPrefix starts the metadata key of an execution's own duration.
const timerKeyPrefix = "execfsm.timer."

// TimerKey is the record metadata key under which an execution carries
// its own duration for the timers named name, a Go duration ("90s") that
// replaces their After: a deadline from the job's spec.
func TimerKey(name string) string { return timerKeyPrefix + name }

// Cause is why an execution was moved on without anyone asking.
type Cause uint8

// The causes of an [Enforced] move.
const (
	CauseTimer     Cause = iota + 1 // a Timer fell due
	CauseBudget                     // a Budget was exhausted
	CauseAbandoned                  // nobody held a running execution (ReaperOptions.Abandoned)
)

func (c Cause) String() string {
	switch c {
	case CauseTimer:
		return "timer"
	case CauseBudget:
		return "budget"
	case CauseAbandoned:
		return "abandoned"
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Enforced is a move made because something fell due: a timer, an
// exhausted budget or an abandoned execution (see [Cause]).
type Enforced[S comparable] struct {
	ID       string
	From, To S
	Cause    Cause
	Reason   string    // as written in the record
	Timer    Timer[S]  // CauseTimer: the timer that fell due
	Budget   string    // CauseBudget: the exhausted budget's counter
	Due      time.Time // when it fell due
	// Overdue is how long after Due the move was made.
	Overdue time.Duration
}

// due is the next thing to fall due for a record: the move it makes,
// and when.
type due[S comparable] struct {
	Enforced[S]
	failure bool // the move is a failure: MetaFailure says why
}

// Due returns what falls due next for rec at now, and false if nothing
// will (its state has no timer that runs for it and no exhausted
// budget): an exhausted budget of its state first (due since its last
// counted move), else the timer that falls due first. A Due at or before
// now is overdue: [Decider.Advance] and the [Reaper] make its move (To),
// with Reason; Overdue says by how much. The error is for a record of
// another table or one whose counts, own limits or own durations do not
// read (storage.ErrInvalidRecord).
func (r *Roles[S]) Due(rec storage.Record, now time.Time) (Enforced[S], bool, error) {
	cur, err := r.StateOf(rec)
	if err != nil {
		return Enforced[S]{}, false, err
	}
	d, ok, err := r.nextDue(rec, cur, now, true)
	if !ok || err != nil {
		return Enforced[S]{}, false, err
	}
	return d.enforced(now), true, nil
}

// nextDue returns what falls due first for rec in cur: an exhausted
// budget of cur (due when it was exhausted), else the earliest of its
// timers. entryTimers false leaves out the timers that measure from
// entry without a Budget (a starting controller's not-started state).
// The error is for a record whose counts or own limits and durations do
// not read.
func (r *Roles[S]) nextDue(rec storage.Record, cur S, now time.Time, plainTimers bool) (due[S], bool, error) {
	for _, counter := range r.spentIn[cur] {
		b := r.budgets[counter]
		s, err := spending(b, rec, now)
		if err != nil {
			return due[S]{}, false, err
		}
		if !s.Exhausted || b.Exhausted == cur {
			continue // not exhausted, or ended where an exhausted budget ends
		}
		d := due[S]{Enforced: Enforced[S]{ID: rec.ID, From: cur, To: b.Exhausted, Cause: CauseBudget, Budget: counter, Due: s.Last}}
		d.Reason = fmt.Sprintf("budget %s exhausted: %d counted, %s allowed", counter, s.Spent, s.Allowance)
		d.failure = r.failing(b.Exhausted)
		return d, true, nil
	}
	var (
		first      due[S]
		firstAfter time.Duration
		found      bool
	)
	for _, t := range r.timers[cur] {
		if !plainTimers && t.Budget == "" {
			continue
		}
		at, after, ok, err := r.timerDue(t, rec, now)
		if err != nil {
			return due[S]{}, false, err
		}
		if ok && (!found || at.Before(first.Due)) {
			first = due[S]{Enforced: Enforced[S]{ID: rec.ID, From: cur, To: t.Then, Cause: CauseTimer, Timer: t, Due: at}}
			firstAfter, found = after, true
		}
	}
	if found {
		first.Reason = timerReason(first.Timer, firstAfter, rec, now)
		first.failure = r.failing(first.To)
	}
	return first, found, nil
}

// timerDue returns when t falls due for rec and the duration it runs
// for, and false when it does not run for rec (no duration of its own, a
// start not counted yet).
func (r *Roles[S]) timerDue(t Timer[S], rec storage.Record, now time.Time) (at time.Time, after time.Duration, ok bool, err error) {
	after = t.After
	if t.Name != "" {
		if v, ok := rec.Meta[TimerKey(t.Name)]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return time.Time{}, 0, false, fmt.Errorf("recovery: %w: metadata %s=%.32q is not a positive duration", storage.ErrInvalidRecord, TimerKey(t.Name), v)
			}
			after = d
		}
	}
	if after == 0 && t.Budget == "" {
		return time.Time{}, 0, false, nil
	}
	base := since(rec)
	if t.Since != "" {
		c, err := transition.CountOf(rec, t.Since)
		if err != nil {
			return time.Time{}, 0, false, err
		}
		if c.First.IsZero() {
			return time.Time{}, 0, false, nil
		}
		base = c.First
	}
	at = base.Add(after)
	if t.Budget != "" {
		s, err := spending(r.budgets[t.Budget], rec, now)
		switch {
		case err != nil:
			return time.Time{}, 0, false, err
		case s.Exhausted:
			return time.Time{}, 0, false, nil // no retry past the allowance
		case s.NotBefore.After(at):
			at = s.NotBefore
		}
	}
	return at, after, true, nil
}

// timerReason says why t, running for after, moved rec on, as the
// record's trail keeps it.
func timerReason[S comparable](t Timer[S], after time.Duration, rec storage.Record, now time.Time) string {
	name := ""
	if t.Name != "" {
		name = " (timer " + t.Name + ")"
	}
	switch {
	case t.Since != "":
		return fmt.Sprintf("%v since the first %s move, past its deadline of %v%s", now.Sub(firstCounted(rec, t.Since)).Round(time.Second), t.Since, after, name)
	case after == 0:
		return fmt.Sprintf("%s for %v: %s's backoff is over%s", rec.Status, now.Sub(since(rec)).Round(time.Second), t.Budget, name)
	}
	return fmt.Sprintf("%s for %v, past its deadline of %v%s", rec.Status, now.Sub(since(rec)).Round(time.Second), after, name)
}

func firstCounted(rec storage.Record, counter string) time.Time {
	c, _ := transition.CountOf(rec, counter)
	return c.First
}

// failing reports whether a move to s that nobody asked for is a
// failure: to the roles' Failed state, or to any terminal state but a
// stop's end.
func (r *Roles[S]) failing(s S) bool {
	return s == r.failed || r.role[s] == RoleTerminal && !r.stopEnd(s)
}

// update is the write that enforces d at now.
func (d due[S]) update(now time.Time) transition.Update[S] {
	u := transition.To(d.To).Because(d.Reason)
	if d.failure {
		u.Meta = map[string]string{MetaFailure: d.Reason}
	}
	return u
}

// enforced is what the observer is told of d, enforced at now.
func (d due[S]) enforced(now time.Time) Enforced[S] {
	e := d.Enforced
	e.Overdue = max(0, now.Sub(d.Due))
	return e
}
