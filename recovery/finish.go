package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/transition"
)

// Ending is what a controller knows of its work when the work loop
// returns, because the work ended or because the controller is shutting
// down: the input of [End].
type Ending struct {
	// Finished: the work ran to its end (Teraslice: the slicers are done
	// and every dispatched slice came back). False when the controller
	// is shutting down before that.
	Finished bool
	// Failures counts the units of work that did not succeed: slices in
	// error, or dispatched and never answered. Any failure fails a
	// finished execution. It must not be negative.
	Failures int
	// Err is an error that ended the work (a setup error, the slicer's
	// error). It fails the execution, whatever else the Ending says,
	// unless Retry says the failure is retryable.
	Err error
	// Retry is "" or a counter of the table: the caller classifies the
	// failure (Err, or Failures of finished work) as retryable (an exit
	// code in a retryable range, a disruption), so instead of failing,
	// the execution takes the move from its state that Retry counts
	// (Running → Restarting counts "failures"), spending that budget.
	// [Decider.End] then moves an exhausted budget on to its end at
	// once. Without a failure it says nothing.
	Retry string
}

// ErrInvalidEnding is matched by the error [End] returns for an
// [Ending] no decision can be made on (a negative failure count).
var ErrInvalidEnding = errors.New("invalid ending")

// EndKind is what [End] decided to write.
type EndKind uint8

// The kinds of end.
const (
	// EndWrite: write End.To with End.Reason (and the caller's
	// metadata: the work's statistics).
	EndWrite EndKind = iota + 1
	// EndKeep: the execution has already ended (a reaper stopped it
	// meanwhile, the controller failed it earlier): keep its status,
	// write only the caller's metadata.
	EndKeep
	// EndLeave: the execution is not this controller's to end: another
	// controller owns it, or it is relocating to one, which will
	// finish it. Write nothing, and exit with Outcome.ExitCode.
	EndLeave
)

func (k EndKind) String() string {
	switch k {
	case EndWrite:
		return "write"
	case EndKeep:
		return "keep"
	case EndLeave:
		return "leave"
	}
	return fmt.Sprintf("EndKind(%d)", uint8(k))
}

// Outcome is the outcome of [End]. A controller exits with Outcome.ExitCode:
// 0 after an end it wrote or kept, since the execution's outcome is in
// its record, and on a Kubernetes Job a non-zero exit would only start a
// replacement that refuses to run; after a Leave on a platform that
// restarts controllers, the relocation's exit code, since the execution
// has not ended and the controller that finishes it must still come
// (see [ActionLeave]).
type Outcome[S comparable] struct {
	Kind   EndKind
	From   S      // the state found
	To     S      // the state to write; From for EndKeep and EndLeave
	Reason string // for people and for the record
	// ExitCode is the status the controller should exit with. Set by
	// [Decider.End], from its [Policy]; the pure [End] has no
	// policy and leaves it 0.
	ExitCode int
	// ReleaseErr is the error of releasing the ownership after
	// [Decider.End] wrote (or left a record of another table), if it
	// failed.
	ReleaseErr error

	foreign bool // a Leave because the record is of another table
	retried bool // the move is a retry (Ending.Retry)
	letGo   bool // a Leave of this controller's own execution: released
}

