package kube_test

import (
	"context"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
)

// An execution controller on Kubernetes: its record in a ConfigMap, its
// ownership in a Lease, its startup decided by recovery.ApplyStartup; and
// a recovery.Reconciler run by the controller-runtime manager the
// operator already has.
func Example() {
	ctx := context.Background()
	cfg := ctrl.GetConfigOrDie()
	client := kubernetes.NewForConfigOrDie(cfg)

	store, _ := kube.New(client, kube.Options{Namespace: "teraslice"})
	own, err := store.Acquire(ctx, "ex-42", "ex-42-controller-7d9f", 15e9) // 15s Lease
	if err != nil {
		return // kube.ErrHeld: a live controller has it
	}
	defer own.Release(ctx)
	exec, _ := transition.NewPersisted(state.Lifecycle(), store, "ex-42")
	verdict, exec, _ := recovery.ApplyStartup(ctx, exec.WithClaim(own.Claim), "ex-42-controller-7d9f", recovery.Policy{Restarts: true})
	_, _ = verdict, exec

	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{})
	var r recovery.Reconciler[types.NamespacedName] // your reconciler
	_ = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(kube.ForControllerRuntime(r))
	_ = mgr.Start(ctx)
}
