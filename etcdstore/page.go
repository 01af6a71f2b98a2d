package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The status index: a key per record, prefix+"status/"+status+"/"+id
// (both escaped as ids are in keys), with no value, put and deleted in
// the transaction that writes the record, so that the keys of one
// status are one range in id order at every revision. A page of a few
// statuses ranges over their keys and reads their records, at one
// revision, whatever else the store holds.
//
// A write must delete the index key of the status the record had. A
// compare-and-swap compares the record's revision, not its status; a
// record at a given revision never changes, so the status the store
// saw it in at that revision (statusCache) is the one to delete, and a
// write at a revision the store has not seen reads the record first.

var _ storage.PageLister = (*Store)(nil)

// statusKey is the index key of record id in status.
func (s *Store) statusKey(status, id string) string {
	return s.indexes + keyPart(status) + "/" + keyPart(id)
}

// moveIndex are the writes that move record id's index key from status
// was to status is: none when they are the same.
func (s *Store) moveIndex(id, was, is string) []clientv3.Op {
	if was == is {
		return nil
	}
	return []clientv3.Op{clientv3.OpDelete(s.statusKey(was, id)), clientv3.OpPut(s.statusKey(is, id), "")}
}

// statusCache remembers, per record, its status at the last revision
// this store read or wrote it at.
type statusCache struct {
	mu   sync.Mutex
	byID map[string]statusAt
}

type statusAt struct {
	revision uint64
	status   string
}

// maxKnown bounds what a statusCache holds: past it, a record seen anew
// takes the place of another, whose next write reads it first.
const maxKnown = 1 << 16

func (c *statusCache) remember(id string, revision uint64, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]statusAt{}
	}
	if got, ok := c.byID[id]; ok && got.revision > revision {
		return // a later one is known
	} else if !ok && len(c.byID) >= maxKnown {
		for other := range c.byID {
			delete(c.byID, other)
			break
		}
	}
	c.byID[id] = statusAt{revision: revision, status: status}
}

// at returns the status record id had at revision, if known.
func (c *statusCache) at(id string, revision uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.byID[id]
	if !ok || got.revision != revision {
		return "", false
	}
	return got.status, true
}

// statusAt reads record id for the status it had at revision expect,
// for a write at expect the store has not seen: a record at another
// revision is a conflict (nothing is written), a missing one ErrNotFound.
// A value that does not decode at expect is one a repair replaces: its
// index key is found by its id among them all (a repair is rare; a
// record that decodes never costs that).
func (s *Store) statusAt(ctx context.Context, id string, expect uint64) (string, error) {
	resp, err := s.client.Get(ctx, s.recordKey(id))
	if err != nil {
		return "", wrap("CompareAndSwap", id, err)
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("etcdstore: record %q: %w", id, storage.ErrNotFound)
	}
	kv := resp.Kvs[0]
	cur, err := s.decode(id, kv.Value, kv.ModRevision)
	switch {
	case uint64(kv.ModRevision) != expect && err != nil:
		return "", err
	case uint64(kv.ModRevision) != expect:
		return "", &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	case err == nil:
		return cur.Status, nil
	}
	keys, err := s.client.Get(ctx, s.indexes, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", wrap("CompareAndSwap", id, err)
	}
	suffix := "/" + keyPart(id)
	for _, kv := range keys.Kvs {
		if status, ok := strings.CutSuffix(strings.TrimPrefix(string(kv.Key), s.indexes), suffix); ok {
			if status, ours := idOf(status); ours {
				return status, nil
			}
		}
	}
	return "", nil // no index key: nothing to move
}

// maxGetsPerTxn is how many records a page reads in one transaction:
// under etcd's default --max-txn-ops (128).
const maxGetsPerTxn = 100

// ListPage implements [storage.PageLister] at one revision: a range
// over the records, or over the index keys of the statuses asked, then
// their records. The cursor is the last record's key part (its id,
// escaped), so pages are in key order.
func (s *Store) ListPage(ctx context.Context, q storage.Query) (storage.Page, error) {
	if err := q.Validate(); err != nil {
		return storage.Page{}, err
	}
	ctx, cancel, err := s.call(ctx, "ListPage")
	if err != nil {
		return storage.Page{}, err
	}
	defer cancel()
	if len(q.Statuses) == 0 {
		return s.pageOfRecords(ctx, q)
	}
	statuses := slices.Clone(q.Statuses)
	slices.Sort(statuses)
	statuses = slices.Compact(statuses)
	want := int64(q.Limit + 1)
	var parts []string // key parts of the page's ids, in key order
	var rev int64
	for _, status := range statuses {
		prefix := s.indexes + keyPart(status) + "/"
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(want), clientv3.WithKeysOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, prefix+q.Cursor+"\x00", opts...)
		if err != nil {
			return storage.Page{}, wrap("ListPage", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			part := strings.TrimPrefix(string(kv.Key), prefix)
			if _, ours := idOf(part); ours {
				parts = append(parts, part)
			}
		}
	}
	slices.Sort(parts)
	var page storage.Page
	if len(parts) > q.Limit {
		parts = parts[:q.Limit]
		page.Next = parts[len(parts)-1]
	}
	kvs, err := s.getAt(ctx, parts, rev)
	if err != nil {
		return storage.Page{}, err
	}
	page.Records, page.Unreadable = s.decodeAll(kvs)
	return page, nil
}

