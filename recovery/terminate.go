package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/transition"
)

// ActionKind is what SIGTERM means for a controller.
type ActionKind uint8

// The terminate actions.
const (
	// ActionShutdown: stop producing work, wait for workers, write the final
	// status (stopped, completed, terminated) and exit 0.
	ActionShutdown ActionKind = iota + 1
	// ActionRelocate: the platform is moving a healthy controller. The status
	// is now relocating; exit with Action.ExitCode without shutting the
	// execution down, so a new controller resumes it.
	ActionRelocate
	// ActionLeave: the execution is not this controller's: another
	// controller owns it now (this one was fenced), this one's ownership
	// ended, or it never took the execution over (SIGTERM before its
	// first start). Exit with Action.ExitCode without writing or shutting
	// anything down: on a platform that restarts controllers that is the
	// relocation's, so that another controller comes.
	ActionLeave
	// ActionHandOver: a manager ([Policy].Manager) is going; the
	// execution stays as it is, its ownership released (nothing else is
	// written) so that the next manager takes it over at once. Exit 0
	// once every execution is handed over: a Deployment replaces the pod
	// anyway, and systemd counts an exit 0 after SIGTERM as a clean stop
	// (143 would need SuccessExitStatus=143).
	ActionHandOver
)

func (k ActionKind) String() string {
	switch k {
	case ActionShutdown:
		return "shutdown"
	case ActionRelocate:
		return "relocate"
	case ActionLeave:
		return "leave"
	case ActionHandOver:
		return "handover"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is the outcome of [Terminate].
//
// ExitCode is the status the process should exit with so that its
// platform ([Policy].Platform) does the right thing next:
//
//   - KubernetesJob (Teraslice's kubernetesV2 execution controller): a
//     relocating controller exits non-zero (143 by default) or the pod
//     counts as the Job's success and nothing replaces it; the Job needs a
//     podFailurePolicy that ignores pods with the DisruptionTarget
//     condition or exit code 143, or relocations exhaust its backoffLimit
//     (kube.ControllerJob builds such a Job). Shutdown exits 0 and the
//     Job completes; so does a controller whose startup failed or refused
//     the execution: the outcome is in the record. Leave exits like a
//     relocation ([Policy.LeaveExitCode]): the execution has not ended,
//     and a Job that completed would replace nothing.
//   - KubernetesDeployment: the pod is replaced whatever it exits with.
//   - SystemdOnFailure (and Docker's or Nomad's on-failure policies): a
//     SIGTERM is a stop, which shuts down and exits 0; a crash is
//     restarted. SystemdAlways: any exit is restarted but a stop.
//   - Unmanaged: nothing restarts the controller; exit codes say only
//     how it went.
type Action struct {
	Kind     ActionKind
	Reason   string
	ExitCode int
	// CheckpointErr is the error of the checkpoint hook given to
	// [Decider.Terminate], if it failed. The relocation was recorded
	// anyway: shutting a healthy execution down because a flush failed
	// would lose more than the flush.
	CheckpointErr error
	// ReleaseErr is the error of releasing the ownership after writing
	// relocating (or leaving a record of another table), if it failed:
	// the successor then waits for the lease to expire instead of taking
	// over at once.
	ReleaseErr error

	foreign bool // a Leave because the record is of another table
}

// Terminate decides what a SIGTERM means for the controller holding claim
// on the execution in rec, by the role of its state (see [Roles]). It is
// a pure function; [Decider.Terminate] writes its outcome. The rules:
//
//   - The record is owned by another controller, or by this owner at
//     another epoch: Leave.
//   - A record of another table ([ErrForeignStatus]): Leave, exiting 0,
//     since a controller of this table restarted for it would leave it
//     too; a controller whose table knows its status drives it.
//   - Stopping: the cluster master asked; Shutdown.
//   - Relocating already (a second SIGTERM): Relocate again.
//   - A running state: if the platform drains controllers (its SIGTERM
//     moves a healthy one: [Platform].Drains), a relocating state returns
//     to it and the work is restartable, Relocate (to that relocating
//     state); otherwise Shutdown (Teraslice skips the shutdown even for
//     work that cannot be restarted, which then dies on restart). On a
//     platform whose SIGTERM is a stop (systemd), Shutdown.
//   - A not-started, parked, finishing or terminal state: Shutdown.
//
// A manager's ([Policy].Manager) SIGTERM hands every execution it holds
// over, whatever its state: HandOver.
func Terminate[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim, p Policy) (Action, error) {
	return terminate(roles, rec, claim, policy[S]{Policy: p})
}

func terminate[S comparable](roles *Roles[S], rec storage.Record, claim storage.Claim, p policy[S]) (Action, error) {
	p, err := p.withDefaults(roles)
	if err != nil {
		return Action{}, err
	}
	cur, err := roles.StateOf(rec)
	if err != nil {
		return leaveForeign(err), nil
	}
	if why, ok := ownedByAnother(rec, claim); ok {
		return Action{Kind: ActionLeave, Reason: why, ExitCode: p.LeaveExitCode()}, nil
	}
	if p.Manager {
		return Action{Kind: ActionHandOver, Reason: fmt.Sprintf("SIGTERM: the manager hands the execution over in %s status; it stays as it is", rec.Status)}, nil
	}
	shutdown := func(reason string) (Action, error) { return Action{Kind: ActionShutdown, Reason: reason}, nil }
	role, _ := roles.Role(cur)
	_, relocatable := roles.RelocatingFor(cur)
	switch {
	case role == RoleStopping:
		return shutdown("SIGTERM while stopping: the cluster master asked to stop")
	case role == RoleRelocating:
		return Action{Kind: ActionRelocate, Reason: "SIGTERM while relocating", ExitCode: p.Platform.relocateExitCode()}, nil
	case role == RoleNotStarted, role == RoleParked:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: nothing is running", rec.Status))
	case role == RoleFinishing:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the work is over, its end is written next", rec.Status))
	case role == RoleTerminal:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the execution is over", rec.Status))
	case !relocatable:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: no relocating state of the table returns to it", rec.Status))
	case !p.Platform.restarts():
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the platform (%s) does not restart controllers", rec.Status, p.Platform.name()))
	case !p.Platform.Drains:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: on %s a SIGTERM is a stop, not a drain", rec.Status, p.Platform.name()))
	}
	if ok, why := restartability(p.Work, rec); !ok {
		return shutdown(fmt.Sprintf("SIGTERM in %s status: %s", rec.Status, why))
	}
	return Action{Kind: ActionRelocate, ExitCode: p.Platform.relocateExitCode(),
		Reason: fmt.Sprintf("SIGTERM in %s status, not stopping: the platform is moving the controller", rec.Status)}, nil
}

func applyTerminate[S comparable](ctx context.Context, roles *Roles[S], exec *transition.Persisted[S], p policy[S], checkpoint func(context.Context) error) (Action, error) {
	if exec == nil {
		return Action{}, errors.New("recovery: Terminate: nil execution")
	}
	if _, err := p.withDefaults(roles); err != nil {
		return Action{}, err
	}
	if err := roles.fits(exec.Table()); err != nil {
		return Action{}, err
	}
	why, ok := holdsNothing(exec)
	if exec.Authority() {
		// A handle that never took the execution over is an outside
		// authority's to transition.Persisted; but only a controller is
		// sent SIGTERM, and one can get it before its first start: it
		// must not write relocating over the controller that holds the
		// execution, as the cluster master would.
		why, ok = "this controller never took the execution over", true
	}
	if ok {
		leave := Action{Kind: ActionLeave, Reason: why, ExitCode: p.LeaveExitCode()}
		p.Observer.terminate(leave, nil)
		return leave, nil
	}
	_, rec, err := exec.Load(ctx)
	if foreign(err) {
		leave := leaveForeign(err)
		leave.ReleaseErr = release(ctx, exec)
		p.Observer.terminate(leave, nil)
		return leave, nil
	}
	if err != nil {
		return Action{}, err
	}
	first, err := terminate(roles, rec, exec.Claim(), p)
	if err == nil && (first.foreign || first.Kind == ActionHandOver) {
		first.ReleaseErr = release(ctx, exec)
	}
	if err != nil || first.Kind != ActionRelocate {
		p.Observer.terminate(first, err)
		return first, err
	}
	var checkpointErr error
	if checkpoint != nil && !isRelocating(roles, rec) {
		checkpointErr = checkpoint(ctx)
	}
	var final Action
	_, _, err = exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		a, err := terminate(roles, rec, exec.Claim(), p)
		if err != nil {
			return transition.Update[S]{}, err
		}
		final = a
		if rel, ok := roles.RelocatingFor(cur); ok && a.Kind == ActionRelocate {
			return transition.To(rel).Because(a.Reason), nil
		}
		return transition.To(cur), nil // decided otherwise on the fresh record: write nothing
	})
	if why, ok := fencedReason(err); ok {
		leave := Action{Kind: ActionLeave, Reason: why, ExitCode: p.LeaveExitCode()}
		p.Observer.terminate(leave, nil)
		return leave, nil
	}
	if foreign(err) { // a newer table's write landed meanwhile
		final, err = leaveForeign(err), nil
	}
	if err != nil {
		p.Observer.terminate(final, err)
		return Action{}, err
	}
	if final.Kind == ActionRelocate || final.foreign {
		final.CheckpointErr = checkpointErr
		final.ReleaseErr = release(ctx, exec)
	}
	p.Observer.terminate(final, nil)
	return final, nil
}

