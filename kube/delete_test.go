package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The master (MasterRole only) deletes an ended record; Kubernetes'
// garbage collector then removes its Lease, which the ConfigMap owned.
// A record created again under the id is taken over by a controller
// (ControllerRole only) above every epoch of its old life, although no
// Lease of that life is left to say so: the epoch floor does.
func TestADeletedRecordsLeaseIsCollectedAndTheFloorKeepsItsEpochs(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	master, err := kube.New(masterClient, kube.Options{Namespace: ns})
	require.NoError(t, err)
	controller, err := kube.New(kubernetes.NewForConfigOrDie(controllerCfg), kube.Options{Namespace: ns})
	require.NoError(t, err)

	_, err = master.Create(ctx, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	var last storage.Record
	for _, owner := range []string{"pod-a", "pod-b"} {
		own, held, err := controller.Acquire(ctx, "ex-1", storagetest.Lease(owner))
		require.NoError(t, err)
		require.NoError(t, own.Release(ctx))
		last = held
	}
	require.NoError(t, master.Delete(ctx, "ex-1", last.Revision))
	require.Eventually(t, func() bool {
		_, err := clientset.CoordinationV1().Leases(ns).Get(ctx, master.Name("ex-1"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the garbage collector to delete the record's Lease with its ConfigMap")

	_, err = master.Create(ctx, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	own, held, err := controller.Acquire(ctx, "ex-1", storagetest.Lease("pod-c"))
	require.NoError(t, err)
	require.Greater(t, held.Epoch, last.Epoch, "the new life's first take-over is above the old life's last")
	require.NoError(t, own.Release(ctx))
}

// A floor ConfigMap that does not hold a number (edited by hand) leaves
// no epoch safe to take over at: Delete and a take-over without a Lease
// say so, matching ErrCorrupt, and write nothing.
func TestADamagedEpochFloorIsReportedNotGuessed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := s.Create(ctx, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	other, err := s.Create(ctx, storagetest.Sample("ex-2"))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "ex-2", other.Revision), "the floor's ConfigMap made by a delete")
	floor, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Get(ctx, s.FloorName(), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "3", floor.Data[kube.EpochFloorKey], "the deleted record's epoch")
	floor.Data[kube.EpochFloorKey] = "seven"
	_, err = clientset.CoreV1().ConfigMaps(s.Namespace()).Update(ctx, floor, metav1.UpdateOptions{})
	require.NoError(t, err)

	err = s.Delete(ctx, "ex-1", rec.Revision)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, s.FloorName())
	_, _, err = s.Acquire(ctx, "ex-1", storagetest.Lease("pod-a"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	got, err := s.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing written")
}
