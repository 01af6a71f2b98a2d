package kube

import (
	"context"
	"net/http"
	"strconv"

	"github.com/execfsm/execfsm/internal/backoff"
	"github.com/execfsm/execfsm/storage"
	corev1 "k8s.io/api/core/v1"
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
	first, err := s.open(ctx, fromRevision)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return nil, wrap("Watch", s.ns, err)
	}
	ch := make(chan storage.WatchEvent)
	go s.follow(ctx, fromRevision, first, ch)
	return ch, nil
}

// opened is a watch made, and the records of the list made before it
// (from revision 0).
type opened struct {
	recs []storage.Record
	bad  []storage.Unreadable
	rv   string
	w    watch.Interface
}

// open lists the records (from revision 0) and starts watching after
// them, or after from.
func (s *Store) open(ctx context.Context, from uint64) (*opened, error) {
	o := &opened{rv: strconv.FormatUint(from, 10)}
	if from == 0 {
		var err error
		if o.recs, o.bad, o.rv, err = s.list(ctx); err != nil {
			return nil, err
		}
	}
	w, err := s.client.CoreV1().ConfigMaps(s.ns).Watch(ctx, metav1.ListOptions{
		LabelSelector:       ManagedLabel + "=" + s.label(),
		ResourceVersion:     o.rv,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return nil, err
	}
	o.w = w
	return o, nil
}

func (s *Store) follow(ctx context.Context, from uint64, first *opened, ch chan<- storage.WatchEvent) {
	defer close(ch)
	if first != nil {
		defer first.w.Stop() // a no-op once drained and stopped below
	}
	send := func(ev storage.WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	relist := from == 0
	rv := strconv.FormatUint(from, 10)
	failures := 0
	pause := func() bool {
		failures++
		return backoff.Rewatch.Sleep(ctx, failures-1)
	}
	for ctx.Err() == nil {
		if first != nil {
			// Made by Watch: deliver the list, then drain the watch.
			if !sendListed(first.recs, first.bad, send) {
				return
			}
			var ok bool
			rv, relist, ok = s.drain(ctx, first.w, first.rv, send)
			first.w.Stop()
			first = nil
			if !ok {
				return
			}
			continue
		}
		if relist {
			recs, bad, listRV, err := s.list(ctx)
			if err != nil {
				if !pause() {
					return
				}
				continue
			}
			if !sendListed(recs, bad, send) {
				return
			}
			rv, relist = listRV, false
		}
		w, err := s.client.CoreV1().ConfigMaps(s.ns).Watch(ctx, metav1.ListOptions{
			LabelSelector:       ManagedLabel + "=" + s.label(),
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			relist = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
			if !relist && !pause() {
				return
			}
			continue
		}
		failures = 0
		var ok bool
		rv, relist, ok = s.drain(ctx, w, rv, send)
		w.Stop()
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
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					rv = cm.ResourceVersion
				}
			case watch.Added, watch.Modified, watch.Deleted:
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					continue
				}
				rev, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
				if err != nil {
					continue
				}
				rv = cm.ResourceVersion
				if !send(storage.WatchEvent{ID: cm.Annotations[IDAnnotation], Revision: rev}) {
					return rv, false, false
				}
			}
		}
	}
}
