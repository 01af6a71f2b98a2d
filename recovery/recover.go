package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/execfsm/execfsm/internal/quote"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// The metadata keys that link a recovery to the execution it recovers.
const (
	// MetaRecoveredExecution, on a new execution, is the id of the ended
	// execution whose unfinished work it re-processes (Teraslice's
	// recovered_execution).
	MetaRecoveredExecution = "execfsm.recovered_execution"
	// MetaRecoveredSliceType, on a new execution, says which of the old
	// execution's unfinished units of work to recover (Teraslice's
	// recovered_slice_type: "pending", "failed", "all"); absent when the
	// controller's default applies.
	MetaRecoveredSliceType = "execfsm.recovered_slice_type"
)

// ErrNotEnded is matched by the error [Recover] returns for an execution
// that has not ended: a live execution is resumed by its controller, not
// recovered into a second one that would process the same work.
var ErrNotEnded = errors.New("execution has not ended")

// Recovery is what [Recover] writes on the new execution besides the link
// to the old one.
type Recovery struct {
	// SliceType says which unfinished work to recover; recorded under
	// MetaRecoveredSliceType when not empty.
	SliceType string
	// Reason is the new record's reason; "recovers <id>" when empty.
	Reason string
	// Meta is further metadata for the new record (the job's settings).
	// It may not set the two keys Recover writes.
	Meta map[string]string
}

// Recover creates the execution to, in its table's initial state, as the
// recovery of the ended execution from: Teraslice's recover, which
// re-processes the work an ended execution left unfinished in a new
// execution and never touches the old one. The new record carries
// [MetaRecoveredExecution] (read it with [RecoveredFrom]); the old one's
// recoveries are listed by [Recoveries]. When the new execution's
// controller starts, [Startup]'s verdict says which execution it
// recovers (Verdict.Recovers), and the controller runs it in its
// recovering state (state.Recovering) before its running one.
//
// from must be in a terminal state: anything else is refused with an
// error matching [ErrNotEnded], and nothing is written. An execution may
// be recovered more than once, each time into a new id; an id already
// taken is [storage.ErrExists]. from is only read, so it may be an
// outside authority's handle (the cluster master's).
func Recover[S comparable](ctx context.Context, roles *Roles[S], from, to *transition.Persisted[S], r Recovery) (storage.Record, error) {
	switch {
	case roles == nil:
		return storage.Record{}, fmt.Errorf("recovery: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidRoles)
	case from == nil || to == nil:
		return storage.Record{}, errors.New("recovery: Recover: nil execution")
	case from.ID() == to.ID():
		return storage.Record{}, fmt.Errorf("recovery: Recover: execution %s cannot recover itself: give the recovery a new id", quote.Limited(from.ID()))
	}
	for _, key := range []string{MetaRecoveredExecution, MetaRecoveredSliceType} {
		if _, ok := r.Meta[key]; ok {
			return storage.Record{}, fmt.Errorf("recovery: Recover: Meta sets %s, which Recover writes", key)
		}
	}
	for _, exec := range []*transition.Persisted[S]{from, to} {
		if err := roles.fits(exec.Table()); err != nil {
			return storage.Record{}, err
		}
	}
	cur, old, err := from.Load(ctx)
	if err != nil {
		return storage.Record{}, err
	}
	if role, _ := roles.Role(cur); role != RoleTerminal {
		return storage.Record{}, fmt.Errorf("recovery: execution %s is %s: %w; only an ended execution can be recovered", quote.Limited(old.ID), old.Status, ErrNotEnded)
	}
	meta := make(map[string]string, len(r.Meta)+2)
	maps.Copy(meta, r.Meta)
	meta[MetaRecoveredExecution] = old.ID
	if r.SliceType != "" {
		meta[MetaRecoveredSliceType] = r.SliceType
	}
	reason := r.Reason
	if reason == "" {
		reason = "recovers " + old.ID
	}
	return to.Create(ctx, transition.Update[S]{To: to.Table().Initial(), Reason: reason, Meta: meta})
}

// RecoveredFrom returns the id of the execution rec recovers, and false
// if rec is not a recovery.
func RecoveredFrom(rec storage.Record) (string, bool) {
	id, ok := rec.Meta[MetaRecoveredExecution]
	return id, ok && id != ""
}

// Recoveries returns the executions created by [Recover] from the
// execution id, ordered by id, and apart the records the store could not
// read (any of which might be one: report them, as [storage.Lister]
// says). It lists the whole store: a store with many executions and a
// frequent question keeps its own index.
func Recoveries(ctx context.Context, store storage.Lister, id string) ([]storage.Record, []storage.Unreadable, error) {
	if store == nil {
		return nil, nil, errors.New("recovery: Recoveries: nil store")
	}
	all, unreadable, err := store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var found []storage.Record
	for _, rec := range all {
		if from, ok := RecoveredFrom(rec); ok && from == id {
			found = append(found, rec)
		}
	}
	return found, unreadable, nil
}
