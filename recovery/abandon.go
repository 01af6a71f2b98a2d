package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Abandon ends an execution that no controller will ever run again,
// because the platform gave up on it: its Kubernetes Job failed or was
// deleted, the process manager stopped restarting it. Nothing else would
// end it soon: a relocating or running record waits for a successor that
// will not come, until the Reaper's timer or its Abandoned time
// (teraslice.RelocatingDeadline and teraslice.AbandonedAfter: 15 minutes),
// if it has them.
//
// exec is the cluster master's handle, an outside authority's (see
// transition.Persisted); a controller's is refused. Reading the record
// afresh, Abandon writes:
//
//   - the drain's end for an execution that was stopping (the stop is
//     what ended it), and the end a finishing execution had earned;
//   - the roles' Failed state, with why (also as MetaFailure), for any
//     other one that has not ended;
//   - nothing for one that has ended (EndKeep), nor for one that has not
//     started, in a state the table does not let fail (EndLeave: it is
//     the master's to place again, as Teraslice's pending), nor for a
//     parked one (EndLeave: nothing runs it).
//
// A live controller still holding the execution is never overruled: the
// error matches storage.ErrHeld, and nothing is written. Nor is a record
// of another table ([ErrForeignStatus]): a master whose table knows its
// status abandons it. A Job's last pod
// may still be shutting down, or its lease running out; call again
// later (a reconcile.Loop's requeue), or let the holder end it.
func (d *Decider[S]) Abandon(ctx context.Context, exec *transition.Persisted[S], why string) (Outcome[S], error) {
	if d == nil || d.roles == nil {
		return Outcome[S]{}, errZeroDecider
	}
	if exec == nil {
		return Outcome[S]{}, errors.New("recovery: Abandon: nil execution")
	}
	if !exec.Authority() {
		return Outcome[S]{}, errors.New("recovery: Abandon: a controller's handle: the cluster master abandons an execution, with a handle of its own (transition.NewPersisted)")
	}
	if why == "" {
		return Outcome[S]{}, errors.New("recovery: Abandon: say why: it is the execution's failure reason")
	}
	roles := d.roles
	if err := roles.fits(exec.Table()); err != nil {
		return Outcome[S]{}, err
	}
	var end Outcome[S]
	_, _, err := exec.Apply(ctx, func(cur S, rec storage.Record) (transition.Update[S], error) {
		if _, err := roles.StateOf(rec); err != nil {
			return transition.Update[S]{}, err
		}
		end = Outcome[S]{Kind: EndKeep, From: cur, To: cur}
		role, _ := roles.Role(cur)
		switch role {
		case RoleTerminal:
			end.Reason = fmt.Sprintf("already ended in %s", rec.Status)
			return transition.To(cur), nil
		case RoleParked:
			end.Kind, end.Reason = EndLeave, fmt.Sprintf("%s is parked: nothing runs it, and it waits for a resume", rec.Status)
			return transition.To(cur), nil
		}
		if claim, held, err := exec.Store().Held(ctx, rec.ID); err != nil {
			return transition.Update[S]{}, err
		} else if held {
			return transition.Update[S]{}, &storage.HeldError{ID: rec.ID, Holder: claim.Owner, Status: rec.Status}
		}
		end.Kind = EndWrite
		if role == RoleStopping || role == RoleFinishing {
			// The drain's end, or the end the finished work earned:
			// what the controller would have written.
			end.To, _ = roles.End(cur)
			to, _ := roles.table.Name(end.To)
			end.Reason = fmt.Sprintf("%s: %s", to, why)
			return transition.To(end.To).Because(end.Reason), nil
		}
		if !roles.table.Allowed(cur, roles.failed) {
			// Not started, in a state the table does not let fail
			// (Teraslice's pending): it is the master's to place again.
			end.Kind, end.Reason = EndLeave, fmt.Sprintf("%s has not started and cannot fail: place it again", rec.Status)
			return transition.To(cur), nil
		}
		end.To, end.Reason = roles.failed, why
		return transition.To(end.To).Because(why).Set(MetaFailure, why), nil
	})
	if foreign(err) && !errors.Is(err, ErrForeignStatus) {
		err = fmt.Errorf("%w: %w", ErrForeignStatus, err)
	}
	if err != nil {
		return Outcome[S]{}, fmt.Errorf("recovery: Abandon %s: %w", exec.ID(), err)
	}
	return end, nil
}
