package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/heldunder"
	"github.com/execfsm/execfsm/storage/storekit/writegate"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Ownership is a controller's hold on an execution through a
// coordination.k8s.io/v1 Lease it keeps renewing. It implements
// [storage.Ownership].
type Ownership struct {
	claim    storage.Claim
	id       string
	store    *Store
	name     string
	duration time.Duration
	stop     context.CancelFunc
	done     chan struct{}
	// gate lets the ownership's writes through while it lasts: Lost
	// closes only once those in flight have returned.
	gate *writegate.Gate
	// renewed is when the last renewal that succeeded began (the
	// take-over's time before the first), in Unix nanoseconds of the
	// monotonic-free wall clock: the Lease lasts a duration from then by
	// the holder's reckoning.
	renewed atomic.Int64
	// parent is the ownership this one was taken under, whose Lease's
	// expiry is its own (nil: its Lease is renewed for itself); children
	// those taken under this one, ended with it.
	parent   *Ownership
	children heldunder.Set
}

var _ storage.Ownership = (*Ownership)(nil)

// Claim implements [storage.Ownership]: the holder and the epoch (the
// Lease's leaseTransitions, and the record's Epoch).
func (o *Ownership) Claim() storage.Claim { return o.claim }

// Lost implements [storage.Ownership]: it is closed when the Lease
// could not be renewed within its duration (counted from the start of its
// last renewal), has another holder, was released or deleted, or when a
// write finds the record deleted (`kubectl delete cm` under a running
// controller): the next renewal, or the next write, ends the ownership.
func (o *Ownership) Lost() <-chan struct{} { return o.gate.Lost() }

// end closes Lost, once the writes in flight have returned, and ends the
// ownerships taken under this one.
func (o *Ownership) end() {
	o.gate.End()
	o.children.End()
}

// adopt takes c under o; false if o has ended.
func (o *Ownership) adopt(c *Ownership) bool { return o.children.Add(c, c.end) }

// expiry is when the Lease ends by the holder's reckoning unless it is
// renewed: the parent's, for an ownership taken under one.
func (o *Ownership) expiry() time.Time {
	if o.parent != nil {
		return o.parent.expiry()
	}
	return time.Unix(0, o.renewed.Load()).Add(o.duration)
}

// CompareAndSwap implements [storage.Ownership]: the store's
// CompareAndSwap, sent only while the Lease is unexpired by the holder's
// reckoning, with the request's deadline at that expiry. A write that
// finds the Lease expired ends the ownership.
func (o *Ownership) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	if err := storage.KeepsOwnClaim(o.id, o.claim, next); err != nil {
		return storage.Record{}, err
	}
	var written storage.Record
	var err error
	expired := false
	ran := o.gate.Write(func() {
		expiry := o.expiry()
		if expired = !time.Now().Before(expiry); expired {
			return
		}
		ctx, cancel := context.WithDeadline(ctx, expiry)
		defer cancel()
		written, err = o.store.CompareAndSwap(ctx, o.id, expect, next)
	})
	if expired || errors.Is(err, storage.ErrNotFound) {
		// Expired, or the record was deleted: either way nothing is
		// owned any more. Outside the write: ending waits for the
		// writes in flight.
		o.end()
	}
	if !ran || expired {
		return storage.Record{}, &storage.FencedError{ID: o.id, Owner: o.claim.Owner, Epoch: o.claim.Epoch, Lost: true}
	}
	return written, err
}

// Held implements [storage.Store]: the record is held while its Lease
// has a holder that renewed it within its duration.
func (s *Store) Held(ctx context.Context, id string) (storage.Claim, bool, error) {
	if err := checkID("Held", id); err != nil {
		return storage.Claim{}, false, err
	}
	ctx, cancel, err := s.call(ctx, "Held")
	if err != nil {
		return storage.Claim{}, false, err
	}
	defer cancel()
	lease, err := s.client.CoordinationV1().Leases(s.ns).Get(ctx, s.Name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return storage.Claim{}, false, nil
	case err != nil:
		return storage.Claim{}, false, wrap("Held", id, err)
	}
	h := lease.Spec.HolderIdentity
	if h == nil || *h == "" {
		return storage.Claim{}, false, nil
	}
	alive, err := s.alive(ctx, lease, time.Now())
	if err != nil {
		return storage.Claim{}, false, wrap("Held", id, err)
	}
	if !alive {
		return storage.Claim{}, false, nil
	}
	claim := storage.Claim{Owner: *h}
	if t := lease.Spec.LeaseTransitions; t != nil {
		claim.Epoch = uint64(*t)
	}
	return claim, true, nil
}

