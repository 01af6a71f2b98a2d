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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	decider, _ := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob, Failovers: teraslice.Failovers})
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

// The cluster master ends an execution whose controller Job gave up (its
// crash limit reached before the execution's failover allowance) or was
// deleted, as soon as the Job's events say so: no controller is left to
// write the end, and a relocating one would otherwise wait for the
// Reaper's deadline.
func ExampleJobs_Events() {
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(ctrl.GetConfigOrDie())
	store, _ := kube.New(client, kube.Options{Namespace: "teraslice"})
	decider, _ := recovery.NewDecider(teraslice.Roles(), recovery.Policy{})
	jobs := &kube.Jobs{Client: client, Namespace: "teraslice",
		Selector: map[string]string{"app.kubernetes.io/component": "execution_controller"},
		KeyLabel: kube.ExecutionLabel}
	events, err := jobs.Events(ctx)
	if err != nil {
		return // the master's Role lacks list or watch on Jobs
	}
	endStranded := func(ctx context.Context, id string) (reconcile.Result, error) {
		job, err := client.BatchV1().Jobs("teraslice").Get(ctx, id+"-controller", metav1.GetOptions{})
		why, ended := kube.JobFailure(job)
		if apierrors.IsNotFound(err) {
			why, ended = "controller Job deleted", true
		} else if err != nil {
			return reconcile.Result{}, err
		}
		if !ended {
			return reconcile.Result{}, nil
		}
		master, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "master"})
		if err != nil {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
		_, err = decider.Abandon(ctx, master, why)
		if errors.Is(err, storage.ErrHeld) {
			return reconcile.Result{RequeueAfter: time.Second}, nil // its last pod is letting go
		}
		return reconcile.Result{}, err
	}
	loop, _ := reconcile.NewLoop(reconcile.Options[string]{World: jobs.List, Events: events,
		Reconciler: reconcile.ReconcilerFunc[string](endStranded)})
	_ = loop.Run(ctx)
}
