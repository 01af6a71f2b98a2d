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

// ActionKind is what SIGTERM means for a controller.
type ActionKind uint8

// The terminate actions.
const (
	// Shutdown: stop producing work, wait for workers, write the final
	// status (stopped, completed, terminated) and exit 0.
	Shutdown ActionKind = iota + 1
	// Relocate: the platform is moving a healthy controller. The status
	// is now relocating; exit with Action.ExitCode without shutting the
	// execution down, so a new controller resumes it.
	Relocate
	// Leave: another controller owns the execution now (this one was
	// fenced). Exit without writing or shutting anything down.
	Leave
)

func (k ActionKind) String() string {
	switch k {
	case Shutdown:
		return "shutdown"
	case Relocate:
		return "relocate"
	case Leave:
		return "leave"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is the outcome of [Terminate].
//
// ExitCode is the status the process should exit with so that its
// platform does the right thing next:
//
//   - Kubernetes Job (Teraslice's kubernetesV2 execution controller): a
//     relocating controller must exit non-zero (143 by default) or the pod
//     counts as the Job's success and nothing replaces it. Give the Job a
//     backoffLimit that relocations cannot exhaust, or a podFailurePolicy
//     rule that ignores pods with the DisruptionTarget condition or exit
//     code 143. Shutdown exits 0 and the Job completes.
//   - Kubernetes Deployment or StatefulSet: any exit code; the pod is
//     replaced while the controller exists.
//   - systemd with Restart=on-failure, Docker or Nomad "on-failure"
//     restart policies: like a Job, only a non-zero exit is restarted.
//     With Restart=always any code is.
type Action struct {
	Kind     ActionKind
	Reason   string
	ExitCode int
	// CheckpointErr is the error of the checkpoint hook given to
	// [ApplyTerminate], if it failed. The relocation was recorded
	// anyway: shutting a healthy execution down because a flush failed
	// would lose more than the flush.
	CheckpointErr error
	// ReleaseErr is the error of releasing the ownership after writing
	// relocating, if it failed: the successor then waits for the lease to
	// expire instead of taking over at once.
	ReleaseErr error
}

// Terminate decides what a SIGTERM means for the controller holding claim
// on the execution in rec. It is a pure function; [ApplyTerminate] writes
// its outcome. The rules:
//
//   - Stopping: the cluster master asked; Shutdown.
//   - Relocating already (a second SIGTERM): Relocate again.
//   - Another running status: the platform is moving the controller. If
//     the platform restarts controllers and the work is restartable,
//     Relocate; otherwise Shutdown (Teraslice skips the shutdown even for
//     work that cannot be restarted, which then dies on restart).
//   - An init or terminal status: Shutdown.
//   - The record is owned by another controller, or by this owner at
//     another epoch: Leave.
func Terminate(rec storage.Record, claim storage.Claim, p Policy) (Action, error) {
	p, err := p.withDefaults()
	if err != nil {
		return Action{}, err
	}
	cur, err := state.Parse(rec.Status)
	if err != nil {
		return Action{}, fmt.Errorf("recovery: execution %s: %w", rec.ID, err)
	}
	if claim.Owner != "" && (rec.Owner != claim.Owner || rec.Epoch != claim.Epoch) {
		return Action{Kind: Leave, Reason: fmt.Sprintf("execution is owned by %s at epoch %d now", rec.Owner, rec.Epoch)}, nil
	}
	shutdown := func(reason string) (Action, error) { return Action{Kind: Shutdown, Reason: reason}, nil }
	switch {
	case cur == state.Stopping:
		return shutdown("SIGTERM while stopping: the cluster master asked to stop")
	case cur == state.Relocating:
		return Action{Kind: Relocate, Reason: "SIGTERM while relocating", ExitCode: p.RelocateExitCode}, nil
	case cur.IsInit():
		return shutdown(fmt.Sprintf("SIGTERM in %s status: nothing started yet", cur))
	case cur.IsTerminal():
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the execution is over", cur))
	case !p.Restarts:
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the platform does not restart controllers", cur))
	case !restartable(p.Work):
		return shutdown(fmt.Sprintf("SIGTERM in %s status: the work is not restartable", cur))
	}
	return Action{Kind: Relocate, ExitCode: p.RelocateExitCode,
		Reason: fmt.Sprintf("SIGTERM in %s status, not stopping: the platform is moving the controller", cur)}, nil
}

// ApplyTerminate handles a SIGTERM for the controller writing through
// exec (which should hold the controller's claim). It decides with
// [Terminate]; when that says Relocate, it calls checkpoint (if not nil)
// to flush in-flight work, then writes relocating with compare-and-swap,
// remembering the status it leaves. If the record changed meanwhile (the
// cluster master has just written stopping) it decides again on the
// fresh record, so exactly one outcome happens: relocated, or shut down.
// A fenced write means another controller took over, or this one's
// ownership ended: Leave.
//
// After writing relocating it releases exec's ownership, so the
// controller that replaces this one takes over at once instead of after
// the lease's TTL; exec writes nothing more (its writes are fenced). On
// Shutdown the caller still owns the execution: it writes the final
// status, then releases.
func ApplyTerminate(ctx context.Context, exec *transition.Persisted[state.Status], p Policy, checkpoint func(context.Context) error) (Action, error) {
	if exec == nil {
		return Action{}, errors.New("recovery: ApplyTerminate: nil execution")
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	_, rec, err := exec.Load(ctx)
	if err != nil {
		return Action{}, err
	}
	first, err := Terminate(rec, exec.Claim(), p)
	if err != nil || first.Kind != Relocate {
		return first, err
	}
	var checkpointErr error
	if checkpoint != nil && rec.Status != state.Relocating.String() {
		checkpointErr = checkpoint(ctx)
	}
	var final Action
	_, _, err = exec.Apply(ctx, func(cur state.Status, rec storage.Record) (transition.Update[state.Status], error) {
		a, err := Terminate(rec, exec.Claim(), p)
		if err != nil {
			return transition.Update[state.Status]{}, err
		}
		final = a
		if a.Kind == Relocate {
			return transition.Update[state.Status]{To: state.Relocating, Reason: a.Reason}, nil
		}
		return transition.Update[state.Status]{To: cur}, nil // decided otherwise on the fresh record: write nothing
	})
	var fenced *storage.FencedError
	if errors.As(err, &fenced) {
		if fenced.Lost {
			return Action{Kind: Leave, Reason: "this controller's ownership of the execution has ended"}, nil
		}
		return Action{Kind: Leave, Reason: fmt.Sprintf("execution is owned by %s at epoch %d now", fenced.CurrentOwner, fenced.CurrentEpoch)}, nil
	}
	if err != nil {
		return Action{}, err
	}
	if final.Kind == Relocate {
		final.CheckpointErr = checkpointErr
		if own := exec.Ownership(); own != nil {
			final.ReleaseErr = own.Release(ctx)
		}
	}
	return final, nil
}
