package reconcile

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Identity is who an item is, as the external world records it: the
// labels and annotations of a Kubernetes Job, the fields of a child
// process's label file. A controller rebuilding its view after a crash
// takes identity from here, never from a private checkpoint that may have
// drifted. The loop does not read it; it hands it to the [Adopter].
//
// Labels are short values the world can select by (a Kubernetes label
// selector); Annotations hold any text. VILLAScontroller, for one, labels
// its simulator Jobs with the simulator's and the manager's UUIDs
// (service.villas.io/uuid, manager.villas.io/uuid) and annotates them
// with name, location, realm and owner.
type Identity struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Item is one thing a [Loop] reconciles, as listed from the world.
type Item[K comparable] struct {
	Key      K
	Identity Identity
}

// Adopter rebuilds the controller's in-memory item for something the world
// has, under the identity the world gives it, during the adoption pass
// that precedes normal reconciliation. It runs for every listed item: a
// controller that just started knows nothing, whether it created the item
// in an earlier life or never heard of it.
//
// An Adopter may also implement [GoneHandler].
type Adopter[K comparable] interface {
	Adopt(ctx context.Context, item Item[K]) error
}

// AdopterFunc adapts a function to [Adopter].
type AdopterFunc[K comparable] func(ctx context.Context, item Item[K]) error

// Adopt calls f.
func (f AdopterFunc[K]) Adopt(ctx context.Context, item Item[K]) error { return f(ctx, item) }

// GoneHandler is told, during the adoption pass, about a key the
// controller expected (see Options.Known) that the world no longer has:
// a pod that died, a process killed while the controller was down. The
// key is reconciled afterwards as well, so the reconciler, reading the
// world, marks it gone for good.
type GoneHandler[K comparable] interface {
	Gone(ctx context.Context, key K) error
}

// storeKeysPage is how many records StoreKeys asks a store for at a
// time: a few megabytes of records a request.
const storeKeysPage = 1000

// StoreKeys returns a function for [Options].Known that lists the ids of
// the executions of store that have not ended under table: a record in
// one of its terminal states is left out (nothing is left to do for it,
// and a world that no longer has it must not make it gone on every
// resync); one it cannot read is listed, so its reconcile meets the
// error where it is reported.
//
// A store that lists in pages ([storage.PageLister], every store of
// this module) is asked for the table's live statuses only
// ([transition.Table.LiveStatuses]), a page of storeKeysPage at a time:
// a store of a million ended executions costs what its live ones cost.
// A record in a status the table does not have (a newer table's, during
// a rolling upgrade) is then not listed: its own controllers drive it.
// A store that only lists whole lists everything, and such a record is
// listed too.
func StoreKeys[S comparable](store storage.Lister, table *transition.Table[S]) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		if store == nil || table == nil {
			return nil, errors.New("reconcile: StoreKeys: nil store or table")
		}
		var recs []storage.Record
		var bad []storage.Unreadable
		var err error
		if pages, ok := store.(storage.PageLister); ok {
			recs, bad, err = storage.ListAll(ctx, pages, storeKeysPage, table.LiveStatuses()...)
		} else {
			recs, bad, err = store.List(ctx)
		}
		if err != nil {
			return nil, err
		}
		ids := make([]string, 0, len(recs)+len(bad))
		for _, rec := range recs {
			if s, err := table.Parse(rec.Status); err == nil && table.IsTerminal(s) {
				continue
			}
			ids = append(ids, rec.ID)
		}
		for _, u := range bad {
			ids = append(ids, u.ID)
		}
		return ids, nil
	}
}
