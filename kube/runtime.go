package kube

import (
	"context"
	"errors"

	"github.com/execfsm/execfsm/recovery"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ForControllerRuntime runs a recovery.Reconciler inside a
// controller-runtime manager, the loop many operators already have:
// Result.RequeueAfter carries over, and an error marked with
// recovery.Terminal becomes reconcile.TerminalError so controller-runtime
// does not retry it either.
func ForControllerRuntime(r recovery.Reconciler[types.NamespacedName]) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req.NamespacedName)
		if errors.Is(err, recovery.ErrTerminal) {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
		return reconcile.Result{RequeueAfter: res.RequeueAfter}, err
	})
}

// FromControllerRuntime runs a controller-runtime Reconciler in a
// recovery.Loop, for code written for controller-runtime that should get
// the Loop's recovery pass. A terminal error stays terminal; the
// deprecated Result.Requeue becomes a retry with backoff.
func FromControllerRuntime(r reconcile.Reconciler) recovery.Reconciler[types.NamespacedName] {
	return recovery.ReconcilerFunc[types.NamespacedName](func(ctx context.Context, key types.NamespacedName) (recovery.Result, error) {
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		if errors.Is(err, reconcile.TerminalError(nil)) {
			return recovery.Result{}, recovery.Terminal(err)
		}
		//lint:ignore SA1019 honour the deprecated field while reconcilers still set it
		if err == nil && res.RequeueAfter <= 0 && res.Requeue {
			return recovery.Result{}, errRequeue
		}
		return recovery.Result{RequeueAfter: res.RequeueAfter}, err
	})
}

// errRequeue asks the Loop for a retry with backoff, what a bare
// Result.Requeue meant in controller-runtime.
var errRequeue = errors.New("kube: reconciler asked to requeue")
