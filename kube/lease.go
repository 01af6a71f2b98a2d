package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/execfsm/execfsm/transition"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Ownership is a controller's hold on an execution through a
// coordination.k8s.io/v1 Lease it keeps renewing. It implements
// [transition.Ownership].
type Ownership struct {
	claim transition.Claim
	id    string
	store *Store
	name  string
	stop  context.CancelFunc
	done  chan struct{}
	lost  chan struct{}
	once  sync.Once
}

var _ transition.Ownership = (*Ownership)(nil)

// Claim implements [transition.Ownership]: the holder and the epoch (the
// Lease's leaseTransitions, and the record's Epoch).
func (o *Ownership) Claim() transition.Claim { return o.claim }

// Lost implements [transition.Ownership]: it is closed when the Lease
// could not be renewed within its duration, has another holder, or was
// released.
func (o *Ownership) Lost() <-chan struct{} { return o.lost }

func (o *Ownership) end() { o.once.Do(func() { close(o.lost) }) }

// Release implements [transition.Ownership]: it stops renewing and clears
// the Lease's holder, so the next controller need not wait for it to
// expire. Releasing twice, or a Lease someone else holds by now, is no
// error.
func (o *Ownership) Release(ctx context.Context) error {
	o.stop()
	<-o.done
	o.end()
	ctx, cancel, err := o.store.call(ctx, "Release")
	if err != nil {
		return err
	}
	defer cancel()
	leases := o.store.client.CoordinationV1().Leases(o.store.ns)
	for {
		lease, err := leases.Get(ctx, o.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return wrap("Release", o.id, err)
		}
		if !holds(lease, o.claim) {
			return nil // released already, or someone else has it
		}
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = nil, nil
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return wrap("Release", o.id, err)
		}
		return nil
	}
}

// holds reports whether lease is held under claim.
func holds(l *coordinationv1.Lease, c transition.Claim) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == c.Owner &&
		l.Spec.LeaseTransitions != nil && uint64(*l.Spec.LeaseTransitions) == c.Epoch
}

// Acquire implements [transition.Store] with the execution's Lease (named
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
// owner and epoch; an old holder that is still alive stopped renewing a
// whole lease duration ago and learned it from Lost.
func (s *Store) Acquire(ctx context.Context, id string, lease transition.Lease) (transition.Ownership, transition.Record, error) {
	if err := lease.Validate(); err != nil {
		return nil, transition.Record{}, err
	}
	if err := checkID("Acquire", id); err != nil {
		return nil, transition.Record{}, err
	}
	ctx, cancel, err := s.call(ctx, "Acquire")
	if err != nil {
		return nil, transition.Record{}, err
	}
	defer cancel()
	name := s.Name(id)
	duration := lease.TTL.Round(time.Second)
	if duration < lease.TTL {
		duration += time.Second // never shorter than asked
	}
	for attempt := 0; ; attempt++ {
		rec, err := s.Get(ctx, id)
		if err != nil {
			return nil, transition.Record{}, err
		}
		epoch, held, err := s.takeLease(ctx, name, id, lease.Holder, duration, rec.Epoch)
		switch {
		case errors.Is(err, transition.ErrConflict) && attempt < 16:
			continue
		case err != nil:
			return nil, transition.Record{}, err
		case held != nil && !lease.Wait:
			return nil, transition.Record{}, &transition.HeldError{ID: id, Holder: *held.Spec.HolderIdentity}
		case held != nil:
			if err := s.waitFree(ctx, id, held); err != nil {
				return nil, transition.Record{}, err
			}
			attempt = 0
			continue
		}
		written, err := s.ownRecord(ctx, id, lease, epoch)
		if errors.Is(err, transition.ErrConflict) && attempt < 16 {
			continue // the record moved on; take the Lease again over it
		}
		if err != nil {
			return nil, transition.Record{}, err
		}
		renewCtx, stop := context.WithCancel(context.Background())
		o := &Ownership{claim: transition.Claim{Owner: lease.Holder, Epoch: epoch}, id: id, store: s, name: name,
			stop: stop, done: make(chan struct{}), lost: make(chan struct{})}
		go o.renew(renewCtx, duration)
		return o, written, nil
	}
}

// takeLease writes the Lease for holder at an epoch above both the
// Lease's transitions and the record's epoch, and returns that epoch; or
// returns the Lease when a live holder has it.
func (s *Store) takeLease(ctx context.Context, name, id, holder string, duration time.Duration, recordEpoch uint64) (uint64, *coordinationv1.Lease, error) {
	leases := s.client.CoordinationV1().Leases(s.ns)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(duration / time.Second)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		epoch := recordEpoch + 1
		transitions := int32(epoch)
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: map[string]string{ManagedLabel: s.label()},
				Annotations: map[string]string{IDAnnotation: id}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions},
		}
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 0, nil, transition.ErrConflict
		}
		if err != nil {
			return 0, nil, wrap("Acquire", id, err)
		}
		return epoch, nil, nil
	}
	if err != nil {
		return 0, nil, wrap("Acquire", id, err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" && live(lease, time.Now()) {
		return 0, lease, nil
	}
	var transitions uint64
	if lease.Spec.LeaseTransitions != nil {
		transitions = uint64(*lease.Spec.LeaseTransitions)
	}
	epoch := max(transitions, recordEpoch) + 1
	t := int32(epoch)
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
		AcquireTime: &now, RenewTime: &now, LeaseTransitions: &t}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
		return 0, nil, transition.ErrConflict
	} else if err != nil {
		return 0, nil, wrap("Acquire", id, err)
	}
	return epoch, nil, nil
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
	heldErr := &transition.HeldError{ID: id, Holder: *held.Spec.HolderIdentity}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.client.CoordinationV1().Leases(s.ns).Watch(watchCtx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", held.Name).String(),
		ResourceVersion: held.ResourceVersion,
	})
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
	// by the time a renewal takes to travel.
	timer := time.NewTimer(time.Until(expiry(held)) + 100*time.Millisecond)
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
func (s *Store) ownRecord(ctx context.Context, id string, lease transition.Lease, epoch uint64) (transition.Record, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return transition.Record{}, err
	}
	if rec.Epoch >= epoch {
		return transition.Record{}, transition.ErrConflict
	}
	next := lease.TakeOver(rec, epoch, time.Now())
	written, err := s.update(ctx, id, rec.Revision, next)
	var conflict *transition.ConflictError
	if errors.As(err, &conflict) {
		return transition.Record{}, transition.ErrConflict
	}
	return written, err
}

// renew renews the Lease every duration/3 until stopped; when it cannot
// for a whole duration, or the Lease has another holder, it closes lost.
func (o *Ownership) renew(ctx context.Context, duration time.Duration) {
	defer close(o.done)
	leases := o.store.client.CoordinationV1().Leases(o.store.ns)
	lastRenewed := time.Now()
	tick := time.NewTicker(duration / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, duration/3)
		lease, err := leases.Get(callCtx, o.name, metav1.GetOptions{})
		if err == nil {
			if !holds(lease, o.claim) {
				cancel()
				o.end()
				return
			}
			now := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &now
			_, err = leases.Update(callCtx, lease, metav1.UpdateOptions{})
		}
		cancel()
		if err == nil {
			lastRenewed = time.Now()
			continue
		}
		if time.Since(lastRenewed) >= duration {
			o.end()
			return
		}
	}
}

// checkID refuses an id no record can have, before any request.
func checkID(op, id string) error {
	if err := transition.ValidateID(id); err != nil {
		return fmt.Errorf("kube: %s: %w", op, err)
	}
	return nil
}