// getsInFlight bounds the transactions of gets a page has in flight.
const getsInFlight = 8

// getAt reads the records of the key parts given at revision rev, in
// their order: transactions of maxGetsPerTxn gets, a few at once (one
// after the other, a page of a thousand records waited for ten round
// trips).
func (s *Store) getAt(ctx context.Context, parts []string, rev int64) ([]keyValue, error) {
	chunks := slices.Collect(slices.Chunk(parts, maxGetsPerTxn))
	got := make([][]keyValue, len(chunks))
	errs := make([]error, len(chunks))
	sem := make(chan struct{}, getsInFlight)
	var wg sync.WaitGroup
	for c, chunk := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ops := make([]clientv3.Op, len(chunk))
			for k, part := range chunk {
				ops[k] = clientv3.OpGet(s.records+part, clientv3.WithRev(rev))
			}
			resp, err := s.client.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				errs[c] = wrap("ListPage", s.records, err)
				return
			}
			for k, r := range resp.Responses {
				if kv := r.GetResponseRange().Kvs; len(kv) > 0 {
					id, _ := idOf(chunk[k])
					got[c] = append(got[c], keyValue{id: id, value: kv[0].Value, revision: kv[0].ModRevision})
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(got...), nil
}

// pageOfRecords is ListPage of every status: one range over the records.
func (s *Store) pageOfRecords(ctx context.Context, q storage.Query) (storage.Page, error) {
	resp, err := s.client.Get(ctx, s.records+q.Cursor+"\x00",
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.records)), clientv3.WithLimit(int64(q.Limit+1)))
	if err != nil {
		return storage.Page{}, wrap("ListPage", s.records, err)
	}
	var kvs []keyValue
	var parts []string
	for _, kv := range resp.Kvs {
		part := strings.TrimPrefix(string(kv.Key), s.records)
		if id, ours := idOf(part); ours {
			kvs = append(kvs, keyValue{id: id, value: kv.Value, revision: kv.ModRevision})
			parts = append(parts, part)
		}
	}
	var page storage.Page
	if len(kvs) > q.Limit {
		kvs, parts = kvs[:q.Limit], parts[:q.Limit]
		page.Next = parts[len(parts)-1]
	}
	page.Records, page.Unreadable = s.decodeAll(kvs)
	return page, nil
}

// keyValue is a record's value as a page read it.
type keyValue struct {
	id       string
	value    []byte
	revision int64
}

// decodeAll decodes a page's values, those that do not decode apart.
func (s *Store) decodeAll(kvs []keyValue) ([]storage.Record, []storage.Unreadable) {
	return listdecode.All(len(kvs), func(i int) (storage.Record, error) {
		return s.decode(kvs[i].id, kvs[i].value, kvs[i].revision)
	}, func(i int, err error) storage.Unreadable {
		return storage.Unreadable{ID: kvs[i].id, Revision: uint64(kvs[i].revision), Err: err}
	})
}

var _ storage.Counter = (*Store)(nil)

// CountStatuses implements [storage.Counter]: a count-only range over
// each status's index keys, all at the revision of the first.
func (s *Store) CountStatuses(ctx context.Context, statuses ...string) (map[string]int, error) {
	if err := storage.CheckStatuses(statuses); err != nil {
		return nil, err
	}
	ctx, cancel, err := s.call(ctx, "CountStatuses")
	if err != nil {
		return nil, err
	}
	defer cancel()
	out := make(map[string]int, len(statuses))
	var rev int64
	for _, status := range statuses {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		prefix := s.indexes + keyPart(status) + "/"
		resp, err := s.client.Get(ctx, prefix, opts...)
		if err != nil {
			return nil, wrap("CountStatuses", prefix, err)
		}
		rev = resp.Header.Revision
		out[status] = int(resp.Count)
	}
	return out, nil
}
