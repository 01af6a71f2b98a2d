package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/internal/storecall"
	"github.com/execfsm/execfsm/transition"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrHeld is matched by the error of Acquire when a live controller holds
// the execution: its lease has not expired.
var ErrHeld = errors.New("execution is owned by a live controller")

// maxLeaseTTL is etcd's own limit on a lease's TTL (9,000,000,000 s).
const maxLeaseTTL = 9_000_000_000 * time.Second

// Ownership is a controller's hold on an execution, for the life of an
// etcd lease that it keeps alive in the background.
type Ownership struct {
	// Claim is the owner and the epoch it took over at; give it to
	// transition.Persisted.WithClaim so writes are fenced once it is lost.
	Claim transition.Claim
	// Record is the record as the take-over wrote it.
	Record transition.Record

	store *Store
	lease clientv3.LeaseID
	stop  context.CancelFunc
	lost  chan struct{}
}

// Lost is closed when the lease can no longer be kept alive (it expired,
// was revoked, or the cluster stayed unreachable past its TTL). From then
// on another controller may take over and this one's writes will be
// fenced; it should stop driving the execution.
func (o *Ownership) Lost() <-chan struct{} { return o.lost }

// Lease returns the etcd lease the ownership lives on.
func (o *Ownership) Lease() clientv3.LeaseID { return o.lease }

// Release gives the ownership up at once (revoking the lease) so the next
// controller need not wait for it to expire.
func (o *Ownership) Release(ctx context.Context) error {
	o.stop()
	ctx, cancel, err := o.store.call(ctx, "Release")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := o.store.client.Revoke(ctx, o.lease); err != nil {
		return wrap("Release", o.Record.ID, err)
	}
	return nil
}

// Acquire takes execution id over for owner, for as long as owner keeps
// a lease of ttl alive. In one transaction it creates the ownership key
// bound to the lease and writes the record with owner and the next epoch
// (and an audit entry), so no other controller can hold it at the same
// time and every earlier claim is fenced. If a live controller holds it,
// the error matches [ErrHeld] and names the holder.
//
// The lease is kept alive until Release or until the ownership is lost.
func (s *Store) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (*Ownership, error) {
	if owner == "" || len(owner) > transition.MaxOwnerLen {
		return nil, fmt.Errorf("etcdstore: Acquire %q: %w: owner is %d bytes, want 1 to %d", id, transition.ErrInvalidRecord, len(owner), transition.MaxOwnerLen)
	}
	if ttl < time.Second || ttl > maxLeaseTTL {
		return nil, fmt.Errorf("etcdstore: Acquire %q: lease TTL %v, want 1s to %v", id, ttl, maxLeaseTTL)
	}
	ctx, cancel, err := s.call(ctx, "Acquire")
	if err != nil {
		return nil, err
	}
	defer cancel()
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++ // round up: a lease never shorter than asked
	}
	lease, err := s.client.Grant(ctx, secs)
	if err != nil {
		return nil, wrap("Acquire", id, err)
	}
	o, err := s.takeOver(ctx, id, owner, lease.ID)
	if err != nil {
		// Nobody else may use this lease; let it go now rather than at
		// its expiry.
		revokeCtx, cancelRevoke := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		_, _ = s.client.Revoke(revokeCtx, lease.ID)
		cancelRevoke()
		return nil, err
	}
	keepCtx, stop := context.WithCancel(context.Background())
	alive, err := s.client.KeepAlive(keepCtx, lease.ID)
	if err != nil {
		stop()
		return nil, wrap("Acquire", id, err)
	}
	o.stop, o.lost = stop, make(chan struct{})
	go func() {
		for range alive { // drain the keep-alive responses
		}
		close(o.lost)
	}()
	return o, nil
}

func (s *Store) takeOver(ctx context.Context, id, owner string, lease clientv3.LeaseID) (*Ownership, error) {
	key, ownerKey := s.records+id, s.owners+id
	for attempt := 0; attempt < 16; attempt++ {
		rec, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next := storecall.TakeOver(rec, owner, rec.Epoch+1, fmt.Sprintf("acquired with lease %x", int64(lease)), time.Now())
		if err := next.Validate(); err != nil {
			return nil, err
		}
		value, err := encode(next)
		if err != nil {
			return nil, err
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", 0),
				clientv3.Compare(clientv3.ModRevision(key), "=", int64(rec.Revision))).
			Then(clientv3.OpPut(ownerKey, owner, clientv3.WithLease(lease)), clientv3.OpPut(key, value)).
			Else(clientv3.OpGet(ownerKey)).
			Commit()
		if err != nil {
			return nil, wrap("Acquire", id, err)
		}
		if resp.Succeeded {
			next.Revision = uint64(resp.Header.Revision)
			return &Ownership{Claim: transition.Claim{Owner: owner, Epoch: next.Epoch}, Record: next, store: s, lease: lease}, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return nil, fmt.Errorf("etcdstore: Acquire %q: %w: held by %q", id, ErrHeld, kvs[0].Value)
		}
		// The record changed under us: read it again.
	}
	return nil, fmt.Errorf("etcdstore: Acquire %q: %w: the record kept changing", id, transition.ErrConflict)
}
