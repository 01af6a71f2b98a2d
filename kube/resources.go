package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// DefaultRecordPath is where a [Resource] keeps the rest of a record
// when its RecordPath is empty.
const DefaultRecordPath = "status.execfsm"

// Resource keeps a [Store]'s records in the status of a custom resource
// the user already has (a Volcano Job, a RayJob, a FlinkDeployment): one
// record per resource, named by it, so that `kubectl get` on the user's
// own resource shows the execution's state and there is no second
// object to keep in line with it. Give it as [Options].Resource.
//
// The state is written to a status field the resource already has
// (StatusPath, the one its printer column shows); the rest of the record
// (previous state, reason, owner, epoch, the audit trail, metadata) to
// one status field of its own (RecordPath), as an object:
//
//	status:
//	  state: {phase: running}          # StatusPath: status.state.phase
//	  execfsm:                         # RecordPath
//	    id: render-42
//	    previous: pending
//	    owner: controller-7f9c
//	    epoch: 3
//	    updatedAt: "2026-12-07T12:00:00Z"
//	    since: "2026-12-07T12:00:00Z"
//	    reason: controller started
//	    history: [{from: pending, to: running, epoch: 3, at: ..., revision: 41}]
//	    historyLimit: 0
//	    meta: [{name: restarts, value: "1"}]
//	    replaces: "41"
//
// Every write is a JSON merge patch of the status subresource carrying
// the resourceVersion it was made on, which the API server checks: a
// compare-and-swap in one request that sends neither the spec, nor the
// labels and annotations, nor the status fields it does not own, so
// none of them is ever touched. The record's revision is the resource's
// resourceVersion; a change of the spec moves it too, and a write made
// at the revision before then conflicts and is made again on the record
// read afresh, as any conflict is.
//
// The CRD must have the status subresource, declare RecordPath's field
// with x-kubernetes-preserve-unknown-fields, and should declare
// StatusPath a selectable field (selectableFields, Kubernetes 1.32 and
// later): the API server then selects a page of live statuses from its
// own index; without it the store reads every resource of the namespace
// and filters them (docs/kubernetes.md shows a CRD).
//
// A resource whose status has no record is not a record yet: Get says
// storage.ErrNotFound and listings leave it out. Create writes the
// first record into the resource named by the record's id, making the
// resource with New when there is none. An id no resource can be named
// by (not a DNS subdomain) names its resource "execfsm-h-" and a hash
// of it; the record keeps the id.
type Resource struct {
	// Client reads and writes the resources (dynamic.NewForConfig).
	Client dynamic.Interface
	// GroupVersionResource names them, e.g. {Group: "batch.volcano.sh",
	// Version: "v1alpha1", Resource: "jobs"}.
	GroupVersionResource schema.GroupVersionResource
	// Kind is their kind ("Job"): the Leases name it as their owner (so
	// deleting a resource deletes its record's Lease) and Events as their
	// object.
	Kind string
	// StatusPath is the status field that holds the state's name, its
	// path from the object's root: "status.state.phase".
	StatusPath string
	// RecordPath is the status field that holds the rest of the record
	// (default DefaultRecordPath). It must not be StatusPath, hold it or
	// be held by it, nor be status.conditions.
	RecordPath string
	// Selector, if not empty, is a label selector the resources holding
	// records match: the others in the namespace are never listed nor
	// watched.
	Selector string
	// New makes the resource a Create writes the first record into when
	// there is none: it carries the user's spec (its status is ignored:
	// the API server drops it); the store names it after the record's id
	// and puts it in the store's namespace. Nil: Create of a record
	// without its resource fails, matching storage.ErrNotFound.
	New func(id string) (*unstructured.Unstructured, error)
	// Progress, if not nil, says where each state stands
	// (ProgressOf(roles)), and the store writes the standard conditions
	// (Conditions) at status.conditions and the generation it read at
	// status.observedGeneration, in the same write as the record:
	// `kubectl wait --for=condition=Ready` then waits for the execution
	// to end well, and kstatus tells InProgress, Current and Failed. A
	// state it does not know makes Ready Unknown. Conditions of other
	// types are kept as they are.
	Progress func(state string) (Progress, bool)
}

