package ctrlruntime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Every object that carries an execution's id is a request named by it,
// and the reconciler behind ToExecutionReconciler gets the id: the keys
// kube.Jobs and the store use.
func TestExecutionKeysAreTheSameInBothLoops(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "teraslice", Name: "ex-42-controller", Labels: map[string]string{kube.ExecutionLabel: "ex-42"}}}
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "teraslice", Name: "execfsm-h-1f2e", Annotations: map[string]string{kube.IDAnnotation: "Ex 42/b"}}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "teraslice", Name: "settings"}}
	want := func(id string) []crreconcile.Request {
		return []crreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "teraslice", Name: id}}}
	}
	require.Equal(t, want("ex-42"), ctrlruntime.ExecutionOf(context.Background(), job))
	require.Equal(t, want("Ex 42/b"), ctrlruntime.ExecutionOf(context.Background(), record), "an id no name can hold")
	require.Empty(t, ctrlruntime.ExecutionOf(context.Background(), other))

	var got string
	r := ctrlruntime.ToExecutionReconciler(reconcile.ReconcilerFunc[string](func(_ context.Context, id string) (reconcile.Result, error) {
		got = id
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}))
	res, err := r.Reconcile(context.Background(), want("Ex 42/b")[0])
	require.NoError(t, err)
	require.Equal(t, "Ex 42/b", got)
	require.Equal(t, time.Second, res.RequeueAfter)
}
