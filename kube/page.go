package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ storage.PageLister = (*Store)(nil)

// ListPage implements [storage.PageLister] with one list request: the
// store's ConfigMaps, selected by the status label (StatusLabel) when
// statuses are asked, so the API server reads those only. The cursor is
// the API server's continue token: pages are in the ConfigMaps' name
// order, each at the revision of the first, and a token the server no
// longer honours (it expires once etcd compacts its revision, after
// about five minutes) is an error matching storage.ErrInvalidQuery:
// start again from the first page.
//
// A status that does not fit a label value (longer than 63 characters,
// or with characters a label refuses) has no label to select by: a
// query naming one selects the store's ConfigMaps and filters them
// here, so its pages may hold fewer records than asked.
func (s *Store) ListPage(ctx context.Context, q storage.Query) (storage.Page, error) {
	if err := q.Validate(); err != nil {
		return storage.Page{}, err
	}
	ctx, cancel, err := s.call(ctx, "ListPage")
	if err != nil {
		return storage.Page{}, err
	}
	defer cancel()
	selector := ManagedLabel + "=" + s.label()
	labelled := true
	for _, status := range q.Statuses {
		if _, ok := statusLabel(status); !ok {
			labelled = false
		}
	}
	if len(q.Statuses) > 0 && labelled {
		statuses := slices.Clone(q.Statuses)
		slices.Sort(statuses)
		selector += "," + StatusLabel + " in (" + strings.Join(slices.Compact(statuses), ",") + ")"
	}
	list, err := s.client.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{LabelSelector: selector,
		Limit: int64(q.Limit), Continue: q.Cursor})
	switch {
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return storage.Page{}, fmt.Errorf("kube: ListPage: %w: the cursor expired (%v): start from the first page", storage.ErrInvalidQuery, err)
	case apierrors.IsBadRequest(err) && q.Cursor != "":
		return storage.Page{}, fmt.Errorf("kube: ListPage: %w: not a cursor this store gave (%v)", storage.ErrInvalidQuery, err)
	case err != nil:
		return storage.Page{}, wrap("ListPage", s.ns, err)
	}
	items := list.Items
	page := storage.Page{Next: list.Continue}
	page.Records, page.Unreadable = listdecode.All(len(items), func(k int) (storage.Record, error) {
		return s.decode(items[k].Annotations[IDAnnotation], &items[k])
	}, func(k int, err error) storage.Unreadable {
		u := storage.Unreadable{ID: items[k].Annotations[IDAnnotation], Err: err}
		u.Revision, _ = strconv.ParseUint(items[k].ResourceVersion, 10, 64)
		return u
	})
	if len(q.Statuses) > 0 && !labelled {
		page.Records = slices.DeleteFunc(page.Records, func(rec storage.Record) bool { return !slices.Contains(q.Statuses, rec.Status) })
	}
	return page, nil
}
