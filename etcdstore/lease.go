package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/heldunder"
	"github.com/execfsm/execfsm/storage/storekit/writegate"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Ownership is a controller's hold on an execution for the life of an etcd
// lease that it keeps alive in the background. It implements
// [storage.Ownership].
type Ownership struct {
	claim storage.Claim
	id    string
	store *Store
	lease clientv3.LeaseID
	stop  context.CancelFunc
	// gate lets the ownership's writes through while it lasts: Lost
	// closes only once those in flight have returned.
	gate *writegate.Gate
	// parent is the ownership this one was taken under, whose lease it
	// shares (nil: its lease is its own); children those taken under
	// this one, ended with it.
	parent   *Ownership
	children heldunder.Set
}

var _ storage.Ownership = (*Ownership)(nil)

// Claim implements [storage.Ownership].
func (o *Ownership) Claim() storage.Claim { return o.claim }

// Lost implements [storage.Ownership]: it is closed when the lease can
// no longer be kept alive (it expired, was revoked, or the cluster stayed
// unreachable past its TTL), when a write found it gone, or when it was
// released.
func (o *Ownership) Lost() <-chan struct{} { return o.gate.Lost() }

// Lease returns the etcd lease the ownership lives on.
func (o *Ownership) Lease() clientv3.LeaseID { return o.lease }

// end closes Lost, once the writes in flight have returned, and ends the
// ownerships taken under this one.
func (o *Ownership) end() {
	o.gate.End()
	o.children.End()
}

// adopt takes c under o; false if o has ended.
func (o *Ownership) adopt(c *Ownership) bool { return o.children.Add(c, c.end) }

// Release implements [storage.Ownership]: it revokes the lease, which
// deletes the ownership key, so the next controller need not wait for it
// to expire, then closes Lost. Releasing twice, or after the lease
// expired, is no error. If etcd cannot be reached the ownership ends
// here all the same (no write of it is sent again) and the lease expires
// in etcd after its TTL.
//
// An ownership taken under another ([storage.Lease].Under) shares its
// lease: its Release deletes only its own ownership key.
func (o *Ownership) Release(ctx context.Context) error {
	if o.parent != nil {
		return o.releaseOne(ctx)
	}
	o.stop()
	defer o.end()
	ctx, cancel, err := o.store.call(ctx, "Release")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := o.store.client.Revoke(ctx, o.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return wrap("Release", o.id, err)
	}
	return nil
}

// releaseOne ends an ownership taken under another: its ownership key is
// deleted if it is still bound to the shared lease, and the lease lives on.
func (o *Ownership) releaseOne(ctx context.Context) error {
	o.parent.children.Remove(o)
	defer o.end()
	ctx, cancel, err := o.store.call(ctx, "Release")
	if err != nil {
		return err
	}
	defer cancel()
	ownerKey := o.store.ownerKey(o.id)
	_, err = o.store.client.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(ownerKey), "=", o.lease)).
		Then(clientv3.OpDelete(ownerKey)).
		Commit()
	if err != nil {
		return wrap("Release", o.id, err)
	}
	return nil
}

// CompareAndSwap implements [storage.Ownership]: the store's
// CompareAndSwap, whose transaction also compares the ownership key's
// lease, so etcd applies it only while the lease exists. A write that
// finds the lease gone ends the ownership.
func (o *Ownership) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	if err := storage.KeepsOwnClaim(o.id, o.claim, next); err != nil {
		return storage.Record{}, err
	}
	var written storage.Record
	var err error
	if !o.gate.Write(func() { written, err = o.store.compareAndSwap(ctx, o.id, expect, next, o.lease) }) {
		return storage.Record{}, o.lostError()
	}
	if errors.Is(err, errLeaseGone) {
		o.end()
		return storage.Record{}, o.lostError()
	}
	return written, err
}

func (o *Ownership) lostError() error {
	return &storage.FencedError{ID: o.id, Owner: o.claim.Owner, Epoch: o.claim.Epoch, Lost: true}
}

// errLeaseGone says that an ownership's write found its lease gone.
var errLeaseGone = errors.New("etcdstore: the ownership's lease is gone")

