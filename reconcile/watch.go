package reconcile

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/internal/backoff"
	"github.com/execfsm/execfsm/storage"
)

// StoreEvents turns a store's watch into the keys of a Loop's
// [Options].Events: the id of every record written from fromRevision on
// (0: from the beginning). A store ends a watch when its connection
// breaks or the store is closed (see [storage.Watcher]); StoreEvents then
// watches again from the last revision it delivered, waiting between
// attempts (100 ms doubling to 5 s) for as long as ctx is live, so a Loop
// fed by it keeps its events across a store outage. The channel is
// closed when ctx is done.
//
// The first Watch's error is returned (a store that cannot watch at all
// is a mistake to see at once); later ones are retried, and reported to
// onError if it is not nil (for a log line or a metric). Delivery is
// level-triggered like everything else here: an id may come more than
// once, and a Loop folds repeats into one reconcile.
func StoreEvents(ctx context.Context, w storage.Watcher, fromRevision uint64, onError func(error)) (<-chan string, error) {
	if w == nil {
		return nil, errors.New("reconcile: StoreEvents: nil Watcher")
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
				select {
				case out <- ev.ID:
					last = max(last, ev.Revision)
					failures = 0
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
				if onError != nil && ctx.Err() == nil {
					onError(err)
				}
			}
		}
	}()
	return out, nil
}
