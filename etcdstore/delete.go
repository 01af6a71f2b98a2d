package etcdstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ storage.Deleter = (*Store)(nil)

// floorKey holds the store's epoch floor: the highest epoch a deleted
// record had, in decimal. A take-over writes an epoch above it, so an id
// created again never gets back an epoch of its old life.
func (s *Store) floorKey() string { return s.prefix + "epoch-floor" }

// maxDeleteAttempts bounds how often Delete reads again when only the
// epoch floor moved under it (another delete raised it): each attempt
// loses only to a delete that succeeded.
const maxDeleteAttempts = 16

// Delete implements [storage.Deleter]: one transaction that compares the
// record's ModRevision with expect and finds no ownership key, and
// deletes the record and its claim key, raising the epoch floor in the
// same transaction (compared, so two deletes never lower it). etcd's
// watch delivers the delete at its revision.
func (s *Store) Delete(ctx context.Context, id string, expect uint64) error {
	if err := checkID("Delete", id); err != nil {
		return err
	}
	ctx, cancel, err := s.call(ctx, "Delete")
	if err != nil {
		return err
	}
	defer cancel()
	key, ownerKey, floorKey := s.recordKey(id), s.ownerKey(id), s.floorKey()
	for range maxDeleteAttempts {
		read, err := s.client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(ownerKey), clientv3.OpGet(floorKey)).Commit()
		if err != nil {
			return wrap("Delete", id, err)
		}
		cur, err := s.deleting(id, expect, read)
		if err != nil {
			return err
		}
		floor, floorRev, err := s.floorIn(read.Responses[2].GetResponseRange())
		if err != nil {
			return err
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect)),
			clientv3.Compare(clientv3.CreateRevision(key), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", 0)}
		ops := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.claimKey(id)), clientv3.OpDelete(s.statusKey(cur.Status, id))}
		if cur.Epoch > floor {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(floorKey), "=", floorRev))
			ops = append(ops, clientv3.OpPut(floorKey, strconv.FormatUint(cur.Epoch, 10)))
		}
		resp, err := s.client.Txn(ctx).If(cmps...).Then(ops...).
			Else(clientv3.OpGet(key), clientv3.OpGet(ownerKey), clientv3.OpGet(floorKey)).Commit()
		if err != nil {
			return wrap("Delete", id, err)
		}
		if resp.Succeeded {
			return nil
		}
		if _, err := s.deleting(id, expect, resp); err != nil {
			return err
		}
		// Only the floor moved: read it again.
	}
	return fmt.Errorf("etcdstore: Delete %q: %w: the epoch floor kept changing", id, storage.ErrConflict)
}

// deleting checks what a delete found (the record, its ownership key):
// the record to delete, or why not.
func (s *Store) deleting(id string, expect uint64, resp *clientv3.TxnResponse) (storage.Record, error) {
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return storage.Record{}, fmt.Errorf("etcdstore: record %q: %w", id, storage.ErrNotFound)
	}
	cur, err := s.decode(id, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return storage.Record{}, err
	}
	if cur.Revision != expect {
		return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	if owners := resp.Responses[1].GetResponseRange().Kvs; len(owners) > 0 {
		return storage.Record{}, &storage.HeldError{ID: id, Holder: string(owners[0].Value), Status: cur.Status}
	}
	return cur, nil
}

// floorIn reads the epoch floor from a range response: zero, at
// revision zero, when none was ever written. A floor that does not parse
// (written by hand) is an error matching storage.ErrCorrupt: no epoch is
// safe to take over at without it.
func (s *Store) floorIn(r *etcdserverpb.RangeResponse) (uint64, int64, error) {
	if len(r.Kvs) == 0 {
		return 0, 0, nil
	}
	kv := r.Kvs[0]
	floor, err := strconv.ParseUint(string(kv.Value), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("etcdstore: the epoch floor at %s: %w: %q is not a number (write the highest epoch a deleted record had)",
			s.floorKey(), storage.ErrCorrupt, quote.Limited(string(kv.Value)))
	}
	return floor, kv.ModRevision, nil
}

// getWithFloor reads record id and the epoch floor in one round trip,
// for a take-over. The floor read after the record was created is the
// one its old life's deletes left, or higher.
func (s *Store) getWithFloor(ctx context.Context, id string) (storage.Record, uint64, error) {
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.recordKey(id)), clientv3.OpGet(s.floorKey())).Commit()
	if err != nil {
		return storage.Record{}, 0, wrap("Acquire", id, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return storage.Record{}, 0, fmt.Errorf("etcdstore: record %q: %w", id, storage.ErrNotFound)
	}
	rec, err := s.decode(id, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return storage.Record{}, 0, err
	}
	floor, _, err := s.floorIn(resp.Responses[1].GetResponseRange())
	return rec, floor, err
}