// Release implements [storage.Ownership]: it stops renewing and clears
// the Lease's holder, so the next controller need not wait for it to
// expire. Releasing twice, or a Lease someone else holds by now, is no
// error.
//
// An ownership taken under another ([storage.Lease].Under) clears its own
// Lease's holder; the Lease it was under lives on.
func (o *Ownership) Release(ctx context.Context) error {
	if o.parent != nil {
		o.parent.children.Remove(o)
	} else {
		o.stop()
		<-o.done
	}
	o.end()
	return o.store.dropLease(ctx, "Release", o.id, o.name, o.claim)
}

// dropLease clears the Lease's holder if it is still held under claim,
// so the next controller need not wait for it to expire.
func (s *Store) dropLease(ctx context.Context, op, id, name string, claim storage.Claim) error {
	ctx, cancel, err := s.call(ctx, op)
	if err != nil {
		return err
	}
	defer cancel()
	leases := s.client.CoordinationV1().Leases(s.ns)
	for {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return wrap(op, id, err)
		}
		if !holds(lease, claim) {
			return nil // released already, or someone else has it
		}
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = nil, nil
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return wrap(op, id, err)
		}
		return nil
	}
}

// holds reports whether lease is held under claim.
func holds(l *coordinationv1.Lease, c storage.Claim) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == c.Owner &&
		l.Spec.LeaseTransitions != nil && uint64(*l.Spec.LeaseTransitions) == c.Epoch
}

