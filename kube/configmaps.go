package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// configMaps keeps a Store's records in ConfigMaps of its own, one per
// record, named by Store.Name: the record as indented JSON under
// RecordKey, its id in IDAnnotation, its status mirrored in StatusLabel
// (the index a page of live statuses selects by).
type configMaps struct {
	client kubernetes.Interface
	ns     string
	label  string              // ManagedLabel's value
	name   func(string) string // Store.Name
	claims *claims             // the Store's: every record read is remembered
}

var _ records = (*configMaps)(nil)

func (c *configMaps) api() configMapsAPI { return c.client.CoreV1().ConfigMaps(c.ns) }

// configMapsAPI is the typed client of the namespace's ConfigMaps.
type configMapsAPI = interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func (c *configMaps) encode(rec storage.Record, cm *corev1.ConfigMap) error {
	rec.Revision = 0 // the resourceVersion is the revision
	compact, err := rec.EncodeJSON()
	if err != nil {
		return err
	}
	var text bytes.Buffer
	text.Grow(len(compact) + len(compact)/4)
	if err := json.Indent(&text, compact, "", "  "); err != nil {
		return fmt.Errorf("kube: record %q: %w", rec.ID, err)
	}
	if size := len(RecordKey) + text.Len(); size > MaxConfigMapSize {
		return fmt.Errorf("kube: record %q: %w: %d bytes encoded, over a ConfigMap's %d: keep a shorter history (HistoryLimit) or shorter reasons and metadata",
			rec.ID, storage.ErrInvalidRecord, size, MaxConfigMapSize)
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Labels[ManagedLabel] = c.label
	if v, ok := statusLabel(rec.Status); ok {
		cm.Labels[StatusLabel] = v
	} else {
		delete(cm.Labels, StatusLabel)
	}
	if v, ok := recovery.RecordedRestartability(rec); ok {
		cm.Labels[RelocatableLabel] = strconv.FormatBool(bool(v))
	} else {
		delete(cm.Labels, RelocatableLabel)
	}
	cm.Annotations[IDAnnotation] = rec.ID
	cm.Data = map[string]string{RecordKey: text.String()}
	cm.BinaryData = nil
	return nil
}

// decode reads the record cm holds, a ConfigMap the API server sent, and
// remembers its claim at its revision: a write the store then makes on
// that revision need not read it first (claims).
func (c *configMaps) decode(id string, cm *corev1.ConfigMap) (storage.Record, error) {
	var rec storage.Record
	if got := cm.Annotations[IDAnnotation]; got != id {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s: %w: it holds record %q, not %q", c.ns, cm.Name, storage.ErrCorrupt, got, id)
	}
	var err error
	if text, ok := cm.Data[RecordKey]; ok {
		err = rec.DecodeJSON([]byte(text))
	} else {
		err = rec.UnmarshalBinary(cm.BinaryData[binaryRecordKey])
	}
	if err != nil {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s (record %q): %w", c.ns, cm.Name, id, err)
	}
	if rec.ID != id {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s: %w: record names itself %q", c.ns, cm.Name, storage.ErrCorrupt, rec.ID)
	}
	if rec.Revision, err = parseRevision("ConfigMap", c.ns, cm.Name, cm.ResourceVersion); err != nil {
		return storage.Record{}, err
	}
	c.claims.remember(rec)
	return rec, nil
}

// unreadable is a listed ConfigMap whose record did not decode.
func unreadable(cm *corev1.ConfigMap, err error) storage.Unreadable {
	u := storage.Unreadable{ID: cm.Annotations[IDAnnotation], Err: err}
	u.Revision, _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
	return u
}

func configMapObject(cm *corev1.ConfigMap) object {
	return object{ref: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name,
		UID: cm.UID, ResourceVersion: cm.ResourceVersion}}
}

