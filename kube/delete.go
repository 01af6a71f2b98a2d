package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ storage.Deleter = (*Store)(nil)

// EpochFloorKey is the key of the epoch floor in its ConfigMap's data
// (see FloorName): the highest epoch a deleted record had, in decimal.
const EpochFloorKey = "epoch-floor"

// FloorName returns the name of the ConfigMap holding the store's epoch
// floor: the prefix without its dash, then ".epoch-floor". Like
// TableName it has a dot, so no record's ConfigMap can have it, and it
// carries no ManagedLabel, so List and Watch never see it.
func (s *Store) FloorName() string { return strings.TrimSuffix(s.prefix, "-") + ".epoch-floor" }

// maxFloorAttempts bounds how often a delete raises the floor again
// when another delete raised it meanwhile: each attempt loses only to a
// write that succeeded.
const maxFloorAttempts = 16

// Delete implements [storage.Deleter]. It reads the record and its
// Lease (a live holder refuses it), raises the epoch floor to the
// record's epoch first, so that a record created again under the id is
// taken over above it even if the delete is the last thing this process
// does, and then deletes the ConfigMap with its resourceVersion and UID
// as preconditions: a take-over or a write that landed after the read
// makes it a conflict, never a lost write. The record's Lease, which its
// ConfigMap owns, is left to Kubernetes' garbage collector; a Lease it
// has not collected yet only raises the next life's epochs further.
func (s *Store) Delete(ctx context.Context, id string, expect uint64) error {
	if err := checkID("Delete", id); err != nil {
		return err
	}
	ctx, cancel, err := s.call(ctx, "Delete")
	if err != nil {
		return err
	}
	defer cancel()
	obj, rec, err := s.records.get(ctx, id)
	if err != nil {
		return err
	}
	if rec.Revision != expect {
		return &storage.ConflictError{ID: id, Expected: expect, Current: rec}
	}
	lease, err := s.client.CoordinationV1().Leases(s.ns).Get(ctx, s.Name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return wrap("Delete", id, err)
	case lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "":
		alive, err := s.alive(ctx, lease, time.Now())
		if err != nil {
			return wrap("Delete", id, err)
		}
		if alive {
			return &storage.HeldError{ID: id, Holder: *lease.Spec.HolderIdentity, Status: rec.Status}
		}
	}
	if err := s.raiseFloor(ctx, id, rec.Epoch); err != nil {
		return err
	}
	err = s.records.remove(ctx, id, obj)
	switch {
	case err == nil:
		s.claims.forget(id)
		return nil
	case errors.Is(err, errStale):
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return gerr
		}
		return &storage.ConflictError{ID: id, Expected: expect, Current: cur}
	}
	return err
}

// raiseFloor makes the epoch floor at least epoch: a create, or an
// update at the resourceVersion read, so that two deletes never lower
// it.
func (s *Store) raiseFloor(ctx context.Context, id string, epoch uint64) error {
	cms := s.client.CoreV1().ConfigMaps(s.ns)
	for range maxFloorAttempts {
		floor, cm, err := s.epochFloor(ctx)
		if err != nil {
			return err
		}
		if floor >= epoch {
			return nil
		}
		data := map[string]string{EpochFloorKey: strconv.FormatUint(epoch, 10)}
		if cm == nil {
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: s.FloorName(), Namespace: s.ns},
				Data:       data}, metav1.CreateOptions{})
		} else {
			cm.Data = data
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			return nil
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
			continue // another delete raised it: read it again
		}
		return wrap("Delete", id, err)
	}
	return fmt.Errorf("kube: Delete %q: %w: the epoch floor kept changing", id, storage.ErrConflict)
}

// epochFloor reads the epoch floor and its ConfigMap: zero and nil when
// none was ever written. A floor that does not parse (written by hand)
// is an error matching storage.ErrCorrupt: no epoch is safe to take over
// at without it.
func (s *Store) epochFloor(ctx context.Context) (uint64, *corev1.ConfigMap, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.ns).Get(ctx, s.FloorName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil, nil
	case err != nil:
		return 0, nil, wrap("epoch floor", s.FloorName(), err)
	}
	floor, err := strconv.ParseUint(cm.Data[EpochFloorKey], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("kube: ConfigMap %s/%s: %w: %s is %q, not a number (write the highest epoch a deleted record had)",
			s.ns, cm.Name, storage.ErrCorrupt, EpochFloorKey, cm.Data[EpochFloorKey])
	}
	return floor, cm, nil
}