// Held implements [storage.Store]: the record is held while its
// ownership key exists (its lease lives).
func (s *Store) Held(ctx context.Context, id string) (storage.Claim, bool, error) {
	if err := checkID("Held", id); err != nil {
		return storage.Claim{}, false, err
	}
	ctx, cancel, err := s.call(ctx, "Held")
	if err != nil {
		return storage.Claim{}, false, err
	}
	defer cancel()
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.ownerKey(id)), clientv3.OpGet(s.claimKey(id))).Commit()
	if err != nil {
		return storage.Claim{}, false, wrap("Held", id, err)
	}
	owners := resp.Responses[0].GetResponseRange().Kvs
	if len(owners) == 0 {
		return storage.Claim{}, false, nil
	}
	claim := storage.Claim{Owner: string(owners[0].Value)}
	if claims := resp.Responses[1].GetResponseRange().Kvs; len(claims) > 0 {
		if c, ok := decodeClaim(string(claims[0].Value)); ok && c.Owner == claim.Owner {
			claim = c
		}
	}
	return claim, true, nil
}

// Acquire implements [storage.Store] with an etcd lease of lease.TTL
// (rounded up to whole seconds). In one transaction it creates the
// ownership key bound to the lease and writes the record with the holder
// and the next epoch (and an audit entry), so no other controller can
// hold it at the same time and every earlier claim is fenced. While the
// ownership key exists (its lease lives) the record is held; with
// lease.Wait, Acquire watches that key until it is deleted.
//
// The lease is kept alive until Release, or until it cannot be: then
// Lost closes, and once the lease has expired the next controller may
// take over.
func (s *Store) Acquire(ctx context.Context, id string, lease storage.Lease) (storage.Ownership, storage.Record, error) {
	if err := lease.Validate(); err != nil {
		return nil, storage.Record{}, err
	}
	if err := checkID("Acquire", id); err != nil {
		return nil, storage.Record{}, err
	}
	ctx, cancel, err := s.call(ctx, "Acquire")
	if err != nil {
		return nil, storage.Record{}, err
	}
	defer cancel()
	if lease.Under != nil {
		return s.acquireUnder(ctx, id, lease)
	}
	ttl := lease.TTLOrDefault()
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++ // round up: a lease never shorter than asked
	}
	for {
		granted, err := s.client.Grant(ctx, secs)
		if err != nil {
			return nil, storage.Record{}, wrap("Acquire", id, err)
		}
		o, rec, heldAt, err := s.takeOver(ctx, id, lease, granted.ID)
		if err == nil && heldAt == 0 {
			if err = o.keepAlive(); err != nil {
				err = wrap("Acquire", id, err)
			}
		}
		if err != nil || heldAt > 0 {
			// Nobody else may use this lease; let it go now rather than
			// at its expiry.
			revokeCtx, cancelRevoke := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
			_, _ = s.client.Revoke(revokeCtx, granted.ID)
			cancelRevoke()
		}
		if err != nil {
			return nil, storage.Record{}, err
		}
		if heldAt == 0 {
			return o, rec, nil
		}
		if err := s.waitReleased(ctx, id, heldAt); err != nil {
			return nil, storage.Record{}, err
		}
	}
}

// acquireUnder takes id over under the ownership lease.Under, on its
// lease: no lease of its own, nothing to keep alive, ended with it.
func (s *Store) acquireUnder(ctx context.Context, id string, lease storage.Lease) (storage.Ownership, storage.Record, error) {
	parent, ok := lease.Under.(*Ownership)
	switch {
	case !ok || parent.store != s:
		return nil, storage.Record{}, fmt.Errorf("etcdstore: lease for %q: %w: Under is not an ownership of this store", id, storage.ErrInvalidLease)
	case parent.parent != nil:
		return nil, storage.Record{}, fmt.Errorf("etcdstore: lease for %q: %w: Under was itself taken under another ownership", id, storage.ErrInvalidLease)
	}
	for {
		if storage.Ended(parent) {
			return nil, storage.Record{}, storage.UnderEnded(id, parent)
		}
		o, rec, heldAt, err := s.takeOver(ctx, id, lease, parent.lease)
		if err != nil {
			if errors.Is(err, errLeaseGone) || isLeaseNotFound(err) {
				parent.end()
				return nil, storage.Record{}, storage.UnderEnded(id, parent)
			}
			return nil, storage.Record{}, err
		}
		if heldAt == 0 {
			o.parent = parent
			if !parent.adopt(o) {
				o.end()
				return nil, storage.Record{}, storage.UnderEnded(id, parent)
			}
			return o, rec, nil
		}
		if err := s.waitReleased(ctx, id, heldAt); err != nil {
			return nil, storage.Record{}, err
		}
	}
}

