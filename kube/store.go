package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// Labels and keys the store puts on its ConfigMaps.
const (
	// ManagedLabel marks every ConfigMap the store owns; its value is the
	// store's Options.Prefix without the trailing dash, so two stores in
	// one namespace keep apart.
	ManagedLabel = "execfsm.io/store"
	// IDAnnotation holds the record's id, which a ConfigMap name may not
	// be able to carry as it is.
	IDAnnotation = "execfsm.io/id"
	// UnderAnnotation, on a record's Lease, names the Lease it is held
	// under and that Lease's epoch ("name/epoch", storage.Lease.Under):
	// the record is held while that Lease is, by the same holder at that
	// epoch, and its own Lease is never renewed.
	UnderAnnotation = "execfsm.io/under"
	// ReplacesAnnotation holds the revision a write replaced. It makes
	// every write differ from the object it replaces: the API server
	// turns an update that changes nothing into a no-op that keeps the
	// resourceVersion, and a store's revisions must go up on every write.
	ReplacesAnnotation = "execfsm.io/replaces"
	// RecordKey is the key of a ConfigMap's data that holds the record,
	// as an indented JSON document (storage.Record.EncodeJSON):
	// `kubectl get cm NAME -o jsonpath='{.data.record\.json}'` prints it.
	RecordKey = "record.json"
	// binaryRecordKey held the record in binaryData before it was text;
	// such ConfigMaps are still read, and written as text.
	binaryRecordKey = "record"
)

// MaxConfigMapSize is how much a ConfigMap's data may hold, keys
// included: the API server refuses more.
const MaxConfigMapSize = 1 << 20

// Defaults for zero Options.
const (
	DefaultPrefix  = "execfsm-"
	DefaultTimeout = 10 * time.Second
)

// Options configure a [Store].
type Options struct {
	// Namespace holds the ConfigMaps (and Leases); required.
	Namespace string
	// Prefix starts every ConfigMap and Lease name (default
	// DefaultPrefix). It must be a DNS-1123 label prefix ending in '-'.
	Prefix string
	// Timeout applies to calls whose context has no deadline.
	Timeout time.Duration
}

// Store is a [storage.Store], [storage.Lister], [storage.PageLister],
// [storage.Watcher] and [storage.Deleter] on the Kubernetes API: one ConfigMap per
// execution, written with optimistic concurrency on its resourceVersion.
//
// Why ConfigMaps and not a custom resource: a ConfigMap needs nothing
// installed in the cluster (no CRD, no conversion webhook, no cluster
// admin to apply either), every cluster's RBAC already knows it, and the
// record is opaque to Kubernetes anyway: it is stored as indented JSON
// under the data key [RecordKey] (kubectl prints it), its status mirrored
// into a label so
// `kubectl get cm -l execfsm.io/status=relocating` finds executions by
// status. A CRD would add schema validation and a status subresource the
// store does not need, since every write already goes through the
// transition table.
//
// A record's revision is the ConfigMap's resourceVersion. Kubernetes calls
// it opaque; on every API server backed by etcd it is etcd's revision, a
// decimal integer, and the store refuses (ErrCorrupt) one that is not.
type Store struct {
	client  kubernetes.Interface
	ns      string
	prefix  string
	timeout time.Duration

	// claims are the records' claims at the revisions last seen, so a
	// write need not read the record it replaces first.
	claims claims

	// beforeTakeOverWrite, when set (by tests only), runs in Acquire
	// after the Lease is taken and the record read, just before the
	// take-over is written: a write there makes that write conflict.
	beforeTakeOverWrite func()
}

var (
	_ storage.Store   = (*Store)(nil)
	_ storage.Lister  = (*Store)(nil)
	_ storage.Watcher = (*Store)(nil)
)

