package etcdstore

import (
	"context"
	"strings"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/backoff"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements [storage.Watcher] on etcd's watch. When etcd
// reports that the revisions the watch needs were compacted, or the watch
// ends for any reason but ctx (the member lost its leader, the connection
// broke), it lists every record, delivers an event for each, and watches
// again from the revision of that list: events may repeat, none is lost.
//
// A consumer that stops reading costs a bounded amount of memory: once
// Options.WatchBacklog events wait for it, the etcd watch (and whatever
// the etcd client buffered for it) is dropped, one event is held until the
// consumer reads again, and then it gets a re-list instead of every write
// it missed. The watch ends when ctx is done or the client is closed.
func (s *Store) Watch(ctx context.Context, fromRevision uint64) (<-chan storage.WatchEvent, error) {
	if s.client == nil {
		return nil, errZeroStore
	}
	if err := storage.CheckContext(ctx, "etcdstore", "Watch"); err != nil {
		return nil, err
	}
	if err := s.client.Ctx().Err(); err != nil {
		return nil, wrap("Watch", "", err)
	}
	ch := make(chan storage.WatchEvent)
	go s.follow(ctx, int64(fromRevision), ch)
	return ch, nil
}

func (s *Store) follow(ctx context.Context, rev int64, ch chan<- storage.WatchEvent) {
	defer close(ch)
	// The watch ends with the client too: a closed client cannot watch,
	// and re-listing on it would only fail until ctx ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.client.Ctx(), cancel)
	defer stop()
	send := func(ev storage.WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	failures := 0
	for ctx.Err() == nil {
		if !s.watchFrom(ctx, &rev, ch) {
			return
		}
		// The watch broke, or its consumer fell behind: re-list, then
		// watch from after the list.
		recs, bad, listRev, err := s.list(ctx)
		if err != nil {
			if !backoff.Rewatch.Sleep(ctx, failures) {
				return
			}
			failures++
			continue
		}
		failures = 0
		for _, rec := range recs {
			if !send(storage.WatchEvent{ID: rec.ID, Revision: rec.Revision}) {
				return
			}
		}
		for _, u := range bad { // announced too: their reader gets the error
			if !send(storage.WatchEvent{ID: u.ID, Revision: u.Revision}) {
				return
			}
		}
		rev = listRev
	}
}

// watchFrom delivers events after *rev until the watch breaks or its
// consumer falls more than the backlog behind (true: re-list), or ctx
// ends (false).
func (s *Store) watchFrom(ctx context.Context, rev *int64, ch chan<- storage.WatchEvent) bool {
	// WithRequireLeader ends the watch when its member is cut off from
	// the leader, instead of waiting on a member that hears nothing.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := s.client.Watch(wctx, s.records, clientv3.WithPrefix(), clientv3.WithRev(*rev+1))
	var pending []storage.WatchEvent
	for {
		var out chan<- storage.WatchEvent
		var next storage.WatchEvent
		if len(pending) > 0 {
			out, next = ch, pending[0]
		}
		select {
		case out <- next:
			pending[0] = storage.WatchEvent{}
			pending = pending[1:]
		case resp, ok := <-events:
			if !ok || resp.CompactRevision != 0 || resp.Canceled || resp.Err() != nil {
				return ctx.Err() == nil
			}
			for _, ev := range resp.Events {
				*rev = ev.Kv.ModRevision
				if id, ours := idOf(strings.TrimPrefix(string(ev.Kv.Key), s.records)); ours {
					pending = append(pending, storage.WatchEvent{ID: id, Revision: uint64(ev.Kv.ModRevision)})
				}
			}
			if len(pending) > s.backlog {
				// The consumer is not keeping up: drop the etcd watch and
				// what its client buffered, hold one event until the
				// consumer reads again, then re-list.
				cancel()
				select {
				case ch <- pending[0]:
					return true
				case <-ctx.Done():
					return false
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}