// ResourceKind returns the kind of the custom resource the store keeps
// its records in (Options.Resource), and false for a store of
// ConfigMaps: what a controller-runtime controller watches.
func (s *Store) ResourceKind() (schema.GroupVersionKind, bool) {
	r, ok := s.records.(*resources)
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	return schema.FromAPIVersionAndKind(r.apiVersion, r.kind), true
}

// ExecutionOf returns the id of the execution u, one of the store's
// custom resources, is the record of (its name, or the id its record
// keeps when the name was made from a hash), and whether it holds a
// record yet: a resource its user created has none until Create writes
// the first. It returns "", false for an object of another kind, and on
// a store of ConfigMaps.
func (s *Store) ExecutionOf(u *unstructured.Unstructured) (id string, recorded bool) {
	r, ok := s.records.(*resources)
	if !ok || u == nil || u.GetAPIVersion() != r.apiVersion || u.GetKind() != r.kind {
		return "", false
	}
	if !r.holds(u) {
		return u.GetName(), false
	}
	return r.idOf(u), true
}

// resources keeps a Store's records in a custom resource's status (see
// Resource).
type resources struct {
	client     dynamic.ResourceInterface
	ns         string
	apiVersion string
	kind       string
	statusPath []string
	recordPath []string
	selector   string
	fresh      func(string) (*unstructured.Unstructured, error)
	claims     *claims
	progress   func(string) (Progress, bool)

	// observed are, with progress, each resource's generation and
	// conditions at the resourceVersion last read: what a write on that
	// resourceVersion keeps of the conditions and observes.
	observed observations

	// unselectable is set once the API server refused a field selector
	// on the status field: its CRD does not declare it selectable, and
	// pages of statuses are filtered here.
	unselectable atomic.Bool
}

var _ records = (*resources)(nil)

