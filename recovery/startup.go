package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Decision is what a controller does with an execution it finds on
// startup.
type Decision uint8

// The startup decisions.
const (
	// DecisionStart: the execution has not started (a not-started
	// state, To: a timer may just have moved it to one); set it up, then
	// move it to its running state with transition.Persisted.Walk: a
	// not-started state may be several moves from it (Teraslice's
	// pending is three), and Fire only makes one.
	DecisionStart Decision = iota + 1
	// DecisionResume: carry on in Verdict.To as the execution's new
	// owner, after a relocation (To is the state it was relocated from),
	// within the failover allowance after a crash (To is the state it
	// had), or where a timer moved it (a retry resubmitted).
	DecisionResume
	// DecisionStop: the execution was being stopped when its controller
	// went away, or a timer stops it. To is the stopping state (finish
	// the shutdown, then write the stop's end) or, past the stopping
	// deadline, its end.
	DecisionStop
	// DecisionFail: the execution cannot go on; the roles' Failed state
	// (or the terminal state a timer or an exhausted budget names) is
	// written with the reason. Do not run it.
	DecisionFail
	// DecisionRefuse: the execution is over (a terminal state). Write
	// nothing, do not run; Verdict.Err says why.
	DecisionRefuse
	// DecisionWait: do not run the execution yet. Parked (a suspended
	// job): an outside authority moves it on (a user's resume); watch its
	// record, or let it go and exit 0. Not-started with a backoff running
	// (Verdict.Until): start it once that time has come (a timer moves it
	// on; Decider.Advance or the Reaper make the move).
	DecisionWait
	// DecisionFinish: the work was over when its controller went away
	// (a finishing state), or a timer ended it in a terminal state that
	// is no failure: To, the end, is written. Do not run the work again.
	DecisionFinish

	lastDecision = DecisionFinish
)

