package kube_test

import (
	"context"
	"errors"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
)

// An execution controller on Kubernetes: its record in a ConfigMap, its
// ownership in a Lease, its startup decided by a recovery.Decider; and
// a reconcile.Reconciler run by the controller-runtime manager the
// operator already has.
func Example() {
	ctx := context.Background()
	cfg := ctrl.GetConfigOrDie()
	client := kubernetes.NewForConfigOrDie(cfg)

	store, _ := kube.New(client, kube.Options{Namespace: "teraslice"})
	exec, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions{})
	lease := storage.Lease{Holder: "ex-42-controller-7d9f", TTL: 15 * time.Second} // held in a Lease
	decider, _ := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Restarts: true})
	verdict, err := decider.Start(ctx, exec, lease)
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

// VILLAScontroller's Kubernetes manager lists its simulators' Jobs by its
// own UUID and keys them by service UUID; the Loop adopts each from the
// identity the Job carries.
func ExampleJobs() {
	cfg := ctrl.GetConfigOrDie()
	client := kubernetes.NewForConfigOrDie(cfg)
	managerUUID := "3c1f0a52-manager"
	jobs := &kube.Jobs{Client: client, Namespace: "villas",
		Selector: map[string]string{"manager.villas.io/uuid": managerUUID},
		KeyLabel: "service.villas.io/uuid"}
	var adopt reconcile.Adopter[string] // rebuilds a simulator from Item.Identity
	var r reconcile.Reconciler[string]  // your reconciler
	loop, _ := reconcile.NewLoop(reconcile.Options[string]{World: jobs.List, Adopter: adopt, Reconciler: r})
	_ = loop.Run(context.Background())
}

// The cluster master fails an execution whose controller Job gave up
// (its crash limit reached before the execution's restart budget), since
// no controller is left to write the end.
func ExampleJobFailure() {
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(ctrl.GetConfigOrDie())
	store, _ := kube.New(client, kube.Options{Namespace: "teraslice"})
	master, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions{Actor: "master"})
	job, err := client.BatchV1().Jobs("teraslice").Get(ctx, "ex-42-controller", metav1.GetOptions{})
	if err != nil {
		return
	}
	if why, failed := kube.JobFailure(job); failed {
		decider, _ := recovery.NewDecider(teraslice.Roles(), recovery.Policy{})
		_, _ = decider.Finish(ctx, master, recovery.Ending{Err: errors.New(why)}, nil)
	}
}
