package fleettest

import (
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
)

// The built-in invariants, one method each, named after the constant
// (fleet.go) a violation reports; world.go calls each where it holds:
// on every write that landed (AuditTrail, OneOwnerWrites), at a pod's
// exit (JobEndsWithExecution), after a SIGTERM (DrainRelocates), at the
// master's stop (StopNeverLost), and after every step (NoCrashLoop,
// RestartsAreCrashes, StopNeverLost, NothingStranded). ExpectedErrors is
// w.unexpected's and a panic's. The state-after-a-step checks return
// whether they failed, so that one violation is reported per step.

// checkAuditTrail: the write just made by actor has its audit entry,
// saying who, from what to what, at which revision and time, and why.
func (w *world[S]) checkAuditTrail(actor string, before, after storage.Record) {
	e, hasEntry := after.History.Last()
	switch {
	case !hasEntry || e.Actor != actor:
		w.fail(InvariantAuditTrail, "%s wrote %s, but the last audit entry names %q", actor, after.ID, e.Actor)
	case e.From != before.Status || e.To != after.Status || e.Revision != before.Revision:
		w.fail(InvariantAuditTrail, "%s wrote %s (%s → %s at revision %d), but the entry says %s → %s at revision %d",
			actor, after.ID, before.Status, after.Status, before.Revision, e.From, e.To, e.Revision)
	case !e.At.Equal(w.now):
		w.fail(InvariantAuditTrail, "%s wrote %s at %v, but the entry says %v", actor, after.ID, w.now, e.At)
	case e.From != e.To && e.Reason == "":
		w.fail(InvariantAuditTrail, "%s moved %s %s → %s with no reason", actor, after.ID, e.From, e.To)
	}
}

// checkOneOwnerWrites: a pod's write lands only through the ownership
// that holds the record now (claim, nil for a write as an outside
// authority).
func (w *world[S]) checkOneOwnerWrites(actor string, before, after storage.Record, claim *storage.Claim) {
	held, ok, _ := w.mem.Held(w.ctx, after.ID)
	switch {
	case claim == nil:
		w.fail(InvariantOneOwnerWrites, "%s wrote %s (%s → %s) as an outside authority, holding no ownership", actor, after.ID, before.Status, after.Status)
	case !ok:
		w.fail(InvariantOneOwnerWrites, "%s wrote %s (%s → %s) holding no ownership (nobody holds it)", actor, after.ID, before.Status, after.Status)
	case *claim != held || held != after.Claim():
		w.fail(InvariantOneOwnerWrites, "%s wrote %s (%s → %s) at epoch %d while %s@%d holds it", actor, after.ID, before.Status, after.Status, claim.Epoch, held.Owner, held.Epoch)
	}
}

// checkJobEndsWithExecution: on a platform that restarts only after a
// failure, a pod exits 0 only once its execution has ended (or will be
// placed again): a Job that completed replaces nothing.
func (w *world[S]) checkJobEndsWithExecution(p *pod[S], why string, rec storage.Record, cur S, role recovery.Role) {
	if w.s.fleet.Policy.Platform.Restart == recovery.RestartOnFailure && role != 0 && !w.ended(cur) && !w.s.requeued[cur] {
		w.fail(InvariantJobEndsWithExecution, "%s exits 0 (%s) while %s is %s: its Job completes, and nothing replaces it", p.name, why, p.ex.id, rec.Status)
	}
}

// checkDrainRelocates: a SIGTERM to the owner of running, restartable
// work, on a platform that drains, never ends the execution (it
// relocates it), unless a stop was asked.
func (w *world[S]) checkDrainRelocates(p *pod[S], owned bool, rec storage.Record, cur S, role recovery.Role) {
	after := w.record(p.ex)
	if now, _ := w.status(after); owned && role == recovery.RoleRunning && !w.ended(cur) && w.ended(now) && !p.ex.stopAsked &&
		w.s.fleet.Policy.Platform.Drains && w.s.restartable {
		w.fail(InvariantDrainRelocates, "a SIGTERM to %s, driving restartable work in %s, ended %s in %s",
			p.name, rec.Status, p.ex.id, after.Status)
	}
}

// stopRefused is StopNeverLost at the master's stop: the table refused
// a stop of a running or relocating execution.
func (w *world[S]) stopRefused(ex *execution[S], rec storage.Record, err error) {
	w.fail(InvariantStopNeverLost, "the master cannot stop %s in %s: %v", ex.id, rec.Status, err)
}

// checkNoCrashLoop: an execution resumes no more unexpected restarts
// within the window than the policy allows.
func (w *world[S]) checkNoCrashLoop(ex *execution[S]) bool {
	recent := len(w.recentResumes(ex))
	if failovers := w.s.failovers; !failovers.Unlimited && recent > failovers.Count {
		w.fail(InvariantNoCrashLoop, "%s resumed after %d unexpected restarts; the policy allows %s", ex.id, recent, failovers)
		return true
	}
	return false
}

// checkRestartsAreCrashes: no more unexpected restarts are counted than
// controllers died.
func (w *world[S]) checkRestartsAreCrashes(ex *execution[S]) bool {
	if ex.counted > ex.deaths {
		w.fail(InvariantRestartsAreCrashes, "%d unexpected restarts of %s counted, but %d of its controllers died", ex.counted, ex.id, ex.deaths)
		return true
	}
	return false
}

// checkStopNeverLost: an execution asked to stop is stopping or has
// ended.
func (w *world[S]) checkStopNeverLost(ex *execution[S], rec storage.Record, cur S, role recovery.Role) bool {
	if ex.stopAsked && role != recovery.RoleStopping && !w.ended(cur) {
		w.fail(InvariantStopNeverLost, "%s was asked to stop, and is %s", ex.id, rec.Status)
		return true
	}
	return false
}

// checkNothingStranded: something will move every live execution on (a
// controller, its platform, a deadline).
func (w *world[S]) checkNothingStranded(ex *execution[S], rec storage.Record, cur S, role recovery.Role) bool {
	if w.stranded(ex, rec, cur, role) {
		w.fail(InvariantNothingStranded, "%s is %s, and nothing will move it on: no controller holds it or will start, its platform makes no more, and %s has no deadline", ex.id, rec.Status, rec.Status)
		return true
	}
	return false
}
