package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/transition"
)

// The metadata keys that link a rerun to the execution it reruns.
const (
	// MetaRerunOf, on a new execution, is the id of the ended execution
	// whose unfinished work it re-processes (Teraslice's
	// recovered_execution).
	MetaRerunOf = "execfsm.rerun_of"
	// MetaRerunSliceType, on a new execution, says which of the old
	// execution's unfinished units of work to re-process (Teraslice's
	// recovered_slice_type: "pending", "failed", "all"); absent when the
	// controller's default applies.
	MetaRerunSliceType = "execfsm.rerun_slice_type"
)

// ErrNotEnded is matched by the error [Rerun] returns for an execution
// that has not ended: a live execution is resumed by its controller, not
// rerun in a second one that would process the same work.
var ErrNotEnded = errors.New("execution has not ended")

// RerunOptions is what [Rerun] writes on the new execution besides the
// link to the old one.
type RerunOptions struct {
	// SliceType says which unfinished work to re-process; recorded under
	// MetaRerunSliceType when not empty.
	SliceType string
	// Reason is the new record's reason; "reruns <id>" when empty.
	Reason string
	// Meta is further metadata for the new record (the job's settings).
	// It may not set the two keys Rerun writes.
	Meta map[string]string
}

// Rerun creates the execution to, in its table's initial state, as a
// rerun of the ended execution from: what Teraslice calls recovering an
// execution, which re-processes the work an ended execution left
// unfinished in a new execution and never touches the old one. (This
// package is named for what a controller does when it restarts; the word
// rerun keeps the two apart.) The new record carries [MetaRerunOf] (read
// it with [RerunOf]); the old one's reruns are listed by [Reruns]. When
// the new execution's controller starts, [Startup]'s verdict says which
// execution it reruns (Verdict.RerunOf), and the controller runs it in
// Teraslice's recovering status (state.Recovering) before its running
// one.
//
// from must be in a terminal state: anything else is refused with an
// error matching [ErrNotEnded], and nothing is written. An execution may
// be rerun more than once, each time into a new id; an id already taken
// is [storage.ErrExists]. from is only read, so it may be an outside
// authority's handle (the cluster master's).
func Rerun[S comparable](ctx context.Context, roles *Roles[S], from, to *transition.Persisted[S], r RerunOptions) (storage.Record, error) {
	switch {
	case roles == nil:
		return storage.Record{}, fmt.Errorf("recovery: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidRoles)
	case from == nil || to == nil:
		return storage.Record{}, errors.New("recovery: Rerun: nil execution")
	case from.ID() == to.ID():
		return storage.Record{}, fmt.Errorf("recovery: Rerun: execution %s cannot rerun itself: give the rerun a new id", quote.Limited(from.ID()))
	}
	for _, key := range []string{MetaRerunOf, MetaRerunSliceType} {
		if _, ok := r.Meta[key]; ok {
			return storage.Record{}, fmt.Errorf("recovery: Rerun: Meta sets %s, which Rerun writes", key)
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
		return storage.Record{}, fmt.Errorf("recovery: execution %s is %s: %w; only an ended execution can be rerun", quote.Limited(old.ID), old.Status, ErrNotEnded)
	}
	meta := make(map[string]string, len(r.Meta)+2)
	maps.Copy(meta, r.Meta)
	meta[MetaRerunOf] = old.ID
	if r.SliceType != "" {
		meta[MetaRerunSliceType] = r.SliceType
	}
	reason := r.Reason
	if reason == "" {
		reason = "reruns " + old.ID
	}
	return to.Create(ctx, transition.Update[S]{To: to.Table().Initial(), Reason: reason, Meta: meta})
}

// RerunOf returns the id of the execution rec reruns, and false if rec
// is not a rerun.
func RerunOf(rec storage.Record) (string, bool) {
	id, ok := rec.Meta[MetaRerunOf]
	return id, ok && id != ""
}

// Reruns returns the executions created by [Rerun] from the execution
// id, ordered by id, and apart the records the store could not
// read (any of which might be one: report them, as [storage.Lister]
// says). It lists the whole store: a store with many executions and a
// frequent question keeps its own index.
func Reruns(ctx context.Context, store storage.Lister, id string) ([]storage.Record, []storage.Unreadable, error) {
	if store == nil {
		return nil, nil, errors.New("recovery: Reruns: nil store")
	}
	all, unreadable, err := store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var found []storage.Record
	for _, rec := range all {
		if from, ok := RerunOf(rec); ok && from == id {
			found = append(found, rec)
		}
	}
	return found, unreadable, nil
}