func (d Decision) String() string {
	switch d {
	case 0:
		return "none"
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
	case DecisionWait:
		return "wait"
	case DecisionFinish:
		return "finish"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Verdict is the outcome of [Startup].
type Verdict[S comparable] struct {
	Decision Decision
	From     S                 // the state found
	To       S                 // the state to write (From for DecisionStart and DecisionRefuse)
	Reason   string            // for people and for the record
	Meta     map[string]string // metadata to write with it (the failover count)
	Err      error             // for DecisionRefuse: matches ErrTerminalStatus
	// Until is, for a DecisionWait, when a timer ends the wait (a
	// budget's backoff, [Budget]); zero when the execution waits for an
	// outside authority (a parked one's resume).
	Until time.Time
	// Failovers is, when the verdict counts an unexpected restart of a
	// controller, the unexpected restarts counted (within the window),
	// this one included, and FailoverAllowance the allowance they are
	// counted against ([Policy].Failovers): more than it allows is
	// DecisionFail. Both are zero for any other verdict.
	Failovers         int
	FailoverAllowance Allowance
	// RerunOf is the id of the execution this one reruns ([Rerun]), ""
	// if it is not a rerun. A rerun that starts runs in Teraslice's
	// recovering status after its setup (state.Recovering, not Running),
	// re-processing what the old execution left unfinished.
	RerunOf string
}

// ErrTerminalStatus: the execution is already over.
var ErrTerminalStatus = errors.New("execution is in a terminal status")

// Startup decides what a controller starting for the execution in rec
// does, by the role of the state it finds (see [Roles]). It is a pure
// function of the record, the roles and the policy; [Decider.Start]
// writes its verdict. The rules:
//
//   - A terminal state: Refuse ("invalid state: terminal", as Teraslice
//     says), writing nothing.
//   - An exhausted budget ([Budget]) in the state its counted moves
//     enter: its end, with the reason.
//   - A not-started state: Start; but Wait while a budget's backoff runs
//     (Verdict.Until), and past it the timer's move. The state's plain
//     timers are for executions nobody picks up: this controller does.
//   - A finishing state: End, writing the end the roles name for it.
//   - A state with a timer that is due ([Roles.Due]): the timer's move,
//     and the decision its state calls for (Fail for a failure, Stop for
//     a stop's end or a drain, End for another terminal state, Start,
//     Wait, or Resume in a running state).
//   - A parked state: Wait.
//   - Relocating: Resume, back to the running state it was relocated
//     from (a paused execution comes back paused), or to the roles'
//     restart state when the record does not say.
//   - Stopping: Stop, finishing the drain (then its end is written).
//   - A running state found by a manager ([Policy].Manager): Resume,
//     counting no failover (the previous manager went; the work did not).
//   - A running state: the previous controller died without being asked
//     (OOM kill, node loss). Resume in that state only if the platform
//     restarts controllers, the work is restartable and the failovers
//     the policy allows are not spent; otherwise Fail with the reason.
//     Never "start again and leave the status as it is": that is how a
//     crash becomes a crash loop.
//
// now is the time of the decision: timers, budgets and failovers are
// counted to it. The error is for input no decision can be made on: nil
// roles, an invalid policy ([ErrInvalidPolicy]), a record of another
// table ([ErrForeignStatus]: a status the table does not know, or a
// relocation back to one), or one whose counts, own limits or own
// durations do not read ([storage.ErrInvalidRecord]).
func Startup[S comparable](roles *Roles[S], rec storage.Record, p Policy, now time.Time) (Verdict[S], error) {
	return startup(roles, rec, policy[S]{Policy: p}.at(now))
}

func startup[S comparable](roles *Roles[S], rec storage.Record, p policy[S]) (Verdict[S], error) {
	v, err := decideStartup(roles, rec, p, false)
	if err != nil {
		return v, err
	}
	// The work has answered: record what it said, for operators and for
	// the next controller that cannot ask it.
	return withWork(v, rec, p), nil
}

// decideStartup is [Startup]'s rules; taking back is a controller taking
// back an execution whose record still carries its own claim (see
// [Decider.Start]): nothing crashed, so a running state resumes without
// counting a restart.
func decideStartup[S comparable](roles *Roles[S], rec storage.Record, p policy[S], takingBack bool) (Verdict[S], error) {
	p, err := p.withDefaults(roles)
	if err != nil {
		return Verdict[S]{}, err
	}
	t := roles.table
	cur, err := roles.StateOf(rec)
	if err != nil {
		return Verdict[S]{}, err
	}
	role, _ := roles.Role(cur)
	v := Verdict[S]{From: cur, To: cur}
	v.RerunOf, _ = RerunOf(rec)
	switch role {
	case RoleTerminal:
		v.Decision = DecisionRefuse
		v.Reason = fmt.Sprintf("execution %s was starting in %s status (invalid state: terminal)", rec.ID, rec.Status)
		v.Err = fmt.Errorf("recovery: %s: %w", v.Reason, ErrTerminalStatus)
		return v, nil
	case RoleNotStarted:
		// A not-started state's plain timers are for executions nobody
		// picks up, and this controller is picking it up; a budget's
		// backoff is waited out.
		d, ok, err := roles.nextDue(rec, cur, p.now, false)
		if err != nil {
			return v, err
		}
		switch {
		case ok && d.Due.After(p.now):
			v.Decision, v.Until = DecisionWait, d.Due
			v.Reason = fmt.Sprintf("controller started for %s execution: not due before %s", rec.Status, d.Due.Format(time.RFC3339))
			return v, nil
		case ok:
			return roles.enforce(v, d, p.now), nil
		}
		v.Decision = DecisionStart
		v.Reason = fmt.Sprintf("controller started for %s execution", rec.Status)
		return v, nil
	case RoleFinishing:
		v.Decision = DecisionFinish
		v.To, _ = roles.End(cur)
		to, _ := t.Name(v.To)
		v.Reason = fmt.Sprintf("controller restarted in %s: the work was over, so its end, %s, is written", rec.Status, to)
		return v, nil
	}
	d, ok, err := roles.nextDue(rec, cur, p.now, true)
	if err != nil {
		return v, err
	}
	if ok && !d.Due.After(p.now) {
		return roles.enforce(v, d, p.now), nil
	}
	switch role {
	case RoleParked:
		v.Decision = DecisionWait
		v.Reason = fmt.Sprintf("controller started for %s execution: parked, it waits to be resumed", rec.Status)
		if ok {
			v.Until = d.Due
			v.Reason = fmt.Sprintf("controller started for %s execution: parked until %s, when a timer moves it on to %v", rec.Status, d.Due.Format(time.RFC3339), d.To)
		}
		return v, nil
	case RoleRelocating:
		v.Decision = DecisionResume
		back, err := t.Parse(rec.Previous)
		if rec.Previous == "" || err != nil || !t.IsReturn(cur, back) { // "" is no previous, even where it is an alias
			v.To, _ = roles.End(cur)
			restart, _ := t.Name(v.To)
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
	if p.Manager {
		v.Decision = DecisionResume
		v.Reason = fmt.Sprintf("manager took over the execution in %s status: its work does not run in a manager's process; no failover counted", rec.Status)
		return v, nil
	}
	if takingBack {
		v.Decision = DecisionResume
		v.Reason = fmt.Sprintf("controller took back its execution in %s status: its ownership had ended and no other controller took it over; no restart counted", rec.Status)
		return v, nil
	}
	return unexpectedRestart(roles, rec, p, v), nil
}

// unexpectedRestart decides on a running state found on startup.
func unexpectedRestart[S comparable](roles *Roles[S], rec storage.Record, p policy[S], v Verdict[S]) Verdict[S] {
	fail := func(reason string) Verdict[S] {
		v.Decision, v.To = DecisionFail, roles.failed
		v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status (OOM kill or node loss?): %s", rec.Status, reason)
		if v.Meta == nil {
			v.Meta = map[string]string{}
		}
		v.Meta[MetaFailure] = v.Reason
		return v
	}
	if !p.Platform.restarts() {
		return fail(fmt.Sprintf("the platform (%s) does not restart controllers", p.Platform.name()))
	}
	if ok, why := restartability(p.Work, rec); !ok {
		return fail(why)
	}
	allowed := p.Failovers
	var cutoff time.Time
	if allowed.Window > 0 && !allowed.Unlimited {
		cutoff = p.now.Add(-allowed.Window)
	}
	counted, err := FailoverCount(rec)
	if err != nil {
		return fail("the failover count is unreadable: " + err.Error())
	}
	if !cutoff.IsZero() {
		counted = counted.After(cutoff) // out of the window: they count for nothing any more
	}
	counted = counted.Add(p.now)
	n := counted.Since(cutoff)
	v.Meta = map[string]string{MetaFailovers: counted.String()}
	v.Failovers, v.FailoverAllowance = n, allowed
	if !allowed.Unlimited && n > allowed.Count {
		return fail(fmt.Sprintf("failovers spent: %d unexpected restarts, %s allowed", n, allowed))
	}
	v.Decision = DecisionResume
	v.Reason = fmt.Sprintf("controller restarted unexpectedly in %s status; resuming (unexpected restart %d, %s allowed)",
		rec.Status, n, allowed)
	return v
}

// enforce is the verdict of a start that finds d due: d's move, and what
// the controller does in the state it moves to.
func (r *Roles[S]) enforce(v Verdict[S], d due[S], now time.Time) Verdict[S] {
	u := d.update(now)
	v.To, v.Reason, v.Meta = u.To, u.Reason, u.Meta
	switch role := r.role[d.To]; {
	case d.failure:
		v.Decision = DecisionFail
	case r.stopEnd(d.To) || role == RoleStopping:
		v.Decision = DecisionStop
	case role == RoleTerminal:
		v.Decision = DecisionFinish
	case role == RoleNotStarted:
		v.Decision = DecisionStart
	case role == RoleParked:
		v.Decision = DecisionWait
	default: // running: a timer's Then is never relocating or finishing
		v.Decision = DecisionResume
	}
	return v
}

func since(rec storage.Record) time.Time {
	if rec.Since.IsZero() {
		return rec.UpdatedAt
	}
	return rec.Since
}

// MetaStartup is the record metadata key under which [Decider.Start]
// leaves the decision it wrote, in the same write: the decision, "@", the
// revision of the record it was decided on and, for an unexpected
// restart, a space and the failovers counted ("resume@41 2"). It is how a start retried by the controller that
// made it returns the verdict already written, and tells operators how
// the current controller started.
const MetaStartup = "execfsm.startup"

func applyStartup[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], lease storage.Lease, p policy[S]) (Verdict[S], error) {
	if exec == nil {
		return Verdict[S]{}, errors.New("recovery: Start: nil execution")
	}
	if _, err := p.withDefaults(roles); err != nil {
		return Verdict[S]{}, err
	}
	if err := roles.fits(exec.Table()); err != nil {
		return Verdict[S]{}, err
	}
	found, rec, err := exec.Load(ctx)
	if err != nil {
		return Verdict[S]{}, err
	}
	mine := exec.Claim()
	carries := func(rec storage.Record) bool { return mine.Owner != "" && rec.Claim() == mine }
	written, replayable := writtenVerdict(roles, rec, mine, p)
	switch {
	case exec.Owns(rec) && replayable && found == written.To:
		return written, nil // a retry by the live holder
	case exec.Owns(rec):
		// The live holder took the execution over without a startup
		// (Persisted.Acquire), or its start's verdict is stale (the
		// record moved on since: it set up and ran, or it was stopped):
		// decide again as taking back, under its claim.
		return applyUnderClaim(ctx, roles, exec, p)
	case carries(rec) && replayable:
		if role, _ := roles.Role(found); role == RoleTerminal {
			return written, nil // its own start ended the execution
		}
	}
	var verdict Verdict[S]
	_, _, err = exec.Acquire(ctx, lease, startupDecider(roles, p, carries, &verdict))
	if err != nil {
		if verdict.Decision == DecisionRefuse {
			p.Observer.startup(verdict, err)
			return verdict, err
		}
		// Decided, not written: a restart counts only once it is.
		verdict.Failovers, verdict.FailoverAllowance = 0, Allowance{}
		err = fmt.Errorf("recovery: startup of %s: %w", rec.ID, err)
		p.Observer.startup(verdict, err)
		unwritten := Verdict[S]{From: found}
		var held *storage.HeldError
		if errors.As(err, &held) && held.Status != "" {
			unwritten.From, _ = roles.table.Parse(held.Status)
		}
		return unwritten, err
	}
	p.Observer.startup(verdict, nil)
	return verdict, nil
}

// applyUnderClaim decides for exec's live holder, which took the
// execution over without a startup, and writes the verdict under its
// claim.
func applyUnderClaim[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], p policy[S]) (Verdict[S], error) {
	var verdict Verdict[S]
	takingBack := func(storage.Record) bool { return true }
	_, _, err := exec.Apply(ctx, startupDecider(roles, p, takingBack, &verdict))
	p.Observer.startup(verdict, err)
	return verdict, err
}

// startupDecider is the decide function of a start's write: it decides
// on the record as the write finds it (taking back, when takingBack says
// so, see decideStartup), leaves the verdict in verdict, and refuses a
// terminal record with the verdict's error.
func startupDecider[S comparable](roles *Roles[S], p policy[S], takingBack func(storage.Record) bool, verdict *Verdict[S]) func(S, storage.Record) (transition.Update[S], error) {
	return func(_ S, rec storage.Record) (transition.Update[S], error) {
		v, err := decideStartup(roles, rec, p, takingBack(rec))
		if err != nil {
			return transition.Update[S]{}, err
		}
		v = withWork(v, rec, p)
		*verdict = v
		if v.Decision == DecisionRefuse {
			return transition.Update[S]{}, v.Err
		}
		return startupUpdate(v, rec), nil
	}
}

// withWork adds to v what the policy's Work says of its restartability,
// as [Startup] does.
func withWork[S comparable](v Verdict[S], rec storage.Record, p policy[S]) Verdict[S] {
	if v.Decision == DecisionRefuse || !askable(p.Work) {
		return v
	}
	if flag := strconv.FormatBool(p.Work.IsRestartable()); rec.Meta[MetaRelocatable] != flag {
		v.Meta = maps.Clone(v.Meta)
		if v.Meta == nil {
			v.Meta = map[string]string{}
		}
		v.Meta[MetaRelocatable] = flag
	}
	return v
}

// startupUpdate is the write of verdict v on rec, with [MetaStartup].
func startupUpdate[S comparable](v Verdict[S], rec storage.Record) transition.Update[S] {
	meta := maps.Clone(v.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaStartup] = formatStartup(v, rec.Revision)
	return transition.Update[S]{To: v.To, Reason: v.Reason, Meta: meta}
}

func formatStartup[S comparable](v Verdict[S], revision uint64) string {
	out := v.Decision.String() + "@" + strconv.FormatUint(revision, 10)
	if v.Failovers > 0 {
		out += " " + strconv.Itoa(v.Failovers)
	}
	return out
}

// writtenVerdict returns the verdict the start under claim wrote on rec,
// if rec still tells it: [MetaStartup], and the audit entry claim wrote
// it with.
func writtenVerdict[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim, p policy[S]) (Verdict[S], bool) {
	if claim.Owner == "" || rec.Claim() != claim {
		return Verdict[S]{}, false
	}
	value := rec.Meta[MetaStartup]
	head, counts, _ := strings.Cut(value, " ")
	name, rev, ok := strings.Cut(head, "@")
	revision, err := strconv.ParseUint(rev, 10, 64)
	if !ok || err != nil {
		return Verdict[S]{}, false
	}
	var d Decision
	for k := DecisionStart; k <= lastDecision; k++ {
		if k.String() == name {
			d = k
		}
	}
	var e storage.Entry
	found := false
	for _, entry := range rec.History.All() {
		if entry.Owner == claim.Owner && entry.Epoch == claim.Epoch && entry.Revision == revision {
			e, found = entry, true
		}
	}
	from, errFrom := roles.table.Parse(e.From)
	to, errTo := roles.table.Parse(e.To)
	if d == 0 || !found || errFrom != nil || errTo != nil {
		return Verdict[S]{}, false
	}
	v := Verdict[S]{Decision: d, From: from, To: to, Reason: e.Reason}
	v.RerunOf, _ = RerunOf(rec)
	// "2", or "2/3" as an earlier build wrote it: the failovers counted.
	// The allowance is this controller's, which made the start.
	n, _, _ := strings.Cut(counts, "/")
	if failovers, err := strconv.Atoi(n); err == nil && failovers > 0 {
		v.Failovers, v.FailoverAllowance = failovers, p.Failovers
	}
	if role, _ := roles.Role(to); d == DecisionWait && (role == RoleNotStarted || role == RoleParked) {
		if due, ok, err := roles.nextDue(rec, to, p.now, role == RoleParked); err == nil && ok && due.Due.After(p.now) {
			v.Until = due.Due
		}
	}
	return v, true
}
