package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// A reconcile.Reconciler runs inside a controller-runtime manager watching
// ConfigMaps of one namespace: it is called for the ConfigMap created.
func TestRecoveryReconcilerRunsInAControllerRuntimeManager(t *testing.T) {
	ns := namespace(t)
	var mu sync.Mutex
	seen := map[types.NamespacedName]int{}
	r := reconcile.ReconcilerFunc[types.NamespacedName](func(_ context.Context, key types.NamespacedName) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[key]++
		return reconcile.Result{}, nil
	})
	runManager(t, ns, func(mgr ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).Named("execfsm-test-" + ns).For(&corev1.ConfigMap{}).Complete(ctrlruntime.ToReconciler(r))
	})

	_, err := clientset.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sim-1", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	key := types.NamespacedName{Namespace: ns, Name: "sim-1"}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return seen[key] > 0 }, 30*time.Second, 20*time.Millisecond)
}

// In a manager watching the controllers' Jobs and the records, both map
// to the execution's id (ctrlruntime.ExecutionOf), and one reconciler
// keyed by id (the key kube.Jobs and the store use) hears of both.
func TestAManagerReconcilesExecutionsByTheirID(t *testing.T) {
	ns := namespace(t)
	var mu sync.Mutex
	seen := map[string]int{}
	r := reconcile.ReconcilerFunc[string](func(_ context.Context, id string) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[id]++
		return reconcile.Result{}, nil
	})
	runManager(t, ns, func(mgr ctrl.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).Named("executions-"+ns).
			Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(ctrlruntime.ExecutionOf)).
			Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(ctrlruntime.ExecutionOf)).
			Complete(ctrlruntime.ToExecutionReconciler(r))
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return seen["Ex 1/b"] }

	store, err := kube.New(masterClient, kube.Options{Namespace: ns})
	require.NoError(t, err)
	_, err = store.Create(bg, storagetest.Sample("Ex 1/b")) // an id no object name can hold
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count() > 0 }, 30*time.Second, 20*time.Millisecond, "the record's ConfigMap")
	before := count()
	job, err := kube.ControllerJob{Namespace: ns, Name: "ex-1-controller", Execution: "ex-1", Status: "pending", Pod: controllerPod()}.Build()
	require.NoError(t, err)
	job.Labels[kube.ExecutionLabel] = "Ex-1_b" // label values are narrower; the Job's own id here
	_, err = masterClient.BatchV1().Jobs(ns).Create(bg, job, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return seen["Ex-1_b"] > 0 }, 30*time.Second, 20*time.Millisecond, "the Job")
	require.Equal(t, before, count(), "the Job is another execution's")
	mu.Lock()
	defer mu.Unlock()
	for id := range seen {
		require.Contains(t, []string{"Ex 1/b", "Ex-1_b"}, id, "only execution ids, never object names")
	}
}

// runManager runs a controller-runtime manager for ns as the cluster
// master, with the controllers register adds, until the test ends.
func runManager(t *testing.T, ns string, register func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(masterCfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	require.NoError(t, err)
	require.NoError(t, register(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}