// leaveForeign is the Leave of a controller whose table cannot decide on
// the record (err matches ErrForeignStatus or
// transition.ErrUnknownState). It exits 0: a controller of this table
// started in its place would leave the record alone too.
func leaveForeign(err error) Action {
	return Action{Kind: ActionLeave, foreign: true,
		Reason: fmt.Sprintf("a controller whose table knows the record's status drives it: %v", err)}
}

// release ends exec's ownership, if it holds one, so that the controller
// that comes next takes over at once instead of after the lease's TTL.
func release[S comparable](ctx context.Context, exec *transition.Persisted[S]) error {
	if own := exec.Ownership(); own != nil {
		return own.Release(ctx)
	}
	return nil
}

// holdsNothing says why exec, a controller's handle, must leave the
// execution without looking at the store: it holds no live ownership. An
// outside authority's handle never has to (a cluster master ends a force
// stop with End).
func holdsNothing[S comparable](exec *transition.Persisted[S]) (string, bool) {
	switch {
	case exec.Authority() || !storage.Ended(exec.Ownership()):
		return "", false
	case exec.Claim().Owner == "":
		return "this controller never took the execution over", true
	}
	return "this controller's ownership of the execution has ended", true
}

// isRelocating reports whether rec is in a relocating state.
func isRelocating[S comparable](roles *Roles[S], rec storage.Record) bool {
	cur, err := roles.table.Parse(rec.Status)
	role, _ := roles.Role(cur)
	return err == nil && role == RoleRelocating
}

// ownedByAnother says why the controller holding claim must leave the
// execution in rec alone: another owner, or this owner at another epoch,
// holds it now. An outside authority (no claim) never has to.
func ownedByAnother(rec storage.Record, claim storage.Claim) (string, bool) {
	if claim.Owner == "" || (rec.Owner == claim.Owner && rec.Epoch == claim.Epoch) {
		return "", false
	}
	return fmt.Sprintf("execution is owned by %s at epoch %d now", rec.Owner, rec.Epoch), true
}

// fencedReason says why a controller whose write failed with err must
// leave the execution, if err is a fenced write.
func fencedReason(err error) (string, bool) {
	var fenced *storage.FencedError
	switch {
	case !errors.As(err, &fenced):
		return "", false
	case fenced.Lost:
		return "this controller's ownership of the execution has ended", true
	}
	return fmt.Sprintf("execution is owned by %s at epoch %d now", fenced.CurrentOwner, fenced.CurrentEpoch), true
}
