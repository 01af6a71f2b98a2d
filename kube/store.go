package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
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
	// Resource, if not nil, keeps the records in the status of a custom
	// resource of the user's, one record per resource, instead of
	// ConfigMaps of the store's own (see Resource). The Leases, the
	// table and the epoch floor stay where they are.
	Resource *Resource
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
	// records are where the records are kept.
	records records

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
	s := &Store{client: client, ns: opts.Namespace, prefix: opts.Prefix, timeout: opts.Timeout}
	s.records = &configMaps{client: client, ns: s.ns, label: s.label(), name: s.Name, claims: &s.claims}
	if opts.Resource != nil {
		r, err := newResources(opts.Resource, s.ns, &s.claims)
		if err != nil {
			return nil, err
		}
		s.records = r
	}
	return s, nil
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

// StatusLabel mirrors the record's status on its ConfigMap.
const StatusLabel = "execfsm.io/status"

// RelocatableLabel mirrors whether the execution's work can be restarted
// elsewhere ([recovery.MetaRelocatable]: "true" or "false") on its
// ConfigMap, and on the controller's Job and pod, so operators and drain
// tooling can select the controllers that can move:
// kubectl get jobs -l execfsm.io/relocatable=false.
const RelocatableLabel = "execfsm.io/relocatable"

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
	_, rec, err := s.records.get(ctx, id)
	return rec, err
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
	return s.records.create(ctx, rec)
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

// List implements [storage.Lister], in pages of 500 ConfigMaps (one
// request each, all at the revision of the first). A ConfigMap whose
// record does not decode is listed apart, and the others are listed as
// usual.
func (s *Store) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	recs, bad, _, err := s.list(ctx)
	return recs, bad, err
}

// list lists every record and says at which resourceVersion.
func (s *Store) list(ctx context.Context) ([]storage.Record, []storage.Unreadable, string, error) {
	ctx, cancel, err := s.call(ctx, "List")
	if err != nil {
		return nil, nil, "", err
	}
	defer cancel()
	return s.records.list(ctx)
}

// update writes next over record id at resourceVersion expect; when the
// record moved on, the error is a ConflictError with it as it is.
func (s *Store) update(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	written, err := s.records.update(ctx, id, expect, next)
	if errors.Is(err, errStale) {
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return storage.Record{}, gerr
		}
		return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	return written, err
}

// listPageSize is how many records (ConfigMaps, resources) one list
// request asks for: the API server's guidance for large collections
// (kubectl's and client-go's pager's default), a few megabytes of
// records a page.
const listPageSize = 500
