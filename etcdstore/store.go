package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	"go.etcd.io/etcd/api/v3/mvccpb"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults for zero Options.
const (
	DefaultPrefix       = "/execfsm/"
	DefaultTimeout      = 10 * time.Second
	DefaultWatchBacklog = 1024
)

// Options configure a [Store].
type Options struct {
	// Prefix is the key prefix of everything the store writes (default
	// DefaultPrefix). Two stores with different prefixes share nothing,
	// even when one prefix lies under the other's keys: a record id's "/"
	// and "%" are escaped in its key, so a key with a "/" after
	// prefix+"records/" is never this store's and is ignored.
	Prefix string
	// Timeout applies to calls whose context has no deadline (default
	// DefaultTimeout), so an unreachable cluster yields an error.
	Timeout time.Duration
	// WatchBacklog is how many events a watch holds for a consumer that
	// is not reading before it drops them for a re-list (default
	// DefaultWatchBacklog).
	WatchBacklog int
}

// Store is a [storage.Store], [storage.Lister], [storage.PageLister],
// [storage.Watcher] and [storage.Deleter] on etcd. It is safe for concurrent use and does
// not own the client.
type Store struct {
	client  *clientv3.Client
	prefix  string
	records string // prefix + "records/"
	owners  string // prefix + "owners/": the holder, bound to its lease
	claims  string // prefix + "claims/": epoch/owner of each record
	indexes string // prefix + "status/": a key per record, by status (see page.go)
	// known remembers records' statuses at revisions, for the index; a
	// pointer, so that Store stays comparable.
	known   *statusCache
	timeout time.Duration
	backlog int
	// buffers are encode's (*[]byte); a pointer, so that Store stays
	// comparable, nil in a zero Store.
	buffers *sync.Pool
}

var (
	_ storage.Store   = (*Store)(nil)
	_ storage.Lister  = (*Store)(nil)
	_ storage.Watcher = (*Store)(nil)
)

// New returns a store using client.
func New(client *clientv3.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("etcdstore: nil client")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		return nil, fmt.Errorf("etcdstore: prefix %q must end with /", opts.Prefix)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("etcdstore: negative Timeout %v", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.WatchBacklog < 0 {
		return nil, fmt.Errorf("etcdstore: negative WatchBacklog %d", opts.WatchBacklog)
	}
	if opts.WatchBacklog == 0 {
		opts.WatchBacklog = DefaultWatchBacklog
	}
	return &Store{client: client, prefix: opts.Prefix, records: opts.Prefix + "records/",
		owners: opts.Prefix + "owners/", claims: opts.Prefix + "claims/", indexes: opts.Prefix + "status/",
		known: &statusCache{}, timeout: opts.Timeout, backlog: opts.WatchBacklog, buffers: new(sync.Pool)}, nil
}

func (s *Store) call(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if s.client == nil {
		return nil, nil, errZeroStore
	}
	if err := storage.CheckContext(ctx, "etcdstore", op); err != nil {
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
var errZeroStore = errors.New("etcdstore: zero Store: make one with New")

// wrap names the operation and id in an etcd error, keeping it matchable
// (context.DeadlineExceeded stays errors.Is-able).
func wrap(op, id string, err error) error {
	return fmt.Errorf("etcdstore: %s %q: %w", op, id, err)
}

var (
	escapeID   = strings.NewReplacer("%", "%25", "/", "%2F")
	unescapeID = strings.NewReplacer("%2F", "/", "%25", "%")
)

// keyPart is id as it appears in keys: with "%" and "/" escaped, so that
// no key of this store has a "/" after its kind ("records/").
func keyPart(id string) string { return escapeID.Replace(id) }

// idOf is the id a key part stands for; false for a key part this store
// cannot have written (a nested store's key, a foreign one).
func idOf(part string) (string, bool) {
	id := unescapeID.Replace(part)
	return id, !strings.Contains(part, "/") && keyPart(id) == part
}

func (s *Store) recordKey(id string) string { return s.records + keyPart(id) }
func (s *Store) claimKey(id string) string  { return s.claims + keyPart(id) }
func (s *Store) ownerKey(id string) string  { return s.owners + keyPart(id) }

func (s *Store) decode(id string, value []byte, modRevision int64) (storage.Record, error) {
	var rec storage.Record
	if err := rec.UnmarshalBinary(value); err != nil {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q at %s: %w", id, s.recordKey(id), err)
	}
	if rec.ID != id {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q: %w: it names itself %q", id, storage.ErrCorrupt, rec.ID)
	}
	rec.Revision = uint64(modRevision)
	s.known.remember(id, rec.Revision, rec.Status)
	return rec, nil
}

// encode encodes rec for a write into a buffer of the store's and returns
// it as the string the client takes, a view of the buffer (no copy), with
// the buffer, which release hands back once the write is done. The client
// copies a value into its request as it builds it (clientv3.OpPut), and
// nothing holds the request after the call returns: a write allocates no
// buffer of its record's size (3.4 KB with a full trail) for the
// collector to find, and encodes into memory the last write touched.
func (s *Store) encode(rec storage.Record) (string, *[]byte, error) {
	var buf *[]byte
	if s.buffers != nil {
		buf, _ = s.buffers.Get().(*[]byte)
	}
	if buf == nil {
		buf = new([]byte)
	}
	rec.Revision = 0 // etcd's ModRevision is the revision; do not store a stale copy
	data, err := rec.AppendBinary((*buf)[:0])
	if err != nil {
		s.release(buf)
		return "", nil, err
	}
	*buf = data
	return unsafe.String(unsafe.SliceData(data), len(data)), buf, nil
}

// release hands back a buffer of encode once the write is done, unless
// it grew past what most records need: a record with a long reason in
// every entry of a long trail is rare, and its buffer is left to the
// collector rather than held.
func (s *Store) release(buf *[]byte) {
	const maxPooledBytes = 64 << 10
	if s.buffers != nil && cap(*buf) <= maxPooledBytes {
		s.buffers.Put(buf)
	}
}

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
	resp, err := s.client.Get(ctx, s.recordKey(id))
	if err != nil {
		return storage.Record{}, wrap("Get", id, err)
	}
	if len(resp.Kvs) == 0 {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q: %w", id, storage.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return s.decode(id, kv.Value, kv.ModRevision)
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
	value, buf, err := s.encode(rec)
	if err != nil {
		return storage.Record{}, err
	}
	defer s.release(buf)
	key := s.recordKey(rec.ID)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value), clientv3.OpPut(s.claimKey(rec.ID), encodeClaim(rec.Owner, rec.Epoch)),
			clientv3.OpPut(s.statusKey(rec.Status, rec.ID), "")).
		Commit()
	if err != nil {
		return storage.Record{}, wrap("Create", rec.ID, err)
	}
	if !resp.Succeeded {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q: %w", rec.ID, storage.ErrExists)
	}
	rec.Revision = uint64(resp.Header.Revision)
	s.known.remember(rec.ID, rec.Revision, rec.Status)
	return rec.Clone(), nil
}

// CompareAndSwap implements [storage.Store].
func (s *Store) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	return s.compareAndSwap(ctx, id, expect, next, clientv3.NoLease)
}

