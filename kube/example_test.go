package kube_test

import (
	"context"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
)

// An execution controller on Kubernetes: its record in a ConfigMap, its
// ownership in a Lease, its startup decided by recovery.ApplyStartup; and
// a reconcile.Reconciler run by the controller-runtime manager the
// operator already has.
func Example() {
	ctx := context.Background()
	cfg := ctrl.GetConfigOrDie()
	client := kubernetes.NewForConfigOrDie(cfg)

	store, _ := kube.New(client, kube.Options{Namespace: "teraslice"})
	exec, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions[state.Status]{})
	lease := storage.Lease{Holder: "ex-42-controller-7d9f", TTL: 15 * time.Second} // held in a Lease
	verdict, err := recovery.ApplyStartup(ctx, teraslice.Roles(), exec, lease, recovery.Policy[state.Status]{Restarts: true})
	if err != nil {
		return // storage.ErrHeld: a live controller has it
	}
	defer exec.Ownership().Release(ctx)
	_ = verdict

	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{})
	var r reconcile.Reconciler[types.NamespacedName] // your reconciler
	_ = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(ctrlruntime.ToReconciler(r))
	_ = mgr.Start(ctx)
}
