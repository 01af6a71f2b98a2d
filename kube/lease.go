package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/execfsm/execfsm/internal/storecall"
	"github.com/execfsm/execfsm/transition"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrHeld is matched by the error of Acquire when a live controller holds
// the execution's Lease.
var ErrHeld = errors.New("execution is owned by a live controller")

// Ownership is a controller's hold on an execution through a
// coordination.k8s.io/v1 Lease it keeps renewing.
type Ownership struct {
	// Claim is the holder and the epoch (the Lease's leaseTransitions);
	// give it to transition.Persisted.WithClaim.
	Claim  transition.Claim
	Record transition.Record

	store *Store
	name  string
	stop  context.CancelFunc
	done  chan struct{}
	lost  chan struct{}
	once  sync.Once
}

// Lost is closed when the Lease could not be renewed within its duration
// (or another holder has it): stop driving the execution; writes will be
// fenced once the next owner takes over.
func (o *Ownership) Lost() <-chan struct{} { return o.lost }

// Release stops renewing and gives the Lease up, so the next controller
// need not wait for it to expire.
func (o *Ownership) Release(ctx context.Context) error {
	o.stop()
	<-o.done
	ctx, cancel, err := o.store.call(ctx, "Release")
	if err != nil {
		return err
	}
	defer cancel()
	leases := o.store.client.CoordinationV1().Leases(o.store.ns)
	lease, err := leases.Get(ctx, o.name, metav1.GetOptions{})
	if err != nil {
		return wrap("Release", o.Record.ID, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != o.Claim.Owner {
		return nil // someone else has it already
	}
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = nil, nil
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return wrap("Release", o.Record.ID, err)
	}
	return nil
}

// Acquire takes execution id over for holder through its Lease, held
// while holder keeps renewing it (every duration/3, in the background).
// If a live holder has it (renewed within its duration) the error
// matches [ErrHeld]. A dead holder's Lease is taken over: the epoch (the
// Lease's leaseTransitions, and the record's Epoch) goes up by one,
// fencing the old holder.
//
// Kubernetes has no transaction across two objects, so the Lease and the
// record are written one after the other. The order makes that safe: the
// Lease first, so nobody else can take over meanwhile, then the record's
// owner and epoch; an old holder that is still alive stopped renewing a
// whole lease duration ago and learned it from Lost.
func (s *Store) Acquire(ctx context.Context, id, holder string, duration time.Duration) (*Ownership, error) {
	if holder == "" || len(holder) > transition.MaxOwnerLen {
		return nil, fmt.Errorf("kube: Acquire %q: %w: holder is %d bytes, want 1 to %d", id, transition.ErrInvalidRecord, len(holder), transition.MaxOwnerLen)
	}
	if duration < time.Second || duration > time.Hour {
		return nil, fmt.Errorf("kube: Acquire %q: lease duration %v, want 1s to 1h", id, duration)
	}
	ctx, cancel, err := s.call(ctx, "Acquire")
	if err != nil {
		return nil, err
	}
	defer cancel()
	name := s.Name(id)
	for attempt := 0; attempt < 16; attempt++ {
		rec, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		epoch, err := s.takeLease(ctx, name, id, holder, duration, rec.Epoch)
		if errors.Is(err, transition.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		written, err := s.ownRecord(ctx, id, holder, epoch)
		if errors.Is(err, transition.ErrConflict) {
			continue // the record moved on; take the Lease again over it
		}
		if err != nil {
			return nil, err
		}
		renewCtx, stop := context.WithCancel(context.Background())
		o := &Ownership{Claim: transition.Claim{Owner: holder, Epoch: epoch}, Record: written, store: s, name: name,
			stop: stop, done: make(chan struct{}), lost: make(chan struct{})}
		go o.renew(renewCtx, duration)
		return o, nil
	}
	return nil, fmt.Errorf("kube: Acquire %q: %w: the Lease or the record kept changing", id, transition.ErrConflict)
}

// takeLease writes the Lease for holder at an epoch above both the
// Lease's transitions and the record's epoch, and returns that epoch.
func (s *Store) takeLease(ctx context.Context, name, id, holder string, duration time.Duration, recordEpoch uint64) (uint64, error) {
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
			return 0, transition.ErrConflict
		}
		if err != nil {
			return 0, wrap("Acquire", id, err)
		}
		return epoch, nil
	}
	if err != nil {
		return 0, wrap("Acquire", id, err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" && live(lease, time.Now()) {
		return 0, fmt.Errorf("kube: Acquire %q: %w: held by %q", id, ErrHeld, *h)
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
		return 0, transition.ErrConflict
	} else if err != nil {
		return 0, wrap("Acquire", id, err)
	}
	return epoch, nil
}

// live reports whether the Lease's holder renewed it within its duration.
func live(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// ownRecord writes holder and epoch into the record, with an audit entry.
func (s *Store) ownRecord(ctx context.Context, id, holder string, epoch uint64) (transition.Record, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return transition.Record{}, err
	}
	if rec.Epoch >= epoch {
		return transition.Record{}, transition.ErrConflict
	}
	next := storecall.TakeOver(rec, holder, epoch, "acquired the Lease", time.Now())
	written, err := s.CompareAndSwap(ctx, id, rec.Revision, next)
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
			if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != o.Claim.Owner ||
				lease.Spec.LeaseTransitions == nil || uint64(*lease.Spec.LeaseTransitions) != o.Claim.Epoch {
				cancel()
				o.once.Do(func() { close(o.lost) })
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
			o.once.Do(func() { close(o.lost) })
			return
		}
	}
}
