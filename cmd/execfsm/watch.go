package main

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/storage"
)

// watch prints the records (those of ids, or all) as they are, then each
// change as it lands, until ctx ends (an interrupt), which is success.
func watch(ctx context.Context, b *backend, ids []string, out *printer) error {
	only := map[string]bool{}
	for _, id := range ids {
		only[id] = true
	}
	wanted := func(id string) bool { return len(only) == 0 || only[id] }
	recs, bad, err := b.lister.List(ctx)
	if err != nil {
		return storeError(err)
	}
	var from uint64
	for _, r := range recs {
		from = max(from, r.Revision)
		if wanted(r.ID) {
			if err := out.event("current", r, "", nil); err != nil {
				return err
			}
		}
	}
	for _, u := range bad {
		from = max(from, u.Revision)
		if wanted(u.ID) {
			if err := out.event("unreadable", storage.Record{}, u.ID, u.Err); err != nil {
				return err
			}
		}
	}
	// StoreEvents watches again after a broken connection, from the last
	// revision it delivered.
	events, err := reconcile.StoreEvents(ctx, b.watcher, reconcile.StoreEventsOptions{From: from})
	if err != nil {
		return storeError(err)
	}
	for id := range events {
		if !wanted(id) {
			continue
		}
		rec, err := b.store.Get(ctx, id)
		switch {
		case ctx.Err() != nil:
		case err == nil:
			err = out.event("changed", rec, "", nil)
		case errors.Is(err, storage.ErrNotFound):
			err = out.event("gone", storage.Record{}, id, nil)
		case errors.Is(err, storage.ErrCorrupt):
			err = out.event("unreadable", storage.Record{}, id, err)
		default:
			return storeError(err)
		}
		if err != nil {
			return err
		}
	}
	return nil // interrupted
}
