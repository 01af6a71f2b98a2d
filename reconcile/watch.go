package reconcile

import (
	"context"
	"errors"
	"log/slog"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/backoff"
)

// StoreEventsOptions say where [StoreEvents] starts and what it leaves
// out; the zero value is every event from the beginning.
type StoreEventsOptions struct {
	// From is the revision to start after; 0 is from the beginning.
	From uint64
	// OnError is told of each failed attempt to watch again (for a log
	// line or a metric). Nil logs each at Warn through slog.Default().
	OnError func(error)
	// SkipWritesBy, if set, leaves out the events of writes made by this
	// actor: a controller's own writes (its Persisted's Actor), which
	// would otherwise bring every key it writes straight back to a
	// reconcile, whatever RequeueAfter it asked for. StoreEvents then
	// reads the record each event names (one Get per event, so the store
	// must be a storage.Store too) and leaves the event out when the
	// record's audit trail says the write at the event's revision was
	// that actor's. Anyone else's write is delivered, and so is one the
	// trail no longer holds.
	SkipWritesBy string
}

// StoreEvents turns a store's watch into the keys of a Loop's
// [Options].Events: the id of every record written after opts.From. A
// store ends a watch when its connection breaks or the store is closed
// (see [storage.Watcher]); StoreEvents then watches again from the last
// revision it saw, waiting between attempts (100 ms doubling to 5 s) for
// as long as ctx is live, so a Loop fed by it keeps its events across a
// store outage. The channel is closed when ctx is done.
//
// The first Watch's error is returned (a store that cannot watch at all
// is a mistake to see at once); later ones are retried, and reported to
// opts.OnError. Delivery is level-triggered like everything else here:
// an id may come more than once, and a Loop folds repeats into one
// reconcile.
func StoreEvents(ctx context.Context, w storage.Watcher, opts StoreEventsOptions) (<-chan string, error) {
	if w == nil {
		return nil, errors.New("reconcile: StoreEvents: nil Watcher")
	}
	var reader storage.Store
	if opts.SkipWritesBy != "" {
		var ok bool
		if reader, ok = w.(storage.Store); !ok {
			return nil, errors.New("reconcile: StoreEvents: SkipWritesBy reads the records: the Watcher must be a storage.Store too")
		}
	}
	fromRevision, onError := opts.From, opts.OnError
	if onError == nil {
		onError = func(err error) {
			slog.Default().Warn("reconcile: StoreEvents: watching the store again failed; retrying", "err", err)
		}
	}
	events, err := w.Watch(ctx, fromRevision)
	if err != nil {
		return nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		last := fromRevision
		for failures := 0; ; {
			for ev := range events {
				last, failures = max(last, ev.Revision), 0
				if reader != nil && wroteIt(ctx, reader, ev, opts.SkipWritesBy) {
					continue
				}
				select {
				case out <- ev.ID:
				case <-ctx.Done():
					return
				}
			}
			for {
				if ctx.Err() != nil {
					return
				}
				if !backoff.Rewatch.Sleep(ctx, failures) {
					return
				}
				failures++
				if events, err = w.Watch(ctx, last); err == nil {
					break
				}
				if ctx.Err() == nil {
					onError(err)
				}
			}
		}
	}()
	return out, nil
}

// wroteIt reports whether the write ev announces was actor's, from the
// record's audit trail: the entry of the change that produced revision
// ev.Revision (each entry is at the revision its change was applied to,
// so that change is the one before the entry at ev.Revision, or the
// newest when the record is still at it). Any doubt (the record cannot be
// read, the trail no longer holds the change) delivers the event.
func wroteIt(ctx context.Context, store storage.Store, ev storage.WatchEvent, actor string) bool {
	rec, err := store.Get(ctx, ev.ID)
	if err != nil || rec.Revision < ev.Revision {
		return false
	}
	entries := rec.History.Entries()
	for k := len(entries) - 1; k >= 0; k-- {
		after := rec.Revision // the revision entries[k]'s change produced
		if k+1 < len(entries) {
			after = entries[k+1].Revision
		}
		switch {
		case after == ev.Revision:
			return entries[k].Actor == actor
		case after < ev.Revision:
			return false
		}
	}
	return false
}
