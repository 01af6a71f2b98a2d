package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// strandWait bounds how long an execution whose Job failed or went away
// may wait for its end: seconds, where the Reaper's deadline would take
// fifteen minutes.
const strandWait = 30 * time.Second

// runMaster runs the cluster master's loop over its controllers' Jobs,
// as a user of this package writes it: driven by Jobs.Events alone (no
// resync), it ends an execution whose Job failed (with the Job's reason)
// or is gone, as soon as the Job says so.
func runMaster(t *testing.T, ns string, master *transition.Persisted[state.Status]) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	jobs := &kube.Jobs{Client: masterClient, Namespace: ns, Selector: map[string]string{kube.ExecutionLabel: "ex-42"}, KeyLabel: kube.ExecutionLabel}
	events, err := jobs.Events(ctx)
	require.NoError(t, err)
	d := decider(t, teraslice.Roles(), recovery.Policy{})
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Events: events,
		Resync: -1, // the Jobs' events, nothing else
		Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, id string) (reconcile.Result, error) {
			job, err := masterClient.BatchV1().Jobs(ns).Get(ctx, id+"-controller", metav1.GetOptions{})
			why, ended := kube.JobFailure(job)
			switch {
			case apierrors.IsNotFound(err):
				why, ended = "controller Job "+id+"-controller deleted", true
			case err != nil:
				return reconcile.Result{}, err
			}
			if !ended {
				return reconcile.Result{}, nil
			}
			_, err = d.Abandon(ctx, master, why)
			if errors.Is(err, storage.ErrHeld) {
				return reconcile.Result{RequeueAfter: time.Second}, nil // its last pod is letting go
			}
			return reconcile.Result{}, err
		}),
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the master's loop did not stop within 30 s")
		}
		for range events { // the informer has stopped
		}
	})
}

// awaitStatus waits until the execution is in want.
func awaitStatus(t *testing.T, master *transition.Persisted[state.Status], want state.Status) storage.Record {
	t.Helper()
	deadline := time.Now().Add(strandWait)
	for {
		cur, rec, err := master.Load(bg)
		require.NoError(t, err)
		if cur == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the execution is %s after %v, not %s (reason %q)", cur, strandWait, want, rec.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Job that fails while its execution is relocating: the relocated
// controller's replacement pod crashes before it starts, and the Job's
// crash limit (0) is spent. The master hears it from the Job's events
// and fails the execution with the Job's reason at once.
func TestAFailedJobEndsItsRelocatingExecutionAtOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := submit(t, ns, 0)
	k.budget = 1
	runMaster(t, ns, master)

	p, cmd, out := k.next()
	expect(t, out, "running")
	k.drain(p, cmd, out, true)
	requireStatus(t, master, state.Relocating)

	replacement := k.bindNext()
	k.exited(replacement.Name, 1, "Error", false) // crashed before the controller started
	job := waitJob(t, ns, k.job, batchv1.JobFailed)
	why, failed := kube.JobFailure(job)
	require.True(t, failed)

	rec := awaitStatus(t, master, state.Failed)
	require.Equal(t, why, rec.Reason)
	require.Equal(t, "relocating", rec.Previous, "failed from relocating, where it waited for a successor")
}

// A Job deleted while its execution is relocating (kubectl delete job):
// nothing will ever run it again, and the master fails it at once.
func TestADeletedJobEndsItsRelocatingExecutionAtOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := submit(t, ns, 1)
	k.budget = 1
	runMaster(t, ns, master)

	p, cmd, out := k.next()
	expect(t, out, "running")
	k.drain(p, cmd, out, false)
	requireStatus(t, master, state.Relocating)

	background := metav1.DeletePropagationBackground
	require.NoError(t, clientset.BatchV1().Jobs(ns).Delete(bg, k.job, metav1.DeleteOptions{PropagationPolicy: &background}))
	rec := awaitStatus(t, master, state.Failed)
	require.Equal(t, "controller Job ex-42-controller deleted", rec.Reason)
}

// `kubectl delete cm` under a running controller: its ownership ends (Lost
// closes, without a write) and its Lease goes with the record, deleted by
// the garbage collector.
func TestDeletingTheRecordEndsTheOwnershipAndTheLease(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	store := newStoreIn(t, ns)
	exec := startedExecution(t, store)
	lost := exec.Ownership().Lost()

	require.NoError(t, clientset.CoreV1().ConfigMaps(ns).Delete(bg, store.Name("ex-1"), metav1.DeleteOptions{}))
	deadline := time.Now().Add(strandWait)
	for {
		_, err := clientset.CoordinationV1().Leases(ns).Get(bg, store.Name("ex-1"), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		require.NoError(t, err)
		if time.Now().After(deadline) {
			t.Fatalf("the Lease outlived its record by %v\n%s", strandWait, kcmLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-lost:
	case <-time.After(strandWait):
		t.Fatal("the controller's ownership outlived its record and its Lease")
	}
}

// The same, noticed by the controller's next write: it fails with
// ErrNotFound, and its ownership has ended with it.
func TestAWriteToADeletedRecordEndsTheOwnership(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	store := newStoreIn(t, ns)
	exec := startedExecution(t, store)

	require.NoError(t, clientset.CoreV1().ConfigMaps(ns).Delete(bg, store.Name("ex-1"), metav1.DeleteOptions{}))
	_, err := exec.Fire(bg, state.Running, "workers connected")
	require.ErrorIs(t, err, storage.ErrNotFound)
	select {
	case <-exec.Ownership().Lost():
	default:
		t.Fatal("a write that found the record deleted left the ownership open")
	}
}

// startedExecution creates ex-1 in initializing and starts it as a
// controller with a 30-second lease (long: only the record's deletion
// ends it within the tests' bounds).
func startedExecution(t *testing.T, store *kube.Store) *transition.Persisted[state.Status] {
	t.Helper()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Initializing))
	require.NoError(t, err)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-1"})
	require.NoError(t, err)
	_, err = decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob, Failovers: teraslice.Failovers}).Start(bg, exec, storage.Lease{Holder: "pod-1", TTL: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Ownership().Release(bg) })
	return exec
}