// End decides the final status of the execution in rec for the
// controller holding claim, whose work ended as ending says, by the role
// of the state it finds (see [Roles]; the roles need [RolesBuilder.Ends]).
// It is a pure function; [Decider.End] writes its outcome. The rules,
// which are Teraslice's execution controller's on exit:
//
//   - The record is owned by another controller, or by this owner at
//     another epoch, or is relocating: Leave.
//   - A record of another table ([ErrForeignStatus]): Leave, exiting 0,
//     as [Terminate] does; From and To are then the zero state.
//   - A terminal state: Keep (only the metadata is written; Teraslice
//     would write completed over stopped, this never changes an ended
//     execution). A parked state: Keep (it waits to be resumed).
//   - A finishing state: the end the roles name for it, whatever the
//     ending says (the work had ended already).
//   - ending.Err: the Failed state, with the error as the reason; with
//     Retry, the move from the state found that Retry counts instead
//     (a retry, spending that budget).
//   - Finished with failures: Failed, saying how many (with Retry, the
//     retry).
//   - Finished: the Ends' completed state, from stopping too (the work
//     finished before the stop did).
//   - Shut down before finishing: the drain's end while stopping (the
//     stop asked for it), the Ends' terminated state otherwise; in a
//     not-started state that cannot move there (nothing ran yet: a job
//     still queued), Leave: the execution is let go as it is, released,
//     and the exit code is the leave's, for the next controller to start.
//
// A move the table does not allow (work that reports having finished
// while its record is still initializing) is an error matching
// [transition.ErrNotAllowed]; nil roles, roles without Ends where the end
// is completed or terminated ([ErrInvalidRoles]) and an invalid ending
// ([ErrInvalidEnding]: a negative failure count, a Retry no move from
// the state found counts) are errors too. Work that earned another end
// than these rules give says so with [EndAs].
func End[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim, ending Ending) (Outcome[S], error) {
	if err := checkFinish(roles, ending); err != nil {
		return Outcome[S]{}, err
	}
	end, role, done := finishing(roles, rec, claim)
	if done {
		return end, nil
	}
	cur := end.From
	failed := ending.Err != nil || (ending.Finished && ending.Failures > 0)
	switch {
	case failed && ending.Retry != "":
		to, ok := roles.countedFrom(cur, ending.Retry)
		if !ok {
			return Outcome[S]{}, fmt.Errorf("recovery: %w: no move from %s counts %.64q, so the failure cannot be retried", ErrInvalidEnding, rec.Status, ending.Retry)
		}
		end.To, end.Reason, end.retried = to, "retried ("+ending.Retry+"): "+failureReason(ending), true
	case failed:
		end.To, end.Reason = roles.failed, failureReason(ending)
	case ending.Finished:
		if !roles.hasEnds {
			return Outcome[S]{}, errNoEnds
		}
		end.To, end.Reason = roles.completed, "the work finished"
	case role == RoleStopping:
		end.To, _ = roles.End(cur)
		end.Reason = "stopped on request"
	case role == RoleNotStarted && (!roles.hasEnds || !roles.table.Allowed(cur, roles.terminated)):
		end.Kind, end.letGo = EndLeave, true
		end.Reason = fmt.Sprintf("shut down in %s status, before anything ran: let go as it is, for the next controller to start", rec.Status)
		return end, nil
	default:
		if !roles.hasEnds {
			return Outcome[S]{}, errNoEnds
		}
		end.To, end.Reason = roles.terminated, "shut down before the work could finish"
	}
	return end, allowedEnd(roles, rec, end)
}

// EndAs decides as [End] does, but the caller names the end the
// work earned: to, any state the table allows from the state found (a
// job whose failed pods it tolerates completes; a drain ends where the
// scheduler says), with reason. Leave and Keep are decided as End
// decides them, and a finishing state still writes its own end; anything
// else writes to, or is an error matching [transition.ErrNotAllowed] when
// the table has no such move. Ends are not needed.
func EndAs[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim, to S, reason string) (Outcome[S], error) {
	if roles == nil {
		return Outcome[S]{}, checkFinish(roles, Ending{})
	}
	end, _, done := finishing(roles, rec, claim)
	if done {
		return end, nil
	}
	if !roles.table.Has(to) {
		return Outcome[S]{}, fmt.Errorf("recovery: EndAs: %w: %v is not a state of the table", transition.ErrNotAllowed, to)
	}
	end.To, end.Reason = to, reason
	if end.Reason == "" {
		name, _ := roles.table.Name(to)
		end.Reason = "the work ended in " + name
	}
	return end, allowedEnd(roles, rec, end)
}

// finishing decides what End and EndAs decide whatever the work
// says: a record of another table, another owner's, relocating,
// terminal, parked or finishing. done is false when it is the caller's
// to decide; end then has From and To set to the state found.
func finishing[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim) (end Outcome[S], role Role, done bool) {
	cur, err := roles.StateOf(rec)
	if err != nil {
		return endForeign[S](err), 0, true
	}
	end = Outcome[S]{Kind: EndWrite, From: cur, To: cur}
	if why, ok := ownedByAnother(rec, claim); ok {
		end.Kind, end.Reason = EndLeave, why
		return end, 0, true
	}
	role, _ = roles.Role(cur)
	switch role {
	case RoleRelocating:
		end.Kind, end.Reason = EndLeave, "execution is relocating: the controller that takes it over finishes it"
	case RoleTerminal:
		end.Kind, end.Reason = EndKeep, fmt.Sprintf("execution has already ended in %s status", rec.Status)
	case RoleParked:
		end.Kind, end.Reason = EndKeep, fmt.Sprintf("execution is parked in %s status: it waits to be resumed", rec.Status)
	case RoleFinishing:
		end.To, _ = roles.End(cur)
		end.Reason = fmt.Sprintf("the work was over in %s status", rec.Status)
	default:
		return end, role, false
	}
	return end, role, true
}

// failureReason says why ending is a failure.
func failureReason(ending Ending) string {
	if ending.Err != nil {
		return reasonOf(ending.Err)
	}
	return fmt.Sprintf("the work finished with %d failures", ending.Failures)
}

// allowedEnd refuses an end the table has no move for.
func allowedEnd[S comparable](roles *Roles[S], rec storage.Record, end Outcome[S]) error {
	if roles.table.Allowed(end.From, end.To) {
		return nil
	}
	to, _ := roles.table.Name(end.To)
	return fmt.Errorf("recovery: execution %s: the work ended in %s status, which cannot move to %s: %w",
		quote.Limited(rec.ID), rec.Status, to, transition.ErrNotAllowed)
}

