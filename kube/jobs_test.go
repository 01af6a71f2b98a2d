package kube_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"

	"github.com/execfsm/execfsm/kube"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func job(ns, name string, labels, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "sim", Image: "villas/simulator"}},
		}}},
	}
}

// VILLAScontroller's keys: the manager's Jobs are selected by its UUID,
// each keyed by its simulator's UUID, the rest in annotations.
const (
	villasManager  = "manager.villas.io/uuid"
	villasUUID     = "service.villas.io/uuid"
	villasLocation = "service.villas.io/location"
)

// A restarted manager finds its simulators' Jobs by its UUID and reads
// each one's identity back from its labels and annotations; the recovery
// pass then adopts them under the same UUIDs.
func TestJobsAreAdoptedByTheIdentityTheirMetadataCarries(t *testing.T) {
	ns := namespace(t)
	mine := []reconcile.Identity{
		{Labels: map[string]string{villasUUID: "sim-1", villasManager: "mgr-a"},
			Annotations: map[string]string{"service.villas.io/name": "dpsim grid", villasLocation: "Aachen", "service.villas.io/owner": "alice"}},
		{Labels: map[string]string{villasUUID: "sim-2", villasManager: "mgr-a"},
			Annotations: map[string]string{"service.villas.io/name": "opal", villasLocation: "Lyon", "service.villas.io/owner": "bob"}},
	}
	other := reconcile.Identity{Labels: map[string]string{villasUUID: "sim-9", villasManager: "mgr-b"}}
	for _, id := range append(mine, other) {
		_, err := clientset.BatchV1().Jobs(ns).Create(bg, job(ns, "job-"+id.Labels[villasUUID], id.Labels, id.Annotations), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := clientset.BatchV1().Jobs(ns).Create(bg, job(ns, "not-an-item", map[string]string{villasManager: "mgr-a"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	jobs := &kube.Jobs{Client: masterClient, Namespace: ns, Selector: map[string]string{villasManager: "mgr-a"}, KeyLabel: villasUUID}
	items, err := jobs.List(bg)
	require.NoError(t, err)
	require.Len(t, items, 2, "only mgr-a's Jobs that are items")
	for k, it := range items {
		require.Equal(t, mine[k].Labels[villasUUID], it.Key)
		require.Equal(t, mine[k], it.Identity, "the Job's labels and annotations, as they are")
	}

	var adopted []reconcile.Identity
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		World: jobs.List,
		Adopter: reconcile.AdopterFunc[string](func(_ context.Context, it reconcile.Item[string]) error {
			adopted = append(adopted, it.Identity)
			return nil
		}),
		Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		Resync:     -1,
	})
	require.NoError(t, err)
	stop := reconciletest.Start(t, loop)
	reconciletest.Idle(t, loop)
	stop()
	require.Len(t, adopted, 2)
	require.Equal(t, "Aachen", adopted[0].Annotations[villasLocation])

	for name, bad := range map[string]*kube.Jobs{
		"empty":         {},
		"no selector":   {Client: clientset, KeyLabel: villasUUID},
		"no key label":  {Client: clientset, Selector: map[string]string{villasManager: "mgr-a"}},
		"invalid label": {Client: clientset, Selector: map[string]string{"not a label!": "x"}, KeyLabel: villasUUID},
	} {
		_, err = bad.List(bg)
		require.Error(t, err, name)
	}
}