// Acquire implements [storage.Store] with the execution's Lease (named
// like its ConfigMap), held while the holder keeps renewing it (every
// third of its duration, in the background). If a live holder has it
// (renewed within its duration) the record is held; with lease.Wait,
// Acquire waits until that holder releases it or stops renewing it for a
// whole duration. A dead holder's Lease is taken over: the epoch (the
// Lease's leaseTransitions, and the record's Epoch) goes above both, which
// fences the old holder.
//
// Kubernetes has no transaction across two objects, so the Lease and the
// record are written one after the other. The order makes that safe: the
// Lease first, so nobody else can take over meanwhile, then the record's
// owner and epoch (with the lease's Move, if any); an old holder that is
// still alive stopped renewing a whole lease duration ago and learned it
// from Lost. An acquirer that finds a Lease taken at an epoch the record
// does not carry yet (another take-over between its two writes) waits for
// that take-over to settle instead of calling the record held: it may
// fail (its move was decided on a record that has moved on), and then it
// gives the Lease up and nobody held the record.
//
// What a failed Acquire may leave behind: nothing in the record, which
// is written once or not at all; the Lease it took is given up at once,
// or, if the API server cannot be reached for that, expires after its
// duration (the error then says both).
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
	name := s.Name(id)
	var parent *Ownership
	if lease.Under != nil {
		if parent, err = s.parent(id, lease.Under); err != nil {
			return nil, storage.Record{}, err
		}
	}
	ttl := lease.TTLOrDefault()
	duration := ttl.Round(time.Second)
	if duration < ttl {
		duration += time.Second // never shorter than asked
	}
	if parent != nil {
		duration = parent.duration
	}
	for attempt := 0; ; attempt++ {
		obj, rec, err := s.records.get(ctx, id)
		if err != nil {
			return nil, storage.Record{}, err
		}
		if parent != nil && storage.Ended(parent) {
			return nil, storage.Record{}, storage.UnderEnded(id, parent)
		}
		taken := time.Now() // before the Lease's renewTime is written: the holder's reckoning never runs late
		epoch, held, err := s.takeLease(ctx, name, id, lease.Holder, duration, rec.Epoch, obj.owner(), parent)
		switch {
		case errors.Is(err, storage.ErrConflict) && attempt < 16:
			continue
		case err != nil:
			return nil, storage.Record{}, err
		case held != nil && leaseAhead(held, rec):
			// Another acquirer has taken the Lease and not yet written
			// the record: its take-over may still fail (a move decided
			// on a record that has moved on), and then nobody held the
			// record. Wait for it to settle, either way.
			if err := s.waitSettled(ctx, id, held); err != nil {
				return nil, storage.Record{}, &storage.HeldError{ID: id, Holder: *held.Spec.HolderIdentity, Status: rec.Status, Waited: err}
			}
			attempt = 0
			continue
		case held != nil && !lease.Wait:
			return nil, storage.Record{}, &storage.HeldError{ID: id, Holder: *held.Spec.HolderIdentity, Status: rec.Status}
		case held != nil:
			if err := s.waitFree(ctx, id, held); err != nil {
				return nil, storage.Record{}, err
			}
			attempt = 0
			continue
		}
		written, err := s.ownRecord(ctx, id, lease, epoch)
		if err != nil {
			// Never leave the Lease taken with nobody renewing it: until
			// it expired every acquirer, this one's next attempt
			// included, would be refused as held by a holder that does
			// not exist.
			claim := storage.Claim{Owner: lease.Holder, Epoch: epoch}
			if dropErr := s.dropLease(context.WithoutCancel(ctx), "Acquire", id, name, claim); dropErr != nil {
				return nil, storage.Record{}, errors.Join(err, dropErr)
			}
			if errors.Is(err, storage.ErrConflict) && lease.Move == nil && attempt < 16 {
				continue // the record moved on; take the Lease again over it
			}
			return nil, storage.Record{}, err // a move decided on a record that moved on: the caller decides again
		}
		o := &Ownership{claim: storage.Claim{Owner: lease.Holder, Epoch: epoch}, id: id, store: s, name: name,
			duration: duration, gate: writegate.New(), parent: parent}
		if parent != nil {
			if !parent.adopt(o) {
				o.end()
				return nil, storage.Record{}, storage.UnderEnded(id, parent)
			}
			return o, written, nil
		}
		renewCtx, stop := context.WithCancel(context.Background())
		o.stop, o.done = stop, make(chan struct{})
		o.renewed.Store(taken.UnixNano())
		go o.renew(renewCtx)
		return o, written, nil
	}
}

// takeLease writes the Lease for holder at an epoch above both the
// Lease's transitions and the record's epoch, and returns that epoch; or
// returns the Lease when a live holder has it.
//
// The Lease is owned by the record's ConfigMap (owner), so that deleting
// the record deletes its Lease too (Kubernetes' garbage collector does).
//
// Under parent, the Lease names parent's (UnderAnnotation) and is live
// while parent's is.
func (s *Store) takeLease(ctx context.Context, name, id, holder string, duration time.Duration, recordEpoch uint64, owner metav1.OwnerReference, parent *Ownership) (uint64, *coordinationv1.Lease, error) {
	leases := s.client.CoordinationV1().Leases(s.ns)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(duration / time.Second)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// No Lease: the first take-over of this life, or the first since
		// the Lease of an old one was collected. The epoch floor keeps it
		// above every epoch of the id's deleted lives.
		floor, _, ferr := s.epochFloor(ctx)
		if ferr != nil {
			return 0, nil, ferr
		}
		epoch := max(recordEpoch, floor) + 1
		transitions := int32(epoch)
		annotations := map[string]string{IDAnnotation: id}
		if parent != nil {
			annotations[UnderAnnotation] = underValue(parent)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: map[string]string{ManagedLabel: s.label()},
				Annotations: annotations, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions},
		}
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 0, nil, storage.ErrConflict
		}
		if err != nil {
			return 0, nil, wrap("Acquire", id, err)
		}
		return epoch, nil, nil
	}
	if err != nil {
		return 0, nil, wrap("Acquire", id, err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		alive, err := s.alive(ctx, lease, time.Now())
		if err != nil {
			return 0, nil, wrap("Acquire", id, err)
		}
		if alive {
			return 0, lease, nil
		}
	}
	var transitions uint64
	if lease.Spec.LeaseTransitions != nil {
		transitions = uint64(*lease.Spec.LeaseTransitions)
	}
	epoch := max(transitions, recordEpoch) + 1
	t := int32(epoch)
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
		AcquireTime: &now, RenewTime: &now, LeaseTransitions: &t}
	lease.OwnerReferences = []metav1.OwnerReference{owner} // the record may have been made again since
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	delete(lease.Annotations, UnderAnnotation)
	if parent != nil {
		lease.Annotations[UnderAnnotation] = underValue(parent)
	}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
		return 0, nil, storage.ErrConflict
	} else if err != nil {
		return 0, nil, wrap("Acquire", id, err)
	}
	return epoch, nil, nil
}

