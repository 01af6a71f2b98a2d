package kube_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
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

// A restarted manager finds its simulators' Jobs by its UUID and reads
// each one's identity back from its labels and annotations; the recovery
// pass then adopts them under the same UUIDs.
func TestJobsAreAdoptedByTheIdentityTheirMetadataCarries(t *testing.T) {
	ns := namespace(t)
	keys := kube.DefaultIdentityKeys()
	mine := []recovery.Identity{
		{UUID: "sim-1", Manager: "mgr-a", Name: "dpsim grid", Location: "Aachen", Realm: "ieee14", Owner: "alice"},
		{UUID: "sim-2", Manager: "mgr-a", Name: "opal", Location: "Lyon", Realm: "ieee14", Owner: "bob"},
	}
	for _, id := range append(mine, recovery.Identity{UUID: "sim-9", Manager: "mgr-b"}) {
		l, a := keys.Labels(id)
		_, err := clientset.BatchV1().Jobs(ns).Create(bg, job(ns, "job-"+id.UUID, l, a), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := clientset.BatchV1().Jobs(ns).Create(bg, job(ns, "not-an-item", map[string]string{keys.Manager: "mgr-a"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	jobs := &kube.Jobs{Client: clientset, Namespace: ns, Manager: "mgr-a"}
	items, err := jobs.List(bg)
	require.NoError(t, err)
	require.Len(t, items, 2, "only mgr-a's Jobs that are items")
	for k, it := range items {
		want := mine[k]
		want.Extra = map[string]string{"job": ns + "/job-" + want.UUID}
		require.Equal(t, want, it.Identity)
	}

	var adopted []recovery.Identity
	loop, err := recovery.NewLoop(recovery.Options[string]{
		List: jobs.List,
		Adopter: recovery.AdopterFunc[string](func(_ context.Context, it recovery.Item[string]) error {
			adopted = append(adopted, it.Identity)
			return nil
		}),
		Reconciler: recovery.ReconcilerFunc[string](func(context.Context, string) (recovery.Result, error) { return recovery.Result{}, nil }),
		Resync:     -1,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	require.NoError(t, loop.Idle(ctx))
	cancel()
	require.NoError(t, <-done)
	require.Len(t, adopted, 2)
	require.Equal(t, "Aachen", adopted[0].Location)

	_, err = (&kube.Jobs{}).List(bg)
	require.Error(t, err)
}
