package ctrlruntime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var simJobs = schema.GroupVersionResource{Group: "batch.execfsm.test", Version: "v1", Resource: "simjobs"}

var namespaces atomic.Int64

// simJobNamespace installs the SimJob CRD (once: installing it again
// changes nothing) and makes a fresh namespace.
func simJobNamespace(t *testing.T) string {
	t.Helper()
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{"../testdata/simjob-crd.yaml"}, ErrorIfPathMissing: true})
	require.NoError(t, err)
	ns := fmt.Sprintf("drive-%d", namespaces.Add(1))
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns
}

// simJobStore is the store over the SimJobs of ns, with Volcano's phases.
func simJobStore(t *testing.T, ns string) *kube.Store {
	t.Helper()
	store, err := kube.New(kubernetes.NewForConfigOrDie(cfg), kube.Options{Namespace: ns, Resource: &kube.Resource{
		Client: dynamic.NewForConfigOrDie(cfg), GroupVersionResource: simJobs, Kind: "SimJob", StatusPath: "status.state.phase",
		Progress: kube.ProgressOf(volcano.Roles())}})
	require.NoError(t, err)
	return store
}

// operator is a controller-runtime manager driving the SimJobs of a
// namespace: for each Job it makes a ConfigMap it controls (the pods a
// real one makes), runs the Job once the ConfigMap says "ready", and
// completes it once it says "done".
type operator struct {
	cancel context.CancelFunc
	done   chan error
}

func startOperator(t *testing.T, ns, holder string) *operator {
	t.Helper()
	mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	c := mgr.GetClient()
	store := simJobStore(t, ns)
	err = ctrlruntime.Drive(mgr, run.ManagerConfig[volcano.Phase]{
		Roles: volcano.Roles(), Store: store, Table: "simjob", Holder: holder, HandOver: true, TTL: time.Minute,
		Sync: func(ctx context.Context, job *transition.Persisted[volcano.Phase], phase volcano.Phase) (run.Step, error) {
			pods, err := podsOf(ctx, c, store, ns, job.ID())
			if err != nil {
				return run.Step{}, err
			}
			next := map[volcano.Phase]struct{ when, to string }{
				volcano.Pending: {"ready", string(volcano.Running)}, volcano.Running: {"done", string(volcano.Completing)},
				volcano.Completing: {"done", string(volcano.Completed)}}[phase]
			if next.when == "" || pods.Data[next.when] != "true" {
				return run.Step{}, nil
			}
			_, err = job.Fire(ctx, volcano.Phase(next.to), "the pods say "+next.when)
			return run.Step{}, err
		},
	}, ctrlruntime.Options[volcano.Phase]{
		Owns: []client.Object{&corev1.ConfigMap{}},
		First: func(u *unstructured.Unstructured) (transition.Update[volcano.Phase], error) {
			maxRetry, _, err := unstructured.NestedInt64(u.Object, "spec", "maxRetry")
			if err != nil {
				return transition.Update[volcano.Phase]{}, err
			}
			first := transition.To(volcano.Pending).Because("submitted")
			first.Meta = volcano.MaxRetry(int(maxRetry))
			return first, nil
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { op.stop(t) })
	return op
}

// stop is the operator's SIGTERM: its manager stops and hands over.
func (o *operator) stop(t *testing.T) error {
	t.Helper()
	if o.cancel == nil {
		return nil
	}
	o.cancel()
	o.cancel = nil
	select {
	case err := <-o.done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the operator's manager did not stop within a minute")
		return nil
	}
}

// podsOf is the ConfigMap standing for job's pods, made on its first
// sync with the SimJob as its controller.
func podsOf(ctx context.Context, c client.Client, store *kube.Store, ns, id string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, cm)
	if !apierrors.IsNotFound(err) {
		return cm, err
	}
	kind, _ := store.ResourceKind()
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(kind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, owner); err != nil {
		return nil, err
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}}
	if err := controllerutil.SetControllerReference(owner, cm, c.Scheme()); err != nil {
		return nil, err
	}
	return cm, c.Create(ctx, cm)
}

// submit creates a SimJob as its user does: a spec, no status.
func submit(t *testing.T, ns, name string, maxRetry int) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "train:1", "maxRetry": int64(maxRetry)}}}
	u.SetAPIVersion(simJobs.GroupVersion().String())
	u.SetKind("SimJob")
	u.SetName(name)
	_, err := dynamic.NewForConfigOrDie(cfg).Resource(simJobs).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
}