// newResources checks r and makes its records in namespace ns.
func newResources(r *Resource, ns string, remembered *claims) (*resources, error) {
	var errs []error
	if r.Client == nil {
		errs = append(errs, errors.New("kube: Resource.Client is nil"))
	}
	gvr := r.GroupVersionResource
	if gvr.Version == "" || gvr.Resource == "" {
		errs = append(errs, fmt.Errorf("kube: Resource.GroupVersionResource %v: want a version and a resource", gvr))
	}
	if r.Kind == "" {
		errs = append(errs, errors.New("kube: Resource.Kind is empty"))
	}
	statusPath, err := statusField("StatusPath", r.StatusPath)
	if err != nil {
		errs = append(errs, err)
	}
	recordPathText := r.RecordPath
	if recordPathText == "" {
		recordPathText = DefaultRecordPath
	}
	recordPath, err := statusField("RecordPath", recordPathText)
	if err != nil {
		errs = append(errs, err)
	}
	if statusPath != nil && recordPath != nil {
		n := min(len(statusPath), len(recordPath))
		if slices.Equal(statusPath[:n], recordPath[:n]) {
			errs = append(errs, fmt.Errorf("kube: Resource.RecordPath %q and StatusPath %q: one holds the other", recordPathText, r.StatusPath))
		}
		if slices.Equal(recordPath, []string{"status", "conditions"}) || slices.Equal(recordPath, []string{"status", "observedGeneration"}) {
			errs = append(errs, fmt.Errorf("kube: Resource.RecordPath %q is a field the store writes apart", recordPathText))
		}
	}
	if _, err := labels.Parse(r.Selector); err != nil {
		errs = append(errs, fmt.Errorf("kube: Resource.Selector %q: %w", r.Selector, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &resources{client: r.Client.Resource(gvr).Namespace(ns), ns: ns, apiVersion: gvr.GroupVersion().String(),
		kind: r.Kind, statusPath: statusPath, recordPath: recordPath, selector: r.Selector, fresh: r.New, claims: remembered,
		progress: r.Progress}, nil
}

// statusField splits a field's path, which must be under status.
func statusField(option, path string) ([]string, error) {
	parts := strings.Split(strings.TrimPrefix(path, "."), ".")
	if len(parts) < 2 || parts[0] != "status" || slices.Contains(parts, "") {
		return nil, fmt.Errorf("kube: Resource.%s %q: want a field under status, as status.state.phase", option, path)
	}
	return parts, nil
}

// resourceRecord is a record as a resource's status holds it at
// RecordPath (its state is at StatusPath). Every field is written on
// every write, empty ones too: a merge patch leaves a field it does not
// name as it was.
type resourceRecord struct {
	ID           string          `json:"id"`
	Previous     string          `json:"previous"`
	Owner        string          `json:"owner"`
	Epoch        uint64          `json:"epoch"`
	UpdatedAt    time.Time       `json:"updatedAt"`
	Since        time.Time       `json:"since"`
	Reason       string          `json:"reason"`
	History      []storage.Entry `json:"history"`
	HistoryLimit int             `json:"historyLimit"`
	// Meta is a list, not an object: a merge patch replaces a list, but
	// merges an object's keys, which would keep a key a write removed.
	Meta []metaPair `json:"meta"`
	// Replaces is the resourceVersion the write replaced: it makes
	// every write differ from the object it replaces (the API server
	// keeps the resourceVersion of a patch that changes nothing).
	Replaces string `json:"replaces"`
}

// metaPair is one key of a record's metadata.
type metaPair struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (r *resources) api() dynamic.ResourceInterface { return r.client }

func (r *resources) describe(name string) string {
	return fmt.Sprintf("%s %s/%s", r.kind, r.ns, name)
}

// holds reports whether u's status has a record.
func (r *resources) holds(u *unstructured.Unstructured) bool {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, r.recordPath...)
	return found && v != nil
}

// decode reads the record u holds, which must hold one, and remembers
// its claim at its revision (claims).
func (r *resources) decode(u *unstructured.Unstructured) (storage.Record, error) {
	name := u.GetName()
	raw, _, _ := unstructured.NestedFieldNoCopy(u.Object, r.recordPath...)
	fields, ok := raw.(map[string]any)
	if !ok {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: %s is a %T, not an object", r.describe(name), storage.ErrCorrupt, strings.Join(r.recordPath, "."), raw)
	}
	state, found, err := unstructured.NestedString(u.Object, r.statusPath...)
	if err != nil || !found {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: it holds a record but no state at %s", r.describe(name), storage.ErrCorrupt, strings.Join(r.statusPath, "."))
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: %v", r.describe(name), storage.ErrCorrupt, err)
	}
	var held resourceRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	// A field this build does not know is a newer writer's: the record
	// is unreadable here, never overwritten without it.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&held); err != nil {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: %s: %v", r.describe(name), storage.ErrCorrupt, strings.Join(r.recordPath, "."), err)
	}
	if r.name(held.ID) != name {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: it holds record %q", r.describe(name), storage.ErrCorrupt, held.ID)
	}
	rec := storage.Record{ID: held.ID, Status: state, Previous: held.Previous, Owner: held.Owner, Epoch: held.Epoch,
		UpdatedAt: held.UpdatedAt, Since: held.Since, Reason: held.Reason, HistoryLimit: held.HistoryLimit}
	if len(held.Meta) > 0 {
		rec.Meta = make(map[string]string, len(held.Meta))
		for _, kv := range held.Meta {
			if _, dup := rec.Meta[kv.Name]; dup {
				return storage.Record{}, fmt.Errorf("kube: %s: %w: metadata %q twice", r.describe(name), storage.ErrCorrupt, kv.Name)
			}
			rec.Meta[kv.Name] = kv.Value
		}
	}
	// The checks a decoded record gets (Record.DecodeJSON's): its trail,
	// then the record. Their errors say what is wrong with it, a stored
	// record that is corrupt, not an invalid write.
	if rec.History, err = storage.NewTrail(held.History...); err == nil {
		err = rec.Validate()
	}
	if err != nil {
		return storage.Record{}, fmt.Errorf("kube: %s: %w: %v", r.describe(name), storage.ErrCorrupt, err)
	}
	if rec.Revision, err = parseRevision(r.kind, r.ns, name, u.GetResourceVersion()); err != nil {
		return storage.Record{}, err
	}
	r.claims.remember(rec)
	if err := r.observe(u); err != nil {
		return storage.Record{}, err
	}
	return rec, nil
}

// observe remembers u's generation and conditions at its
// resourceVersion, when the store writes conditions.
func (r *resources) observe(u *unstructured.Unstructured) error {
	if r.progress == nil {
		return nil
	}
	rev, err := parseRevision(r.kind, r.ns, u.GetName(), u.GetResourceVersion())
	if err != nil {
		return err
	}
	prior, err := conditionsOf(u)
	if err != nil {
		return fmt.Errorf("kube: %s: %w: status.conditions: %v", r.describe(u.GetName()), storage.ErrCorrupt, err)
	}
	r.observed.remember(u.GetName(), observation{revision: rev, generation: u.GetGeneration(), conditions: prior})
	return nil
}

// conditionsOf reads u's status.conditions.
func conditionsOf(u *unstructured.Unstructured) ([]metav1.Condition, error) {
	raw, found, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil || !found {
		return nil, err
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var out []metav1.Condition
	err = json.Unmarshal(data, &out)
	return out, err
}

// patch is the merge patch that writes rec over the resource at
// resourceVersion expect.
func (r *resources) patch(rec storage.Record, expect uint64) ([]byte, error) {
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	if rec.Epoch > math.MaxInt64 {
		return nil, fmt.Errorf("kube: record %q: %w: epoch %d does not fit a resource's integer", rec.ID, storage.ErrInvalidRecord, rec.Epoch)
	}
	held := resourceRecord{ID: rec.ID, Previous: rec.Previous, Owner: rec.Owner, Epoch: rec.Epoch, UpdatedAt: rec.UpdatedAt,
		Since: rec.Since, Reason: rec.Reason, History: rec.History.Entries(), HistoryLimit: rec.HistoryLimit,
		Replaces: strconv.FormatUint(expect, 10)}
	for _, name := range slices.Sorted(maps.Keys(rec.Meta)) {
		held.Meta = append(held.Meta, metaPair{Name: name, Value: rec.Meta[name]})
	}
	status := map[string]any{}
	setField(status, r.statusPath[1:], rec.Status)
	setField(status, r.recordPath[1:], held)
	if r.progress != nil {
		seen, ok := r.observed.at(r.name(rec.ID), expect)
		if !ok {
			return nil, errUnobserved
		}
		progress, _ := r.progress(rec.Status)
		status["conditions"] = Conditions(progress, rec, seen.generation, seen.conditions)
		status["observedGeneration"] = seen.generation
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": strconv.FormatUint(expect, 10)},
		"status":   status,
	})
}

// setField sets the field at path in m, making the objects on the way.
func setField(m map[string]any, path []string, v any) {
	for _, part := range path[:len(path)-1] {
		next, ok := m[part].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[part] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func (r *resources) object(u *unstructured.Unstructured) object {
	return object{ref: corev1.ObjectReference{APIVersion: r.apiVersion, Kind: r.kind, Namespace: u.GetNamespace(),
		Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}}
}

// name is the name of record id's resource: the id itself, as the user
// names their resources; an id no resource can be named by is hashed
// (resourceHashPrefix and 24 hex digits of its SHA-256), and the record
// keeps the id.
func (r *resources) name(id string) string {
	if len(validation.IsDNS1123Subdomain(id)) == 0 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return resourceHashPrefix + hex.EncodeToString(sum[:12])
}

// resourceHashPrefix starts the name of a resource whose record's id
// could not be its name.
const resourceHashPrefix = "execfsm-h-"

// idOf is the id of the record u holds, or its name when the id cannot
// be read.
func (r *resources) idOf(u *unstructured.Unstructured) string {
	if id, ok, _ := unstructured.NestedString(u.Object, append(slices.Clone(r.recordPath), "id")...); ok && id != "" {
		return id
	}
	return u.GetName()
}

func (r *resources) get(ctx context.Context, id string) (object, storage.Record, error) {
	u, err := r.api().Get(ctx, r.name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return object{}, storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case err != nil:
		return object{}, storage.Record{}, wrap("Get", id, err)
	case !r.holds(u):
		return object{}, storage.Record{}, fmt.Errorf("kube: record %q: %w: %s holds none yet", id, storage.ErrNotFound, r.describe(u.GetName()))
	}
	rec, err := r.decode(u)
	return r.object(u), rec, err
}

// maxCreateAttempts bounds how often Create writes the first record
// into a resource that changed under it (its own controller's status,
// a spec edited meanwhile) before it gives up.
const maxCreateAttempts = 16

func (r *resources) create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	for range maxCreateAttempts {
		u, err := r.api().Get(ctx, r.name(rec.ID), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if u, err = r.make(ctx, rec.ID); apierrors.IsAlreadyExists(err) {
				continue // made meanwhile: read it
			}
			if err != nil {
				return storage.Record{}, err
			}
		case err != nil:
			return storage.Record{}, wrap("Create", rec.ID, err)
		}
		if r.holds(u) {
			return storage.Record{}, fmt.Errorf("kube: record %q: %w", rec.ID, storage.ErrExists)
		}
		if err := r.observe(u); err != nil {
			return storage.Record{}, err
		}
		rv, err := parseRevision(r.kind, r.ns, u.GetName(), u.GetResourceVersion())
		if err != nil {
			return storage.Record{}, err
		}
		written, err := r.update(ctx, rec.ID, rv, rec)
		if errors.Is(err, errStale) {
			continue // the resource changed after it was read: read it again
		}
		return written, err
	}
	return storage.Record{}, wrap("Create", rec.ID, fmt.Errorf("%s changed under each of %d attempts", r.describe(r.name(rec.ID)), maxCreateAttempts))
}

// make creates the resource of record id from Resource.New, named and
// placed by the store.
func (r *resources) make(ctx context.Context, id string) (*unstructured.Unstructured, error) {
	name := r.name(id)
	if r.fresh == nil {
		return nil, fmt.Errorf("kube: Create %q: %w: there is no %s, and Resource.New is nil", id, storage.ErrNotFound, r.describe(name))
	}
	u, err := r.fresh(id)
	switch {
	case err != nil:
		return nil, fmt.Errorf("kube: Create %q: Resource.New: %w", id, err)
	case u == nil:
		return nil, fmt.Errorf("kube: Create %q: Resource.New returned nil", id)
	case u.GetNamespace() != "" && u.GetNamespace() != r.ns:
		return nil, fmt.Errorf("kube: Create %q: Resource.New made one in namespace %s, not %s", id, u.GetNamespace(), r.ns)
	case u.GetAPIVersion() != r.apiVersion || u.GetKind() != r.kind:
		return nil, fmt.Errorf("kube: Create %q: Resource.New made a %s %s, not a %s %s", id, u.GetAPIVersion(), u.GetKind(), r.apiVersion, r.kind)
	}
	u = u.DeepCopy()
	u.SetNamespace(r.ns)
	u.SetName(name)
	created, err := r.api().Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, wrap("Create", id, err)
	}
	return created, err
}

func (r *resources) update(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if expect == 0 {
		// A patch at resourceVersion 0 is unconditional: no record is
		// at revision 0.
		return storage.Record{}, errStale
	}
	body, err := r.patch(next, expect)
	if errors.Is(err, errUnobserved) {
		// The conditions to keep are those of the resource at expect:
		// read it (a write at a revision this store did not read).
		u, gerr := r.api().Get(ctx, r.name(id), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
		case gerr != nil:
			return storage.Record{}, wrap("CompareAndSwap", id, gerr)
		case u.GetResourceVersion() != strconv.FormatUint(expect, 10):
			return storage.Record{}, errStale
		}
		if err := r.observe(u); err != nil {
			return storage.Record{}, err
		}
		body, err = r.patch(next, expect)
	}
	if err != nil {
		return storage.Record{}, err
	}
	u, err := r.api().Patch(ctx, r.name(id), types.MergePatchType, body, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		if !r.holds(u) {
			return storage.Record{}, fmt.Errorf("kube: record %q: %w: %s dropped the record written: its CRD must keep %s (x-kubernetes-preserve-unknown-fields)",
				id, storage.ErrCorrupt, r.describe(u.GetName()), strings.Join(r.recordPath, "."))
		}
		return r.decode(u)
	case apierrors.IsNotFound(err):
		return storage.Record{}, fmt.Errorf("kube: record %q: %w", id, storage.ErrNotFound)
	case apierrors.IsConflict(err):
		return storage.Record{}, errStale
	case apierrors.IsInvalid(err), apierrors.IsRequestEntityTooLargeError(err):
		// The CRD's schema refuses it (a state its enum does not
		// have), or it is too large for a resource: nothing written.
		return storage.Record{}, fmt.Errorf("kube: record %q: %w: %v", id, storage.ErrInvalidRecord, err)
	}
	return storage.Record{}, wrap("CompareAndSwap", id, err)
}

func (r *resources) remove(ctx context.Context, id string, obj object) error {
	return removeObject(ctx, func(ctx context.Context, name string, opts metav1.DeleteOptions) error {
		return r.api().Delete(ctx, name, opts)
	}, id, obj)
}

// decodeAll reads the records of the listed resources that hold one.
func (r *resources) decodeAll(items []*unstructured.Unstructured) ([]storage.Record, []storage.Unreadable) {
	holding := slices.DeleteFunc(slices.Clone(items), func(u *unstructured.Unstructured) bool { return !r.holds(u) })
	return listdecode.All(len(holding), func(k int) (storage.Record, error) {
		return r.decode(holding[k])
	}, func(k int, err error) storage.Unreadable {
		u := storage.Unreadable{ID: r.idOf(holding[k]), Err: err}
		u.Revision, _ = strconv.ParseUint(holding[k].GetResourceVersion(), 10, 64)
		return u
	})
}

func (r *resources) list(ctx context.Context) ([]storage.Record, []storage.Unreadable, string, error) {
	items, rv, err := listPaged[*unstructured.Unstructured](ctx, r.selector, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.api().List(ctx, opts)
	})
	if err != nil {
		return nil, nil, "", wrap("List", r.ns, err)
	}
	out, bad := r.decodeAll(items)
	sortByID(out, bad)
	return out, bad, rv, nil
}

