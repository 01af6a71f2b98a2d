package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/pager"
)

// records is where a Store keeps its records, one Kubernetes object
// each: ConfigMaps of its own (configMaps). Everything else a Store does
// (the Leases and their fencing, the claims it remembers, the epoch
// floor, the table, Events, exports) is the same wherever the records
// are, and written once, in Store.
//
// Its methods make one request each (list: one a page) and say what
// the API server answered in storage's terms: storage.ErrNotFound,
// storage.ErrExists, errStale for a precondition the object no longer
// meets (the Store then reads the record for its ConflictError).
type records interface {
	// get reads record id and the object that holds it.
	get(ctx context.Context, id string) (object, storage.Record, error)
	// create writes rec, a record the store does not hold.
	create(ctx context.Context, rec storage.Record) (storage.Record, error)
	// update writes next over record id if its object is still at
	// resourceVersion expect.
	update(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error)
	// remove deletes obj, the object of record id, if it is still that
	// object (its UID) at that resourceVersion.
	remove(ctx context.Context, id string, obj object) error
	// list reads every record, in pages, and returns them in the order
	// of their ids with the resourceVersion the listing was made at.
	list(ctx context.Context) ([]storage.Record, []storage.Unreadable, string, error)
	// page reads one page of q, already validated.
	page(ctx context.Context, q storage.Query) (storage.Page, error)
	// watch watches every record's object after resourceVersion rv.
	watch(ctx context.Context, rv string) (watch.Interface, error)
	// event says which record a watched object holds and its
	// resourceVersion; ok is false for an object of another kind. A
	// bookmark's object says only its resourceVersion.
	event(obj runtime.Object) (id, rv string, ok bool)
}

// errStale is what records return when an object is no longer at the
// resourceVersion (or UID) a write was conditioned on.
var errStale = errors.New("kube: the object moved on")

// object is what a Store needs of the object that holds a record: to
// make it the owner of the record's Lease (so deleting the record
// deletes the Lease), to name it in an Event, and to delete it on
// preconditions.
type object struct {
	ref corev1.ObjectReference // kind, name, UID and resourceVersion
}

// owner is the owner reference a Lease carries to the object.
func (o object) owner() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.ref.APIVersion, Kind: o.ref.Kind, Name: o.ref.Name, UID: o.ref.UID}
}

// parseRevision is a resourceVersion as a revision: on every API server
// backed by etcd a positive decimal integer; anything else is
// ErrCorrupt.
func parseRevision(kind, ns, name, rv string) (uint64, error) {
	rev, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || rev == 0 {
		return 0, fmt.Errorf("kube: %s %s/%s: %w: resourceVersion %q is not a positive integer", kind, ns, name, storage.ErrCorrupt, rv)
	}
	return rev, nil
}

// listPaged lists every object list gives for selector, each a T, and
// the resourceVersion the listing was made at. It asks for pages of
// listPageSize, so no single response holds every record at once and
// the API server serves it in pieces; a continuation that expired on
// the way (410 Gone, its revision compacted) falls back to one full
// list, as client-go's pager does.
func listPaged[T runtime.Object](ctx context.Context, selector string, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]T, string, error) {
	pages := pager.New(list)
	pages.PageSize = listPageSize
	obj, _, err := pages.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, "", err
	}
	acc, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, "", err
	}
	var items []T
	err = meta.EachListItem(obj, func(o runtime.Object) error {
		item, ok := o.(T)
		if !ok {
			var want T
			return fmt.Errorf("listed a %T, not a %T", o, want)
		}
		items = append(items, item)
		return nil
	})
	return items, acc.GetResourceVersion(), err
}

// sortByID puts a listing's records, and those it could not read, in
// the order of their ids, as storage.Lister promises.
func sortByID(recs []storage.Record, bad []storage.Unreadable) {
	slices.SortFunc(recs, func(a, b storage.Record) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(bad, func(a, b storage.Unreadable) int { return strings.Compare(a.ID, b.ID) })
}

// removeObject deletes obj, the object of record id, with del (its
// client's Delete), if it is still that object at that resourceVersion:
// records.remove of both places.
func removeObject(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, id string, obj object) error {
	rv, uid := obj.ref.ResourceVersion, obj.ref.UID
	err := del(ctx, obj.ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case apierrors.IsConflict(err):
		return errStale
	}
	return wrap("Delete", id, err)
}