func (c *configMaps) get(ctx context.Context, id string) (object, storage.Record, error) {
	cm, err := c.api().Get(ctx, c.name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return object{}, storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case err != nil:
		return object{}, storage.Record{}, wrap("Get", id, err)
	}
	rec, err := c.decode(id, cm)
	return configMapObject(cm), rec, err
}

func (c *configMaps) create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name(rec.ID), Namespace: c.ns}}
	if err := c.encode(rec, cm); err != nil {
		return storage.Record{}, err
	}
	created, err := c.api().Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return storage.Record{}, fmt.Errorf("kube: record %q: %w", rec.ID, storage.ErrExists)
	case err != nil:
		return storage.Record{}, wrap("Create", rec.ID, err)
	}
	return c.decode(rec.ID, created)
}

func (c *configMaps) update(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: c.name(id), Namespace: c.ns, ResourceVersion: strconv.FormatUint(expect, 10),
	}}
	if err := c.encode(next, cm); err != nil {
		return storage.Record{}, err
	}
	cm.Annotations[ReplacesAnnotation] = strconv.FormatUint(expect, 10)
	if expect == 0 {
		// An empty resourceVersion would mean "unconditionally".
		cm.ResourceVersion = "0"
	}
	updated, err := c.api().Update(ctx, cm, metav1.UpdateOptions{})
	switch {
	case err == nil:
		return c.decode(id, updated)
	case apierrors.IsNotFound(err):
		return storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case apierrors.IsConflict(err), apierrors.IsInvalid(err) && expect == 0:
		return storage.Record{}, errStale
	}
	return storage.Record{}, wrap("CompareAndSwap", id, err)
}

func (c *configMaps) remove(ctx context.Context, id string, obj object) error {
	return removeObject(ctx, c.api().Delete, id, obj)
}

func (c *configMaps) list(ctx context.Context) ([]storage.Record, []storage.Unreadable, string, error) {
	items, rv, err := listPaged[*corev1.ConfigMap](ctx, ManagedLabel+"="+c.label, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.api().List(ctx, opts)
	})
	if err != nil {
		return nil, nil, "", wrap("List", c.ns, err)
	}
	out, bad := listdecode.All(len(items), func(k int) (storage.Record, error) {
		return c.decode(items[k].Annotations[IDAnnotation], items[k])
	}, func(k int, err error) storage.Unreadable {
		return unreadable(items[k], err)
	})
	sortByID(out, bad)
	return out, bad, rv, nil
}

// page makes one list request: the store's ConfigMaps, selected by the
// status label when statuses are asked, so the API server reads those
// only; a status no label value can hold makes it select them all and
// filter here.
func (c *configMaps) page(ctx context.Context, q storage.Query) (storage.Page, error) {
	selector := ManagedLabel + "=" + c.label
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
	list, err := c.api().List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: int64(q.Limit), Continue: q.Cursor})
	if err != nil {
		return storage.Page{}, pageError(err, q, c.ns)
	}
	items := list.Items
	page := storage.Page{Next: list.Continue}
	page.Records, page.Unreadable = listdecode.All(len(items), func(k int) (storage.Record, error) {
		return c.decode(items[k].Annotations[IDAnnotation], &items[k])
	}, func(k int, err error) storage.Unreadable {
		return unreadable(&items[k], err)
	})
	if len(q.Statuses) > 0 && !labelled {
		page.Records = slices.DeleteFunc(page.Records, func(rec storage.Record) bool { return !slices.Contains(q.Statuses, rec.Status) })
	}
	return page, nil
}

func (c *configMaps) watch(ctx context.Context, rv string) (watch.Interface, error) {
	return c.api().Watch(ctx, metav1.ListOptions{
		LabelSelector:       ManagedLabel + "=" + c.label,
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
	})
}

func (c *configMaps) event(obj runtime.Object) (id, rv string, ok bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return "", "", false
	}
	return cm.Annotations[IDAnnotation], cm.ResourceVersion, true
}