// leaseAhead reports whether the Lease was taken at an epoch the record
// does not carry yet: a take-over between its two writes.
func leaseAhead(l *coordinationv1.Lease, rec storage.Record) bool {
	return l.Spec.LeaseTransitions != nil && uint64(*l.Spec.LeaseTransitions) > rec.Epoch
}

// settlePoll is how often an Acquire looks at a take-over between its
// two writes: one request of another client's.
const settlePoll = 20 * time.Millisecond

// waitSettled waits until the take-over whose Lease is held has written
// the record, or given the Lease up (released, dropped after a failed
// record write, or expired: its taker died between the two writes), or
// until ctx ends, with ctx's error.
func (s *Store) waitSettled(ctx context.Context, id string, held *coordinationv1.Lease) error {
	leases := s.client.CoordinationV1().Leases(s.ns)
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if !live(held, time.Now()) {
			return nil
		}
		cur, err := leases.Get(ctx, held.Name, metav1.GetOptions{})
		if err != nil || cur.ResourceVersion != held.ResourceVersion {
			return nil // changed, or gone, or unreadable: the caller looks again
		}
		rec, err := s.Get(ctx, id)
		if err != nil || !leaseAhead(cur, rec) {
			return nil
		}
	}
}

// parent returns the ownership a record is to be taken under: one of
// this store's, not itself taken under another, still live.
func (s *Store) parent(id string, under storage.Ownership) (*Ownership, error) {
	parent, ok := under.(*Ownership)
	switch {
	case !ok || parent.store != s:
		return nil, fmt.Errorf("kube: lease for %q: %w: Under is not an ownership of this store", id, storage.ErrInvalidLease)
	case parent.parent != nil:
		return nil, fmt.Errorf("kube: lease for %q: %w: Under was itself taken under another ownership", id, storage.ErrInvalidLease)
	case storage.Ended(parent):
		return nil, storage.UnderEnded(id, parent)
	}
	return parent, nil
}

// underValue is the UnderAnnotation of a Lease taken under parent.
func underValue(parent *Ownership) string {
	return parent.name + "/" + strconv.FormatUint(parent.claim.Epoch, 10)
}