// countedFrom returns the state the move from s that counter counts
// enters, and false if no move from s counts it (or more than one does:
// the retry would not know where to go, which Build does not check).
func (r *Roles[S]) countedFrom(s S, counter string) (S, bool) {
	var to S
	found := 0
	for _, next := range r.table.Next(s) {
		if slices.Contains(r.table.Counters(s, next), counter) {
			to, found = next, found+1
		}
	}
	return to, found == 1
}

// errNoEnds is End's error for work that ended in a running or
// not-started state of roles without Ends: nothing says what it writes.
var errNoEnds = fmt.Errorf("recovery: %w: End of work in a running state needs roles with Ends (what finished and shut-down work write)", ErrInvalidRoles)

// checkFinish refuses roles and an ending no end can be decided with.
func checkFinish[S comparable](roles *Roles[S], ending Ending) error {
	switch {
	case roles == nil:
		return fmt.Errorf("recovery: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidRoles)
	case ending.Failures < 0:
		return fmt.Errorf("recovery: %w: Failures %d is negative", ErrInvalidEnding, ending.Failures)
	}
	return nil
}

// reasonOf is err's text, cut to what a record's reason holds (a whole
// stack trace fits, as in Teraslice's _failureReason).
func reasonOf(err error) string {
	s := err.Error()
	if len(s) <= storage.MaxReasonLen {
		return s
	}
	const cut = "… (cut)"
	s = s[:storage.MaxReasonLen-len(cut)]
	for !utf8.ValidString(s) { // never split a character
		s = s[:len(s)-1]
	}
	return s + cut
}

// applyFinish is [Decider.End] and [Decider.EndAs]: decide is
// End or EndAs on the record found.
func applyFinish[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], p policy[S], meta map[string]string, decide func(storage.Record, storage.Claim) (Outcome[S], error)) (Outcome[S], error) {
	if exec == nil {
		return Outcome[S]{}, errors.New("recovery: End: nil execution")
	}
	if err := roles.fits(exec.Table()); err != nil {
		return Outcome[S]{}, err
	}
	if why, ok := holdsNothing(exec); ok {
		return Outcome[S]{Kind: EndLeave, Reason: why, ExitCode: p.LeaveExitCode()}, nil
	}
	var end Outcome[S]
	_, _, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		e, err := decide(rec, exec.Claim())
		if err != nil {
			return transition.Update[S]{}, err
		}
		end = e
		switch e.Kind {
		case EndWrite:
			return transition.Update[S]{To: e.To, Reason: e.Reason, Meta: meta}, nil
		case EndKeep:
			return transition.Update[S]{To: cur, Meta: meta}, nil
		}
		return transition.To(cur), nil // leave: write nothing
	})
	if why, ok := fencedReason(err); ok {
		return Outcome[S]{Kind: EndLeave, From: end.From, To: end.From, Reason: why, ExitCode: p.LeaveExitCode()}, nil
	}
	if foreign(err) { // transition.Persisted refused the status before End saw it
		end, err = endForeign[S](err), nil
	}
	if errors.Is(err, transition.ErrGuard) {
		return Outcome[S]{}, fmt.Errorf("recovery: the end the work earned was vetoed by a guard of the table, and the execution stays where it was "+
			"(fix what the guard checks, or end the work otherwise: Ending.Err fails it, EndAs names another end): %w", err)
	}
	if err != nil {
		return Outcome[S]{}, err
	}
	if end.retried {
		// The retry spent its budget: one spent past the allowance ends
		// the execution now, not when the next controller looks.
		if err := exhaustNow(ctx, roles, exec, p, &end); err != nil {
			return end, err
		}
	}
	if end.retried && !roles.over(end.To) {
		// Retried, the execution goes on: a controller must come.
		end.ExitCode = p.LeaveExitCode()
	}
	switch {
	case end.foreign:
		end.ReleaseErr = release(ctx, exec)
	case end.Kind == EndLeave:
		end.ExitCode = p.LeaveExitCode()
		if end.letGo {
			end.ReleaseErr = release(ctx, exec)
		}
	default:
		end.ReleaseErr = release(ctx, exec)
	}
	return end, nil
}

// exhaustNow makes the move of a budget the retry in end exhausted, and
// says so in end.
func exhaustNow[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], p policy[S], end *Outcome[S]) error {
	var enforced Enforced[S]
	c, _, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		now := p.clock()
		d, ok, err := roles.nextDue(rec, cur, now, false)
		if err != nil || !ok || d.Cause != CauseBudget {
			return transition.To(cur), err
		}
		enforced = d.enforced(now)
		return d.update(now), nil
	})
	if err != nil {
		return err
	}
	if c.Changed() {
		end.To, end.Reason, end.retried = enforced.To, end.Reason+"; "+enforced.Reason, false
		p.Observer.enforce(enforced)
	}
	return nil
}

// endForeign is End's Leave for a record of another table, as
// leaveForeign is Terminate's.
func endForeign[S comparable](err error) Outcome[S] {
	return Outcome[S]{Kind: EndLeave, Reason: leaveForeign(err).Reason, foreign: true}
}
