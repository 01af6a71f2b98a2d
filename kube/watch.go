package kube

import (
	"context"
	"net/http"
	"strconv"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/backoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Watch implements [storage.Watcher] with a Kubernetes watch on the
// store's ConfigMaps. A watch from revision 0 starts with every record. A
// watch the API server ends is resumed from the last resourceVersion it
// delivered; when the server says that version is too old (410 Gone:
// etcd compacted it, or the watch cache moved past it) the store lists
// every record, delivers each, and watches from the list: nothing is
// missed, some events repeat.
func (s *Store) Watch(ctx context.Context, fromRevision uint64) (<-chan storage.WatchEvent, error) {
	if s.client == nil {
		return nil, errZeroStore
	}
	if err := storage.CheckContext(ctx, "kube", "Watch"); err != nil {
		return nil, err
	}
	// The first list and watch are made here, so that a caller without
	// the permission to make them learns it now: later failures are
	// retried, and a permission never comes back by retrying.
	rv := strconv.FormatUint(fromRevision, 10)
	first, err := s.open(ctx, rv, fromRevision == 0)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		if first != nil && first.w != nil {
			first.w.Stop()
		}
		return nil, wrap("Watch", s.ns, err)
	}
	ch := make(chan storage.WatchEvent)
	go s.follow(ctx, rv, fromRevision == 0, first, err, ch)
	return ch, nil
}

// opened is a watch made, and the records of the list made before it
// (when it relisted).
type opened struct {
	recs []storage.Record
	bad  []storage.Unreadable
	rv   string          // the list's resourceVersion, or the one watched from
	w    watch.Interface // nil when the watch could not be made
}

// open lists the records (with relist) and starts watching after them,
// or after rv. A list that succeeded is returned even when the watch
// then fails, with the watch's error, so that its records are delivered;
// a list that failed is nil and its error.
func (s *Store) open(ctx context.Context, rv string, relist bool) (*opened, error) {
	o := &opened{rv: rv}
	if relist {
		var err error
		if o.recs, o.bad, o.rv, err = s.list(ctx); err != nil {
			return nil, err
		}
	}
	w, err := s.records.watch(ctx, o.rv)
	if err != nil {
		return o, err
	}
	o.w = w
	return o, nil
}

// follow delivers the watch's events from rv (listing every record
// first with relist), watching again after each end; first and firstErr
// are what Watch's own open returned.
func (s *Store) follow(ctx context.Context, rv string, relist bool, first *opened, firstErr error, ch chan<- storage.WatchEvent) {
	defer close(ch)
	defer func() {
		if first != nil && first.w != nil {
			first.w.Stop() // ctx ended before the loop took it
		}
	}()
	send := func(ev storage.WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	failures := 0
	pause := func() bool {
		failures++
		return backoff.Rewatch.Sleep(ctx, failures-1)
	}
	for ctx.Err() == nil {
		o, err := first, firstErr
		if o == nil && err == nil {
			o, err = s.open(ctx, rv, relist)
		}
		first, firstErr = nil, nil
		if o != nil {
			// Listed (when relisting), whatever became of the watch.
			if !sendListed(o.recs, o.bad, send) {
				if o.w != nil {
					o.w.Stop()
				}
				return
			}
			rv, relist = o.rv, false
		}
		switch {
		case o == nil: // the list failed
			if !pause() {
				return
			}
			continue
		case err != nil: // the watch failed
			relist = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
			if !relist && !pause() {
				return
			}
			continue
		}
		failures = 0
		var ok bool
		rv, relist, ok = s.drain(ctx, o.w, rv, send)
		o.w.Stop()
		if !ok {
			return
		}
	}
}

// sendListed delivers an event for every record listed, the unreadable
// ones too (their reader gets the error); false when the consumer went
// away.
func sendListed(recs []storage.Record, bad []storage.Unreadable, send func(storage.WatchEvent) bool) bool {
	for _, rec := range recs {
		if !send(storage.WatchEvent{ID: rec.ID, Revision: rec.Revision}) {
			return false
		}
	}
	for _, u := range bad {
		if !send(storage.WatchEvent{ID: u.ID, Revision: u.Revision}) {
			return false
		}
	}
	return true
}

// drain delivers a watch's events until it ends. It returns the last
// resourceVersion seen, whether a relist is needed (410), and false when
// ctx ended or the consumer went away.
func (s *Store) drain(ctx context.Context, w watch.Interface, rv string, send func(storage.WatchEvent) bool) (string, bool, bool) {
	for {
		select {
		case <-ctx.Done():
			return rv, false, false
		case ev, open := <-w.ResultChan():
			if !open {
				return rv, false, true // the server ended the watch; resume
			}
			switch ev.Type {
			case watch.Error:
				status, _ := ev.Object.(*metav1.Status)
				gone := status != nil && (status.Code == http.StatusGone || status.Reason == metav1.StatusReasonExpired || status.Reason == metav1.StatusReasonGone)
				return rv, gone, true
			case watch.Bookmark:
				if _, at, ok := s.records.event(ev.Object); ok {
					rv = at
				}
			case watch.Added, watch.Modified, watch.Deleted:
				id, at, ok := s.records.event(ev.Object)
				if !ok {
					continue
				}
				rev, err := strconv.ParseUint(at, 10, 64)
				if err != nil {
					continue
				}
				rv = at
				if id == "" {
					continue // an object that holds no record (yet)
				}
				if !send(storage.WatchEvent{ID: id, Revision: rev}) {
					return rv, false, false
				}
			}
		}
	}
}
