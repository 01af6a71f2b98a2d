package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	mgr, err := ctrl.NewManager(masterCfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	require.NoError(t, err)
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named("execfsm-test-"+ns).For(&corev1.ConfigMap{}).Complete(ctrlruntime.ToReconciler(r)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	_, err = clientset.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sim-1", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	key := types.NamespacedName{Namespace: ns, Name: "sim-1"}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return seen[key] > 0 }, 30*time.Second, 20*time.Millisecond)
}
