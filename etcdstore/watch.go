package etcdstore

import (
	"context"
	"strings"
	"time"

	"github.com/execfsm/execfsm/transition"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements [transition.Watcher] on etcd's watch. When etcd
// reports that the revisions the watch needs were compacted, or the watch
// ends for any reason but ctx (the member lost its leader, the connection
// broke), it lists every record, delivers an event for each, and watches
// again from the revision of that list: events may repeat, none is lost.
func (s *Store) Watch(ctx context.Context, fromRevision uint64) (<-chan transition.WatchEvent, error) {
	if ctx == nil {
		return nil, wrap("Watch", "", transition.ErrNilContext)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan transition.WatchEvent)
	go s.follow(ctx, int64(fromRevision), ch)
	return ch, nil
}

func (s *Store) follow(ctx context.Context, rev int64, ch chan<- transition.WatchEvent) {
	defer close(ch)
	send := func(ev transition.WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		if !s.watchFrom(ctx, &rev, send) {
			return
		}
		// The watch broke: re-list, then watch from after the list.
		recs, bad, listRev, err := s.list(ctx)
		if err != nil {
			select {
			case <-time.After(retry):
				retry = min(2*retry, 5*time.Second)
			case <-ctx.Done():
				return
			}
			continue
		}
		retry = 100 * time.Millisecond
		for _, rec := range recs {
			if !send(transition.WatchEvent{ID: rec.ID, Revision: rec.Revision}) {
				return
			}
		}
		for _, u := range bad { // announced too: their reader gets the error
			if !send(transition.WatchEvent{ID: u.ID, Revision: u.Revision}) {
				return
			}
		}
		rev = listRev
	}
}

// watchFrom delivers events after *rev until the watch breaks (true) or
// ctx ends or the consumer goes (false).
func (s *Store) watchFrom(ctx context.Context, rev *int64, send func(transition.WatchEvent) bool) bool {
	// WithRequireLeader ends the watch when its member is cut off from
	// the leader, instead of waiting on a member that hears nothing.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, s.records, clientv3.WithPrefix(), clientv3.WithRev(*rev+1)) {
		if resp.CompactRevision != 0 || resp.Canceled || resp.Err() != nil {
			return ctx.Err() == nil
		}
		for _, ev := range resp.Events {
			*rev = ev.Kv.ModRevision
			id, ours := idOf(strings.TrimPrefix(string(ev.Kv.Key), s.records))
			if !ours {
				continue // a nested store's key
			}
			if !send(transition.WatchEvent{ID: id, Revision: uint64(ev.Kv.ModRevision)}) {
				return false
			}
		}
	}
	return ctx.Err() == nil
}
