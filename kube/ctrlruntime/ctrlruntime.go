// Package ctrlruntime runs execfsm in controller-runtime, apart from
// package kube so that a controller using kube's stores does not compile
// controller-runtime's client, cache and Prometheus metrics unless it
// asks for them here.
//
// [Drive] is an operator whose custom resources hold their executions'
// state (a kube.Store over kube.Options.Resource): a controller in a
// controller-runtime manager that writes each resource's first record,
// syncs it with a run.Driver whenever it or what it owns changes, and
// hands every execution over when the manager stops. examples/kubeoperator
// is one, run against a real API server and Job controller.
//
// [ToReconciler] runs a reconcile.Reconciler in a controller-runtime
// manager, the loop many operators already have (RequeueAfter and
// terminal errors carry over); [FromReconciler] runs a controller-runtime
// reconciler in a reconcile.Loop, to give it the Loop's adoption pass.
//
// Keys: kube.Jobs and the kube store key an execution by its id, and a
// manager's requests are NamespacedNames of whatever object changed. With
// [ExecutionOf] as a watch's map function every object that carries an
// execution's id (its controller's Job and pods, its record's ConfigMap)
// becomes a request named by that id, and [ToExecutionReconciler] runs a
// reconciler keyed by the id, as in a reconcile.Loop: one reconciler,
// one key, in both loops.
package ctrlruntime

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/reconcile"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ToReconciler runs a [reconcile.Reconciler] inside a controller-runtime
// manager:
// Result.RequeueAfter carries over, and an error marked with
// [reconcile.TerminalError] becomes controller-runtime's TerminalError so
// controller-runtime does not retry it either.
func ToReconciler(r reconcile.Reconciler[types.NamespacedName]) crreconcile.Reconciler {
	return crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		res, err := r.Reconcile(ctx, req.NamespacedName)
		if errors.Is(err, reconcile.ErrTerminal) {
			return crreconcile.Result{}, crreconcile.TerminalError(err)
		}
		return crreconcile.Result{RequeueAfter: res.RequeueAfter}, err
	})
}

// FromReconciler runs a controller-runtime Reconciler in a
// reconcile.Loop, for code written for controller-runtime that should get
// the Loop's adoption pass. A terminal error stays terminal; the
// deprecated Result.Requeue becomes a retry with backoff.
func FromReconciler(r crreconcile.Reconciler) reconcile.Reconciler[types.NamespacedName] {
	return reconcile.ReconcilerFunc[types.NamespacedName](func(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, crreconcile.Request{NamespacedName: key})
		if errors.Is(err, crreconcile.TerminalError(nil)) {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
		//lint:ignore SA1019 honour the deprecated field while reconcilers still set it
		if err == nil && res.RequeueAfter <= 0 && res.Requeue {
			return reconcile.Result{}, errRequeue
		}
		return reconcile.Result{RequeueAfter: res.RequeueAfter}, err
	})
}

// errRequeue asks the Loop for a retry with backoff, what a bare
// Result.Requeue meant in controller-runtime.
var errRequeue = errors.New("ctrlruntime: reconciler asked to requeue")

// ExecutionOf maps an object that carries an execution's id to one request
// named by it, in the object's namespace: a controller Job or pod by its
// kube.ExecutionLabel, a record's ConfigMap by its kube.IDAnnotation.
// Anything else maps to nothing. Give it to
// handler.EnqueueRequestsFromMapFunc when watching Jobs, pods or
// ConfigMaps, and reconcile with [ToExecutionReconciler].
func ExecutionOf(_ context.Context, obj client.Object) []crreconcile.Request {
	id := obj.GetLabels()[kube.ExecutionLabel]
	if id == "" {
		id = obj.GetAnnotations()[kube.IDAnnotation]
	}
	if id == "" {
		return nil
	}
	return []crreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: id}}}
}

// ToExecutionReconciler runs r, keyed by execution id as kube.Jobs and
// the kube store key executions, in a controller-runtime manager whose
// requests come from [ExecutionOf] (the request's name is the id), as
// [ToReconciler] runs one keyed by NamespacedName.
func ToExecutionReconciler(r reconcile.Reconciler[string]) crreconcile.Reconciler {
	return ToReconciler(reconcile.ReconcilerFunc[types.NamespacedName](func(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
		return r.Reconcile(ctx, key.Name)
	}))
}