// page reads one page. Without statuses it is one list request. With
// them, and a status field the CRD declares selectable, the API server
// selects each status apart (a field selector holds one value), and the
// store merges them in the order of the resources' names, as the API
// server lists them: each status is read a page at a time from where
// the cursor left it (its continue token, and how many of that page's
// resources were already taken: a continue token pins the revision, so
// the page read again is the same). A page then costs a request per
// status, not one per resource of the namespace. Without a selectable
// field the store lists every resource and filters here (a page may
// then hold fewer records than asked).
func (r *resources) page(ctx context.Context, q storage.Query) (storage.Page, error) {
	if len(q.Statuses) == 0 || r.unselectable.Load() || strings.HasPrefix(q.Cursor, cursorUnfiltered) {
		return r.unfilteredPage(ctx, q)
	}
	statuses := slices.Clone(q.Statuses)
	slices.Sort(statuses)
	statuses = slices.Compact(statuses)
	at, err := parseMergeCursor(q.Cursor, len(statuses))
	if err != nil {
		return storage.Page{}, err
	}
	streams := make([]*statusStream, len(statuses))
	for k, status := range statuses {
		streams[k] = &statusStream{r: r, selector: fields.OneTermEqualSelector(strings.Join(r.statusPath, "."), status).String(),
			limit: q.Limit, at: at.Positions[k], after: &at.After}
	}
	var taken []*unstructured.Unstructured
	for len(taken) < q.Limit {
		var next *statusStream
		for _, st := range streams {
			head, err := st.head(ctx)
			if err != nil {
				if apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "field label not supported") {
					// The CRD does not declare the status field selectable.
					r.unselectable.Store(true)
					return r.unfilteredPage(ctx, storage.Query{Statuses: q.Statuses, Limit: q.Limit})
				}
				return storage.Page{}, pageError(err, q, r.ns)
			}
			if head != nil && (next == nil || head.GetName() < next.items[0].GetName()) {
				next = st
			}
		}
		if next == nil {
			break // every status read to its end
		}
		u := next.take()
		if r.holds(u) {
			taken = append(taken, u)
		}
	}
	var page storage.Page
	page.Records, page.Unreadable = r.decodeAll(taken)
	next := mergeState{Positions: make([]mergePosition, len(streams)), After: at.After}
	more := false
	for k, st := range streams {
		next.Positions[k] = st.at
		more = more || !st.at.Done
	}
	if more {
		if page.Next, err = mergeCursor(next); err != nil {
			return storage.Page{}, err
		}
	}
	return page, nil
}

