package ctrlruntime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestAdaptersCarryRequeuesAndTerminalErrorsBothWays(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "x"}
	errBroken := errors.New("broken spec")
	to := ctrlruntime.ToReconciler(reconcile.ReconcilerFunc[types.NamespacedName](func(_ context.Context, k types.NamespacedName) (reconcile.Result, error) {
		if k.Name == "terminal" {
			return reconcile.Result{}, reconcile.TerminalError(errBroken)
		}
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}))
	res, err := to.Reconcile(context.Background(), crreconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	require.Equal(t, time.Minute, res.RequeueAfter)
	_, err = to.Reconcile(context.Background(), crreconcile.Request{NamespacedName: types.NamespacedName{Name: "terminal"}})
	require.ErrorIs(t, err, crreconcile.TerminalError(nil), "controller-runtime sees a terminal error")
	require.ErrorIs(t, err, errBroken)

	from := ctrlruntime.FromReconciler(crreconcile.Func(func(_ context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		switch req.Name {
		case "terminal":
			return crreconcile.Result{}, crreconcile.TerminalError(errBroken)
		case "requeue":
			//lint:ignore SA1019 the deprecated field is what is tested
			return crreconcile.Result{Requeue: true}, nil
		}
		return crreconcile.Result{RequeueAfter: time.Second}, nil
	}))
	r, err := from.Reconcile(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, time.Second, r.RequeueAfter)
	_, err = from.Reconcile(context.Background(), types.NamespacedName{Name: "terminal"})
	require.ErrorIs(t, err, reconcile.ErrTerminal, "the Loop sees a terminal error")
	_, err = from.Reconcile(context.Background(), types.NamespacedName{Name: "requeue"})
	require.Error(t, err, "a bare Requeue becomes a retry with backoff")
	require.NotErrorIs(t, err, reconcile.ErrTerminal)
}