// compareAndSwap is CompareAndSwap; with a lease, the write is made only
// while the record's ownership key is bound to it, and otherwise fails
// with errLeaseGone.
func (s *Store) compareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record, lease clientv3.LeaseID) (storage.Record, error) {
	if next.ID != id {
		return storage.Record{}, fmt.Errorf("etcdstore: CompareAndSwap %q: %w: record id is %q", id, storage.ErrInvalidRecord, next.ID)
	}
	value, buf, err := s.encode(next) // validates it
	if err != nil {
		return storage.Record{}, err
	}
	defer s.release(buf)
	ctx, cancel, err := s.call(ctx, "CompareAndSwap")
	if err != nil {
		return storage.Record{}, err
	}
	defer cancel()
	key, claimKey := s.recordKey(id), s.claimKey(id)
	claim := encodeClaim(next.Owner, next.Epoch)
	// The record's status at expect, for its index key: known when this
	// store last read or wrote the record at expect (a record at a
	// revision never changes), read otherwise, and then a stale expect
	// is a conflict without a write.
	was, ok := s.known.at(id, expect)
	if !ok {
		if was, err = s.statusAt(ctx, id, expect); err != nil {
			return storage.Record{}, err
		}
	}
	writes := append([]clientv3.Op{clientv3.OpPut(key, value)}, s.moveIndex(id, was, next.Status)...)
	// CreateRevision > 0: a compare-and-swap never creates, even at
	// expected revision 0 (ModRevision of a missing key). The claim key
	// holds the record's owner and epoch: comparing it keeps a write from
	// changing them, without reading the record first. An owner's write
	// also compares the ownership key's lease: a missing key compares
	// as lease 0, so a write whose lease is gone is never applied.
	// On a failure the record and the claim key are read back to say why,
	// and the ownership key too for an owner's write: a write without one
	// sends no more than it needs (every write is one round trip, and its
	// request is built and parsed on every call).
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
		clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect)),
		clientv3.Compare(clientv3.Value(claimKey), "=", claim)}
	reads := []clientv3.Op{clientv3.OpGet(key), clientv3.OpGet(claimKey)}
	if lease != clientv3.NoLease {
		ownerKey := s.ownerKey(id)
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(ownerKey), "=", lease))
		reads = append(reads, clientv3.OpGet(ownerKey))
	}
	resp, err := s.client.Txn(ctx).
		If(cmps...).
		Then(writes...).
		Else(reads...).
		Commit()
	if err != nil {
		return storage.Record{}, wrap("CompareAndSwap", id, err)
	}
	if resp.Succeeded {
		// next is the caller's own record, not the store's: it goes back
		// with its revision, not copied.
		next.Revision = uint64(resp.Header.Revision)
		s.known.remember(id, next.Revision, next.Status)
		return next, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q: %w", id, storage.ErrNotFound)
	}
	if lease != clientv3.NoLease {
		if owners := resp.Responses[2].GetResponseRange().Kvs; len(owners) == 0 || clientv3.LeaseID(owners[0].Lease) != lease {
			return storage.Record{}, errLeaseGone
		}
	}
	cur, err := s.decode(id, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return storage.Record{}, err
	}
	if cur.Revision != expect {
		return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	stored := cur.Claim()
	if claimKvs := resp.Responses[1].GetResponseRange().Kvs; len(claimKvs) > 0 {
		if c, ok := decodeClaim(string(claimKvs[0].Value)); ok {
			stored = c
		}
	} else if stored == next.Claim() {
		// The claim key is missing (deleted by hand): the record's own
		// claim stands, and the write restores the key.
		return s.casRestoringClaim(ctx, id, expect, next, append(writes, clientv3.OpPut(claimKey, claim)))
	}
	return storage.Record{}, storage.ClaimChanged(id, stored, next.Claim())
}

