package kube

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/reconcile"
	"k8s.io/apimachinery/pkg/types"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ForControllerRuntime runs a [reconcile.Reconciler] inside a
// controller-runtime manager, the loop many operators already have:
// Result.RequeueAfter carries over, and an error marked with
// [reconcile.TerminalError] becomes controller-runtime's TerminalError so
// controller-runtime does not retry it either.
func ForControllerRuntime(r reconcile.Reconciler[types.NamespacedName]) crreconcile.Reconciler {
	return crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		res, err := r.Reconcile(ctx, req.NamespacedName)
		if errors.Is(err, reconcile.ErrTerminal) {
			return crreconcile.Result{}, crreconcile.TerminalError(err)
		}
		return crreconcile.Result{RequeueAfter: res.RequeueAfter}, err
	})
}

// FromControllerRuntime runs a controller-runtime Reconciler in a
// reconcile.Loop, for code written for controller-runtime that should get
// the Loop's recovery pass. A terminal error stays terminal; the
// deprecated Result.Requeue becomes a retry with backoff.
func FromControllerRuntime(r crreconcile.Reconciler) reconcile.Reconciler[types.NamespacedName] {
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
var errRequeue = errors.New("kube: reconciler asked to requeue")
