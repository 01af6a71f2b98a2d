package kube

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var _ storage.PageLister = (*Store)(nil)

// ListPage implements [storage.PageLister] with one list request: the
// store's ConfigMaps, selected by the status label (StatusLabel) when
// statuses are asked, so the API server reads those only. The cursor is
// the API server's continue token: pages are in the ConfigMaps' name
// order, each at the revision of the first, and a token the server no
// longer honours (it expires once etcd compacts its revision, after
// about five minutes) is an error matching storage.ErrInvalidQuery:
// start again from the first page. On a store over a custom resource
// (Options.Resource) a page of statuses is read a status at a time and
// merged in name order; its cursor keeps each status's token and the
// last name taken, and a status whose token expired is read again from
// its first page, after that name: its pages go on.
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
	return s.records.page(ctx, q)
}

// pageError is what a failed list request of a page means: a cursor the
// API server no longer honours, or never gave, is an invalid query.
func pageError(err error, q storage.Query, ns string) error {
	switch {
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return fmt.Errorf("kube: ListPage: %w: the cursor expired (%v): start from the first page", storage.ErrInvalidQuery, err)
	case apierrors.IsBadRequest(err) && q.Cursor != "":
		return fmt.Errorf("kube: ListPage: %w: not a cursor this store gave (%v)", storage.ErrInvalidQuery, err)
	}
	return wrap("ListPage", ns, err)
}