// casRestoringClaim is CompareAndSwap for a record whose claim key is
// missing and whose claim the write keeps.
func (s *Store) casRestoringClaim(ctx context.Context, id string, expect uint64, next storage.Record, writes []clientv3.Op) (storage.Record, error) {
	key, claimKey := s.recordKey(id), s.claimKey(id)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect)),
			clientv3.Compare(clientv3.CreateRevision(claimKey), "=", 0)).
		Then(writes...).
		Commit()
	if err != nil {
		return storage.Record{}, wrap("CompareAndSwap", id, err)
	}
	if !resp.Succeeded {
		return s.CompareAndSwap(ctx, id, expect, next) // something moved: decide again
	}
	next = next.Clone()
	next.Revision = uint64(resp.Header.Revision)
	s.known.remember(id, next.Revision, next.Status)
	return next, nil
}

// checkID refuses an id no record can have, before any request.
func checkID(op, id string) error {
	if err := storage.ValidateID(id); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	return nil
}

// List implements [storage.Lister]. A value that does not decode is
// listed apart, with its revision (a repair may name it), and the others
// are listed as usual.
func (s *Store) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	recs, bad, _, err := s.list(ctx)
	return recs, bad, err
}

// list returns every record, the unreadable ones apart, and the revision
// the list was read at.
func (s *Store) list(ctx context.Context) ([]storage.Record, []storage.Unreadable, int64, error) {
	ctx, cancel, err := s.call(ctx, "List")
	if err != nil {
		return nil, nil, 0, err
	}
	defer cancel()
	// Pages at the revision of the first, so the list is one snapshot: one
	// range over every record made the server build, and the client
	// hold, a response of every record at once (250 MB for 100k records,
	// and listing them took 11 s instead of about 2). The next page is
	// asked for while this one decodes: the server's time and the
	// client's overlap.
	var (
		out []storage.Record
		bad []storage.Unreadable
		rev int64
		end = clientv3.GetPrefixRangeEnd(s.records)
	)
	type page struct {
		resp *clientv3.GetResponse
		err  error
	}
	fetch := func(key string) <-chan page {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		done := make(chan page, 1)
		go func() {
			resp, err := s.client.Get(ctx, key, opts...)
			done <- page{resp, err}
		}()
		return done
	}
	pending := fetch(s.records)
	defer func() {
		if pending != nil {
			cancel()
			<-pending // no request outlives the call
		}
	}()
	for {
		p := <-pending
		pending = nil
		if p.err != nil {
			return nil, nil, 0, wrap("List", s.records, p.err)
		}
		resp := p.resp
		if rev == 0 {
			rev = resp.Header.Revision
			out = make([]storage.Record, 0, resp.Count)
		}
		if resp.More && len(resp.Kvs) > 0 {
			pending = fetch(string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00")
		}
		var ids []string
		var kvs []*mvccpb.KeyValue
		for _, kv := range resp.Kvs {
			id, ours := idOf(strings.TrimPrefix(string(kv.Key), s.records))
			if !ours {
				continue // a nested store's key: not a record of this one
			}
			ids, kvs = append(ids, id), append(kvs, kv)
		}
		recs, unreadable := listdecode.All(len(kvs), func(i int) (storage.Record, error) {
			return s.decode(ids[i], kvs[i].Value, kvs[i].ModRevision)
		}, func(i int, err error) storage.Unreadable {
			return storage.Unreadable{ID: ids[i], Revision: uint64(kvs[i].ModRevision), Err: err}
		})
		out, bad = append(out, recs...), append(bad, unreadable...)
		if pending == nil {
			return out, bad, rev, nil
		}
	}
}

// listPage is how many records List asks etcd for at a time.
const listPage = 2500

// Prefix returns the key prefix the store writes under.
func (s *Store) Prefix() string { return s.prefix }