// mergeState is where pages of several statuses are: each status's
// position, and the name of the last resource taken from any of them.
// The merge is in name order, so nothing at or before After is listed
// again: a status whose continue token expired (the API server's etcd
// compacted its revision) is read again from its first page, skipping
// to after it.
type mergeState struct {
	Positions []mergePosition `json:"p"`
	After     string          `json:"a,omitempty"`
}

// mergePosition is where a page of several statuses left one of them:
// the continue token of the list page it was reading ("" the first),
// how many of that page's resources it took, or that it is read to its
// end.
type mergePosition struct {
	Token string `json:"t,omitempty"`
	Taken int    `json:"n,omitempty"`
	Done  bool   `json:"d,omitempty"`
}

// statusStream reads the resources of one status in name order, a list
// page at a time, for page's merge.
type statusStream struct {
	r        *resources
	selector string
	limit    int
	at       mergePosition
	items    []*unstructured.Unstructured // of the page at.Token, those not taken yet
	next     string                       // that page's continue token
	read     bool                         // whether items is the page at.Token
	after    *string                      // the page's mergeState.After, shared by its streams
}

// head is the stream's next resource, nil at its end.
func (st *statusStream) head(ctx context.Context) (*unstructured.Unstructured, error) {
	for !st.at.Done {
		if !st.read {
			list, err := st.r.api().List(ctx, metav1.ListOptions{LabelSelector: st.r.selector, FieldSelector: st.selector,
				Limit: int64(st.limit), Continue: st.at.Token})
			if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && st.at.Token != "" && *st.after != "" {
				st.at = mergePosition{} // from the first page again, to after the last taken
				continue
			}
			if err != nil {
				return nil, err
			}
			items := itemsOf(list)
			if st.at.Taken > len(items) {
				return nil, fmt.Errorf("kube: ListPage: %w: not a cursor this store gave", storage.ErrInvalidQuery)
			}
			for st.at.Taken < len(items) && items[st.at.Taken].GetName() <= *st.after {
				st.at.Taken++ // passed by the merge already
			}
			st.items, st.next, st.read = items[st.at.Taken:], list.GetContinue(), true
		}
		if len(st.items) > 0 {
			return st.items[0], nil
		}
		if st.next == "" {
			st.at = mergePosition{Done: true}
			break
		}
		st.at, st.read = mergePosition{Token: st.next}, false
	}
	return nil, nil
}