// say sets key in the ConfigMap standing for job's pods, as the pods'
// progress would, once the operator has made it.
func say(t *testing.T, ns, job, key string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"data":{%q:"true"}}`, key)
	var err error
	require.Eventually(t, func() bool {
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Patch(context.Background(), job, "application/merge-patch+json", patch, metav1.PatchOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the pods of %s", job)
}

// requirePhase waits for job's phase in its resource's status (what
// `kubectl get` shows) to be want.
func requirePhase(t *testing.T, ns, job string, want volcano.Phase) {
	t.Helper()
	client := dynamic.NewForConfigOrDie(cfg).Resource(simJobs).Namespace(ns)
	var got string
	require.Eventually(t, func() bool {
		u, err := client.Get(context.Background(), job, metav1.GetOptions{})
		if err != nil {
			return false
		}
		got, _, _ = unstructured.NestedString(u.Object, "status", "state", "phase")
		return got == string(want)
	}, 30*time.Second, 20*time.Millisecond, "%s: phase %q, want %q", job, got, want)
}

// requireHolder waits for job's execution to be held by holder ("": by
// no one).
func requireHolder(t *testing.T, store storage.Store, job, holder string) {
	t.Helper()
	var got string
	require.Eventually(t, func() bool {
		claim, held, err := store.Held(context.Background(), job)
		if err != nil {
			return false
		}
		got = ""
		if held {
			got = claim.Owner
		}
		return got == holder
	}, 30*time.Second, 20*time.Millisecond, "%s: held by %q, want %q", job, got, holder)
}

// An operator built on controller-runtime drives the SimJobs its users
// create: the first record written from the spec, a change of what it
// owns syncs the Job, the phase in the resource's own status; its stop
// hands every Job over as it is, and the next operator takes them over
// at once; a Job deleted is let go.
func TestDriveRunsAnOperatorOverTheUsersResources(t *testing.T) {
	ns := simJobNamespace(t)
	store := simJobStore(t, ns)
	a := startOperator(t, ns, "operator-a")
	submit(t, ns, "train", 5)
	submit(t, ns, "tune", 0)
	requirePhase(t, ns, "train", volcano.Pending)
	rec, err := store.Get(context.Background(), "train")
	require.NoError(t, err)
	require.Equal(t, "4", rec.Meta[recovery.LimitKey(volcano.Retries)], "the first record made from the spec: maxRetry 5")
	requireHolder(t, store, "train", "operator-a")

	say(t, ns, "train", "ready")
	requirePhase(t, ns, "train", volcano.Running) // the owned ConfigMap's change synced it
	before, err := store.Get(context.Background(), "train")
	require.NoError(t, err)

	require.NoError(t, a.stop(t), "the hand-over")
	requireHolder(t, store, "train", "")
	requireHolder(t, store, "tune", "")
	after, err := store.Get(context.Background(), "train")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "handed over as it is: nothing written")

	b := startOperator(t, ns, "operator-b")
	requireHolder(t, store, "train", "operator-b") // at once: nothing to wait out
	requireHolder(t, store, "tune", "operator-b")
	say(t, ns, "train", "done")
	requirePhase(t, ns, "train", volcano.Completed)
	requireHolder(t, store, "train", "")

	require.NoError(t, dynamic.NewForConfigOrDie(cfg).Resource(simJobs).Namespace(ns).Delete(context.Background(), "tune", metav1.DeleteOptions{}))
	requireHolder(t, store, "tune", "") // let go
	require.NoError(t, b.stop(t))
}

// Drive needs a store over a custom resource, and a config it can run.
func TestDriveRefusesWhatItCannotRun(t *testing.T) {
	mgr, err := manager.New(cfg, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	sync := func(context.Context, *transition.Persisted[volcano.Phase], volcano.Phase) (run.Step, error) {
		return run.Step{}, nil
	}
	configMaps, err := kube.New(kubernetes.NewForConfigOrDie(cfg), kube.Options{Namespace: "default"})
	require.NoError(t, err)
	for name, c := range map[string]run.ManagerConfig[volcano.Phase]{
		"a store of ConfigMaps": {Roles: volcano.Roles(), Store: configMaps, Sync: sync},
		"another store":         {Roles: volcano.Roles(), Store: storage.NewMemory(), Sync: sync},
		"a loop's field":        {Roles: volcano.Roles(), Store: simJobStore(t, "default"), Sync: sync, Workers: 4},
		"no Sync":               {Roles: volcano.Roles(), Store: simJobStore(t, "default")},
	} {
		err := ctrlruntime.Drive(mgr, c, ctrlruntime.Options[volcano.Phase]{})
		require.ErrorIs(t, err, run.ErrInvalidConfig, name)
	}
}
