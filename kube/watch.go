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
	ch := make(chan storage.WatchEvent)
	go s.follow(ctx, fromRevision, ch)
	return ch, nil
}

func (s *Store) follow(ctx context.Context, from uint64, ch chan<- storage.WatchEvent) {
	defer close(ch)
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
		if relist {
			recs, bad, listRV, err := s.list(ctx)
			if err != nil {
				if !pause() {
					return
				}
				continue
			}
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
