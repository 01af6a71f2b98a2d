package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// vcJobs are the custom resources of testdata/vcjob-crd.yaml, shaped
// like Volcano's Job with its phases.
var vcJobs = schema.GroupVersionResource{Group: "batch.execfsm.test", Version: "v1", Resource: "vcjobs"}

// kstatusOf is what kstatus must say of a resource whose state stands
// at progress.
var kstatusOf = map[kube.Progress]status.Status{
	kube.ProgressWorking: status.InProgressStatus,
	kube.ProgressParked:  status.InProgressStatus,
	kube.ProgressDone:    status.CurrentStatus,
	kube.ProgressFailed:  status.FailedStatus,
}

// For every state of the Teraslice and Volcano lifecycles, a record
// written in that state into the user's resource carries the conditions
// its role says, and kstatus's own computation on the resource as the
// API server holds it agrees: InProgress while work is under way or
// parked (as kstatus says of a suspended batch/v1 Job), Current once it
// ended well (Ready True only then), Failed in the failed state.
func TestKstatusAgreesWithTheWrittenConditionsInEveryState(t *testing.T) {
	t.Parallel()
	t.Run("teraslice", func(t *testing.T) {
		t.Parallel()
		installSimJobs(t)
		requireKstatusAgrees(t, simJobs, "SimJob", teraslice.Roles(), 3) // nothing parked
	})
	t.Run("volcano", func(t *testing.T) {
		t.Parallel()
		installVCJobs(t)
		requireKstatusAgrees(t, vcJobs, "VCJob", volcano.Roles(), 4)
	})
}

// requireKstatusAgrees writes every state of roles into a resource of
// gvr and compares what kstatus says with what its progress says; the
// lifecycle must have states of progresses kinds of progress.
func requireKstatusAgrees[S comparable](t *testing.T, gvr schema.GroupVersionResource, kind string, roles *recovery.Roles[S], progresses int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := namespace(t)
	grant(t, resourceRole(gvr, ns), storeUser)
	dyn, err := dynamic.NewForConfig(storeCfg)
	require.NoError(t, err)
	progress := kube.ProgressOf(roles)
	store, err := kube.New(storeClient, kube.Options{Namespace: ns, Resource: &kube.Resource{Client: dyn, GroupVersionResource: gvr,
		Kind: kind, StatusPath: "status.state.phase", Progress: progress, New: templateOf(gvr, kind)}})
	require.NoError(t, err)
	admin, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	table := roles.Table()
	seen := map[kube.Progress]bool{}
	for k, s := range table.States() {
		name, _ := table.Name(s)
		p, ok := progress(name)
		require.True(t, ok, name)
		seen[p] = true
		rec := storagetest.Sample(fmt.Sprintf("job-%d", k))
		rec.Status = name
		_, err := store.Create(ctx, rec)
		require.NoError(t, err, name)
		u, err := admin.Resource(gvr).Namespace(ns).Get(ctx, rec.ID, metav1.GetOptions{})
		require.NoError(t, err)
		got, err := status.Compute(u)
		require.NoError(t, err)
		require.Equal(t, kstatusOf[p], got.Status, "%s (%s): %s; conditions %v", name, p, got.Message, u.Object["status"])
		conds := writtenConditions(t, u)
		require.Equal(t, p == kube.ProgressDone, meta.IsStatusConditionTrue(conds, kube.ConditionReady), "%s: Ready", name)
		require.Equal(t, p == kube.ProgressWorking, meta.FindStatusCondition(conds, kube.ConditionReconciling) != nil, "%s: Reconciling", name)
		require.Equal(t, p == kube.ProgressFailed, meta.FindStatusCondition(conds, kube.ConditionStalled) != nil, "%s: Stalled", name)
		for _, c := range conds {
			require.Equal(t, u.GetGeneration(), c.ObservedGeneration, "%s: %s observes the generation", name, c.Type)
		}
	}
	require.Len(t, seen, progresses, "the lifecycle's kinds of progress: %v", seen)
}

// writtenConditions are u's status.conditions.
func writtenConditions(t *testing.T, u *unstructured.Unstructured) []metav1.Condition {
	t.Helper()
	raw, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	require.NoError(t, err)
	var out []metav1.Condition
	for _, item := range raw {
		var c metav1.Condition
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(item.(map[string]any), &c))
		out = append(out, c)
	}
	return out
}