// alive reports whether the Lease's holder holds it at now: it renewed it
// within its duration, or, for a Lease taken under another
// (UnderAnnotation), that one is live, held by the same holder at the
// epoch named.
func (s *Store) alive(ctx context.Context, l *coordinationv1.Lease, now time.Time) (bool, error) {
	under, ok := l.Annotations[UnderAnnotation]
	if !ok {
		return live(l, now), nil
	}
	name, epoch, _ := strings.Cut(under, "/")
	parent, err := s.client.CoordinationV1().Leases(s.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e, err := strconv.ParseUint(epoch, 10, 64)
	return err == nil && l.Spec.HolderIdentity != nil && holds(parent, storage.Claim{Owner: *l.Spec.HolderIdentity, Epoch: e}) &&
		live(parent, now), nil
}

// live reports whether the Lease's holder renewed it within its duration.
func live(l *coordinationv1.Lease, now time.Time) bool {
	return now.Before(expiry(l))
}

// expiry is when the Lease ends unless renewed.
func expiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// waitFree waits until the held Lease changes (released, renewed, taken)
// or would expire, whichever is first, or until ctx ends: then the error
// matches ErrHeld and ctx's error. The caller looks again either way.
func (s *Store) waitFree(ctx context.Context, id string, held *coordinationv1.Lease) error {
	heldErr := &storage.HeldError{ID: id, Holder: *held.Spec.HolderIdentity}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.client.CoordinationV1().Leases(s.ns).Watch(watchCtx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", held.Name).String(),
		ResourceVersion: held.ResourceVersion,
	})
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		// Not a passing failure: without watch on Leases every wait
		// would last the holder's whole duration, release or not.
		return wrap("Acquire", id, fmt.Errorf("watching the Lease of a live holder: %w", err))
	}
	var changed <-chan struct{}
	if err == nil {
		defer w.Stop()
		ch := make(chan struct{})
		go func() {
			defer close(ch)
			for range w.ResultChan() {
				return // any event: look again
			}
		}()
		changed = ch
	}
	// A small margin past the expiry: the holder's clock and ours differ
	// by the time a renewal takes to travel. A Lease taken under another
	// lasts as long as that one.
	until := expiry(held)
	if under, ok := held.Annotations[UnderAnnotation]; ok {
		name, _, _ := strings.Cut(under, "/")
		if parent, err := s.client.CoordinationV1().Leases(s.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			until = expiry(parent)
		}
	}
	timer := time.NewTimer(time.Until(until) + 100*time.Millisecond)
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
	case <-ctx.Done():
		heldErr.Waited = context.Cause(ctx)
		return heldErr
	}
	return nil
}

// ownRecord writes holder and epoch into the record, with an audit entry.
func (s *Store) ownRecord(ctx context.Context, id string, lease storage.Lease, epoch uint64) (storage.Record, error) {
	for attempt := 0; ; attempt++ {
		rec, err := s.Get(ctx, id)
		if err != nil {
			return storage.Record{}, err
		}
		if rec.Epoch >= epoch {
			// The record is ahead of the Lease (the Lease was deleted and
			// made again): the caller takes the Lease again, above it.
			return storage.Record{}, storage.ErrConflict
		}
		if s.beforeTakeOverWrite != nil {
			s.beforeTakeOverWrite()
		}
		next, err := lease.TakeOver(rec, epoch, time.Now())
		if err != nil {
			return storage.Record{}, err
		}
		written, err := s.update(ctx, id, rec.Revision, next)
		var conflict *storage.ConflictError
		if errors.As(err, &conflict) && attempt < 16 {
			// An outside authority wrote meanwhile. Holding the Lease,
			// this holder is the only one that can take the record over:
			// write the take-over again over the fresh record, at the
			// same epoch.
			continue
		}
		if errors.As(err, &conflict) {
			return storage.Record{}, storage.ErrConflict
		}
		return written, err
	}
}

// renew renews the Lease every duration/3 until stopped; when the Lease
// reaches its expiry by the holder's reckoning without a renewal, or has
// another holder, it closes lost.
func (o *Ownership) renew(ctx context.Context) {
	defer close(o.done)
	leases := o.store.client.CoordinationV1().Leases(o.store.ns)
	tick := time.NewTicker(o.duration / 3)
	defer tick.Stop()
	expired := time.NewTimer(time.Until(o.expiry()))
	defer expired.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expired.C:
			o.end()
			return
		case <-tick.C:
		}
		started := time.Now()
		callCtx, cancel := context.WithDeadline(ctx, o.expiry())
		lease, err := leases.Get(callCtx, o.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Deleted, with its record (it is owned by the record's
			// ConfigMap) or on its own: nothing is held any more.
			cancel()
			o.end()
			return
		}
		if err == nil {
			if !holds(lease, o.claim) {
				cancel()
				o.end()
				return
			}
			now := metav1.NewMicroTime(started)
			lease.Spec.RenewTime = &now
			_, err = leases.Update(callCtx, lease, metav1.UpdateOptions{})
		}
		cancel()
		if err == nil {
			o.renewed.Store(started.UnixNano())
			expired.Reset(time.Until(o.expiry()))
		}
	}
}

// checkID refuses an id no record can have, before any request.
func checkID(op, id string) error {
	if err := storage.ValidateID(id); err != nil {
		return fmt.Errorf("kube: %s: %w", op, err)
	}
	return nil
}