// take takes the stream's head.
func (st *statusStream) take() *unstructured.Unstructured {
	u := st.items[0]
	st.items = st.items[1:]
	st.at.Taken++
	*st.after = u.GetName()
	return u
}

// mergeCursor is the cursor of a page of several statuses: where it left
// each, as JSON, in base64.
func mergeCursor(state mergeState) (string, error) {
	data, err := json.Marshal(state)
	if err != nil {
		return "", err
	}
	cursor := base64.RawURLEncoding.EncodeToString(data)
	if len(cursor) > storage.MaxCursorLen {
		return "", fmt.Errorf("kube: ListPage: a cursor of %d bytes, over storage.MaxCursorLen: ask for fewer statuses at once", len(cursor))
	}
	return cursor, nil
}

// parseMergeCursor reads mergeCursor's cursor for statuses statuses; ""
// is the first page.
func parseMergeCursor(cursor string, statuses int) (mergeState, error) {
	if cursor == "" {
		return mergeState{Positions: make([]mergePosition, statuses)}, nil
	}
	data, err := base64.RawURLEncoding.DecodeString(cursor)
	var state mergeState
	if err == nil {
		err = json.Unmarshal(data, &state)
	}
	if err != nil || len(state.Positions) != statuses {
		return mergeState{}, fmt.Errorf("kube: ListPage: %w: not a cursor this store gave for these statuses", storage.ErrInvalidQuery)
	}
	for _, p := range state.Positions {
		if p.Taken < 0 || (p.Done && (p.Token != "" || p.Taken != 0)) {
			return mergeState{}, fmt.Errorf("kube: ListPage: %w: not a cursor this store gave", storage.ErrInvalidQuery)
		}
	}
	return state, nil
}