// New returns a store using client.
func New(client kubernetes.Interface, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("kube: nil client")
	}
	if errs := validation.IsDNS1123Label(opts.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kube: namespace %q: %s", opts.Namespace, strings.Join(errs, "; "))
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "-") || len(validation.IsDNS1123Label(strings.TrimSuffix(opts.Prefix, "-"))) > 0 || len(opts.Prefix) > 40 {
		return nil, fmt.Errorf("kube: prefix %q: want a DNS-1123 label of at most 39 characters, then '-'", opts.Prefix)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("kube: negative Timeout %v", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Store{client: client, ns: opts.Namespace, prefix: opts.Prefix, timeout: opts.Timeout}, nil
}

// Namespace returns the namespace the store writes in.
func (s *Store) Namespace() string { return s.ns }

// Name returns the name of the ConfigMap (and Lease) of record id: the
// prefix and the id itself when that makes a valid name, otherwise the
// prefix and a hash of the id (the id is kept in an annotation).
func (s *Store) Name(id string) string {
	name := s.prefix + id
	if len(name) <= validation.DNS1123SubdomainMaxLength-6 && len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "h-" + hex.EncodeToString(sum[:12])
}

func (s *Store) label() string { return strings.TrimSuffix(s.prefix, "-") }

func (s *Store) call(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if s.client == nil {
		return nil, nil, errZeroStore
	}
	if err := storage.CheckContext(ctx, "kube", op); err != nil {
		return nil, nil, err
	}
	// A call without a deadline gets the store's timeout, so an
	// unreachable backend yields an error, not a hang.
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// errZeroStore is what the methods of a zero Store return: it has no
// client to call.
var errZeroStore = errors.New("kube: zero Store: make one with New")

// statusLabel makes a status fit a label value (63 characters of
// [A-Za-z0-9._-]); a status that does not fit is left out.
func statusLabel(status string) (string, bool) {
	return status, len(validation.IsValidLabelValue(status)) == 0
}

func (s *Store) encode(rec storage.Record, cm *corev1.ConfigMap) error {
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
	cm.Labels[ManagedLabel] = s.label()
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

// StatusLabel mirrors the record's status on its ConfigMap.
const StatusLabel = "execfsm.io/status"

// RelocatableLabel mirrors whether the execution's work can be restarted
// elsewhere ([recovery.MetaRelocatable]: "true" or "false") on its
// ConfigMap, and on the controller's Job and pod, so operators and drain
// tooling can select the controllers that can move:
// kubectl get jobs -l execfsm.io/relocatable=false.
const RelocatableLabel = "execfsm.io/relocatable"

// decode reads the record cm holds, a ConfigMap the API server sent, and
// remembers its claim at its revision: a write this store then makes on
// that revision need not read it first (claims).
func (s *Store) decode(id string, cm *corev1.ConfigMap) (storage.Record, error) {
	var rec storage.Record
	if got := cm.Annotations[IDAnnotation]; got != id {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s: %w: it holds record %q, not %q", s.ns, cm.Name, storage.ErrCorrupt, got, id)
	}
	var err error
	if text, ok := cm.Data[RecordKey]; ok {
		err = rec.DecodeJSON([]byte(text))
	} else {
		err = rec.UnmarshalBinary(cm.BinaryData[binaryRecordKey])
	}
	if err != nil {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s (record %q): %w", s.ns, cm.Name, id, err)
	}
	if rec.ID != id {
		return storage.Record{}, fmt.Errorf("kube: ConfigMap %s/%s: %w: record names itself %q", s.ns, cm.Name, storage.ErrCorrupt, rec.ID)
	}
	if rec.Revision, err = s.revisionOf(cm); err != nil {
		return storage.Record{}, err
	}
	s.claims.remember(rec)
	return rec, nil
}

// revisionOf is cm's resourceVersion as a revision: on every API server
// backed by etcd a positive decimal integer; anything else is ErrCorrupt.
func (s *Store) revisionOf(cm *corev1.ConfigMap) (uint64, error) {
	rev, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if err != nil || rev == 0 {
		return 0, fmt.Errorf("kube: ConfigMap %s/%s: %w: resourceVersion %q is not a positive integer", s.ns, cm.Name, storage.ErrCorrupt, cm.ResourceVersion)
	}
	return rev, nil
}

func wrap(op, id string, err error) error { return fmt.Errorf("kube: %s %q: %w", op, id, err) }

// Get implements [storage.Store]. An id no record can have (empty,
// too long, not UTF-8) is refused before any request.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := checkID("Get", id); err != nil {
		return storage.Record{}, err
	}
	ctx, cancel, err := s.call(ctx, "Get")
	if err != nil {
		return storage.Record{}, err
	}
	defer cancel()
	_, rec, err := s.getConfigMap(ctx, id)
	return rec, err
}

// getConfigMap reads record id and the ConfigMap that holds it.
func (s *Store) getConfigMap(ctx context.Context, id string) (*corev1.ConfigMap, storage.Record, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.ns).Get(ctx, s.Name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case err != nil:
		return nil, storage.Record{}, wrap("Get", id, err)
	}
	rec, err := s.decode(id, cm)
	return cm, rec, err
}

// Create implements [storage.Store].
func (s *Store) Create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	if err := rec.Validate(); err != nil {
		return storage.Record{}, err
	}
	ctx, cancel, err := s.call(ctx, "Create")
	if err != nil {
		return storage.Record{}, err
	}
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.Name(rec.ID), Namespace: s.ns}}
	if err := s.encode(rec, cm); err != nil {
		return storage.Record{}, err
	}
	created, err := s.client.CoreV1().ConfigMaps(s.ns).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return storage.Record{}, fmt.Errorf("kube: record %q: %w", rec.ID, storage.ErrExists)
	case err != nil:
		return storage.Record{}, wrap("Create", rec.ID, err)
	}
	return s.decode(rec.ID, created)
}