// isLeaseNotFound reports whether err is etcd's refusal of a put on a lease
// that no longer exists.
func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || strings.Contains(err.Error(), rpctypes.ErrLeaseNotFound.Error())
}

// takeOver tries once to take id over with the granted lease. heldAt is
// the revision at which a live holder was found (the error is then nil
// only if lease.Wait asks to wait for it).
func (s *Store) takeOver(ctx context.Context, id string, lease storage.Lease, granted clientv3.LeaseID) (*Ownership, storage.Record, int64, error) {
	key, ownerKey, claimKey := s.recordKey(id), s.ownerKey(id), s.claimKey(id)
	for attempt := 0; attempt < 16; attempt++ {
		rec, floor, err := s.getWithFloor(ctx, id)
		if err != nil {
			return nil, storage.Record{}, 0, err
		}
		next, err := lease.TakeOver(rec, max(rec.Epoch, floor)+1, time.Now())
		if err != nil {
			return nil, storage.Record{}, 0, err
		}
		value, buf, err := s.encode(next)
		if err != nil {
			return nil, storage.Record{}, 0, err
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", 0),
				clientv3.Compare(clientv3.ModRevision(key), "=", int64(rec.Revision))).
			Then(append([]clientv3.Op{clientv3.OpPut(ownerKey, lease.Holder, clientv3.WithLease(granted)),
				clientv3.OpPut(key, value), clientv3.OpPut(claimKey, encodeClaim(next.Owner, next.Epoch))},
				s.moveIndex(id, rec.Status, next.Status)...)...).
			Else(clientv3.OpGet(ownerKey)).
			Commit()
		s.release(buf)
		if err != nil {
			return nil, storage.Record{}, 0, wrap("Acquire", id, err)
		}
		if resp.Succeeded {
			next.Revision = uint64(resp.Header.Revision)
			s.known.remember(id, next.Revision, next.Status)
			return &Ownership{claim: next.Claim(), id: id, store: s, lease: granted, gate: writegate.New()}, next, 0, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			if !lease.Wait {
				return nil, storage.Record{}, 0, &storage.HeldError{ID: id, Holder: string(kvs[0].Value), Status: rec.Status}
			}
			return nil, storage.Record{}, resp.Header.Revision, nil
		}
		// The record changed under us: read it again.
	}
	return nil, storage.Record{}, 0, fmt.Errorf("etcdstore: Acquire %q: %w: the record kept changing", id, storage.ErrConflict)
}

// keepAlive keeps the lease alive in the background until Release; when
// etcd stops answering for a whole TTL, or the lease is gone, Lost closes.
func (o *Ownership) keepAlive() error {
	keepCtx, stop := context.WithCancel(context.Background())
	alive, err := o.store.client.KeepAlive(keepCtx, o.lease)
	if err != nil {
		stop()
		return err
	}
	o.stop = stop
	go func() {
		for range alive { // drain the keep-alive responses
		}
		o.end()
	}()
	return nil
}

// waitReleased waits until the ownership key of id, found held at
// revision heldAt, is deleted (released, or its lease expired), or until
// ctx ends: then the error matches ErrHeld and ctx's error.
func (s *Store) waitReleased(ctx context.Context, id string, heldAt int64) error {
	watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := s.client.Watch(watchCtx, s.ownerKey(id), clientv3.WithRev(heldAt+1), clientv3.WithFilterPut())
	for {
		select {
		case resp, ok := <-events:
			if !ok || resp.Err() != nil || len(resp.Events) > 0 {
				// Deleted, or the watch broke: either way, try again.
				return nil
			}
		case <-ctx.Done():
			return &storage.HeldError{ID: id, Waited: context.Cause(ctx)}
		}
	}
}

// encodeClaim is the value of a record's claim key: the epoch, a slash,
// the owner. CompareAndSwap compares it so that a write never changes the
// claim, in the same round trip.
func encodeClaim(owner string, epoch uint64) string {
	return strconv.FormatUint(epoch, 10) + "/" + owner
}

func decodeClaim(v string) (storage.Claim, bool) {
	e, owner, ok := strings.Cut(v, "/")
	epoch, err := strconv.ParseUint(e, 10, 64)
	return storage.Claim{Owner: owner, Epoch: epoch}, ok && err == nil
}