// cursorUnfiltered starts the cursor of a page listed unfiltered.
const cursorUnfiltered = "all/"

// unfilteredPage lists a page of every resource and keeps the records
// of q's statuses.
func (r *resources) unfilteredPage(ctx context.Context, q storage.Query) (storage.Page, error) {
	token, ok := strings.CutPrefix(q.Cursor, cursorUnfiltered)
	if q.Cursor != "" && !ok {
		return storage.Page{}, fmt.Errorf("kube: ListPage: %w: not a cursor this store gave", storage.ErrInvalidQuery)
	}
	list, err := r.api().List(ctx, metav1.ListOptions{LabelSelector: r.selector, Limit: int64(q.Limit), Continue: token})
	if err != nil {
		return storage.Page{}, pageError(err, q, r.ns)
	}
	var page storage.Page
	page.Records, page.Unreadable = r.decodeAll(itemsOf(list))
	if len(q.Statuses) > 0 {
		page.Records = slices.DeleteFunc(page.Records, func(rec storage.Record) bool { return !slices.Contains(q.Statuses, rec.Status) })
	}
	if list.GetContinue() != "" {
		page.Next = cursorUnfiltered + list.GetContinue()
	}
	return page, nil
}

func itemsOf(list *unstructured.UnstructuredList) []*unstructured.Unstructured {
	items := make([]*unstructured.Unstructured, len(list.Items))
	for k := range list.Items {
		items[k] = &list.Items[k]
	}
	return items
}

func (r *resources) watch(ctx context.Context, rv string) (watch.Interface, error) {
	return r.api().Watch(ctx, metav1.ListOptions{LabelSelector: r.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
}

func (r *resources) event(obj runtime.Object) (id, rv string, ok bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return "", "", false
	}
	if r.holds(u) {
		id = r.idOf(u)
	}
	return id, u.GetResourceVersion(), true
}

// errUnobserved is patch's when it has no conditions of the resource at
// the revision it writes on.
var errUnobserved = errors.New("kube: the resource's conditions at that revision are not known")

// observation is a resource's generation and conditions at a revision.
type observation struct {
	revision   uint64
	generation int64
	conditions []metav1.Condition
}

// observations are the last observation of each resource.
type observations struct {
	mu   sync.Mutex
	byID map[string]observation
}

func (o *observations) remember(id string, seen observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byID == nil {
		o.byID = map[string]observation{}
	}
	if cur, ok := o.byID[id]; ok && cur.revision > seen.revision {
		return // a later one is known
	}
	o.byID[id] = seen
}

func (o *observations) at(id string, revision uint64) (observation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen, ok := o.byID[id]
	return seen, ok && seen.revision == revision
}