// CompareAndSwap implements [storage.Store] with an update carrying
// the expected resourceVersion: the API server answers 409 Conflict when
// it has moved on, and the store then reads the current record for the
// ConflictError. The API server compares nothing but the resourceVersion,
// so the store must know the claim the record carries at expect to refuse
// a write that would change it. When expect is the resourceVersion this
// store last read, listed or wrote the record at, it knows (a ConfigMap never
// changes under one resourceVersion) and the write is one round trip;
// otherwise it reads the record first, and a stale expect costs only that
// read.
func (s *Store) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if next.ID != id {
		return storage.Record{}, fmt.Errorf("kube: CompareAndSwap %q: %w: record id is %q", id, storage.ErrInvalidRecord, next.ID)
	}
	if err := next.Validate(); err != nil {
		return storage.Record{}, err
	}
	ctx, cancel, err := s.call(ctx, "CompareAndSwap")
	if err != nil {
		return storage.Record{}, err
	}
	defer cancel()
	if claim, ok := s.claims.at(id, expect); ok {
		// The ConfigMap at expect carried claim; the update lands only
		// if it is still that one.
		if claim != next.Claim() {
			return storage.Record{}, storage.ClaimChanged(id, claim, next.Claim())
		}
		return s.update(ctx, id, expect, next)
	}
	cur, err := s.Get(ctx, id)
	if err != nil {
		return storage.Record{}, err
	}
	if cur.Revision != expect {
		return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	if err := storage.KeepsClaim(id, cur, next); err != nil {
		return storage.Record{}, err
	}
	return s.update(ctx, id, expect, next)
}

// update writes next over the ConfigMap at resourceVersion expect.
func (s *Store) update(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name(id), Namespace: s.ns, ResourceVersion: strconv.FormatUint(expect, 10),
	}}
	if err := s.encode(next, cm); err != nil {
		return storage.Record{}, err
	}
	cm.Annotations[ReplacesAnnotation] = strconv.FormatUint(expect, 10)
	if expect == 0 {
		// An empty resourceVersion would mean "unconditionally".
		cm.ResourceVersion = "0"
	}
	updated, err := s.client.CoreV1().ConfigMaps(s.ns).Update(ctx, cm, metav1.UpdateOptions{})
	switch {
	case err == nil:
		return s.decode(id, updated)
	case apierrors.IsNotFound(err):
		return storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case apierrors.IsConflict(err), apierrors.IsInvalid(err) && expect == 0:
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return storage.Record{}, gerr
		}
		return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	return storage.Record{}, wrap("CompareAndSwap", id, err)
}

// List implements [storage.Lister], in pages of 500 ConfigMaps (one
// request each, all at the revision of the first). A ConfigMap whose
// record does not decode is listed apart, and the others are listed as
// usual.
func (s *Store) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	recs, bad, _, err := s.list(ctx)
	return recs, bad, err
}

// listPageSize is how many ConfigMaps one list request asks for: the
// API server's guidance for large collections (kubectl's and
// client-go's pager's default), a few megabytes of records a page.
const listPageSize = 500

func (s *Store) list(ctx context.Context) ([]storage.Record, []storage.Unreadable, string, error) {
	ctx, cancel, err := s.call(ctx, "List")
	if err != nil {
		return nil, nil, "", err
	}
	defer cancel()
	// Pages, so no single response holds every record at once and the
	// API server serves it in pieces; a continuation that expired on the
	// way (410 Gone, its revision compacted) falls back to one full list.
	pages := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.client.CoreV1().ConfigMaps(s.ns).List(ctx, opts)
	})
	pages.PageSize = listPageSize
	obj, _, err := pages.List(ctx, metav1.ListOptions{LabelSelector: ManagedLabel + "=" + s.label()})
	if err != nil {
		return nil, nil, "", wrap("List", s.ns, err)
	}
	items, rv, err := configMapsOf(obj)
	if err != nil {
		return nil, nil, "", wrap("List", s.ns, err)
	}
	out, bad := listdecode.All(len(items), func(k int) (storage.Record, error) {
		cm := items[k]
		return s.decode(cm.Annotations[IDAnnotation], cm)
	}, func(k int, err error) storage.Unreadable {
		cm := items[k]
		u := storage.Unreadable{ID: cm.Annotations[IDAnnotation], Err: err}
		u.Revision, _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
		return u
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	sort.Slice(bad, func(i, j int) bool { return bad[i].ID < bad[j].ID })
	return out, bad, rv, nil
}

// configMapsOf returns the ConfigMaps of what the pager listed (one
// page's ConfigMapList, or the pages' items together) and the
// resourceVersion the listing was made at.
func configMapsOf(obj runtime.Object) ([]*corev1.ConfigMap, string, error) {
	acc, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, "", err
	}
	var items []*corev1.ConfigMap
	err = meta.EachListItem(obj, func(o runtime.Object) error {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("listed a %T, not a ConfigMap", o)
		}
		items = append(items, cm)
		return nil
	})
	return items, acc.GetResourceVersion(), err
}
