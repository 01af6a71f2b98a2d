package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// simJobs are the custom resources of testdata/simjob-crd.yaml: shaped
// like Volcano's Job, their phase at .status.state.phase.
var simJobs = schema.GroupVersionResource{Group: "batch.execfsm.test", Version: "v1", Resource: "simjobs"}

// crds are the CRDs the tests install, each once for the package.
var crds sync.Map // file → func() error (sync.OnceValue)

// installSimJobs installs the SimJob CRD and waits until the API server
// serves it.
func installSimJobs(t testing.TB) { t.Helper(); install(t, "testdata/simjob-crd.yaml", simJobs) }

// installVCJobs installs the VCJob CRD likewise.
func installVCJobs(t testing.TB) { t.Helper(); install(t, "testdata/vcjob-crd.yaml", vcJobs) }

// install installs the CRD in file, serving gvr, once for the package.
func install(t testing.TB, file string, gvr schema.GroupVersionResource) {
	t.Helper()
	once, _ := crds.LoadOrStore(file, sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return installCRD(ctx, file, gvr)
	}))
	require.NoError(t, once.(func() error)(), file)
}

// installCRD creates the CRD in file, as the administrator, and waits
// until its resources can be listed.
func installCRD(ctx context.Context, file string, gvr schema.GroupVersionResource) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	admin, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := admin.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w", file, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := admin.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: %v not served: %w", file, gvr, errors.Join(err, ctx.Err()))
		}
	}
}

// resourceRole lets the store's user read and write the resources of
// gvr and their status in ns.
func resourceRole(gvr schema.GroupVersionResource, ns string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: gvr.Resource, Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"get", "patch"}},
		},
	}
}

// templateOf makes the resource of gvr a Create makes for a record that
// has none: the user's spec, which the store never writes again.
func templateOf(gvr schema.GroupVersionResource, kind string) func(string) (*unstructured.Unstructured, error) {
	return func(id string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "render:1", "maxRetry": int64(3)}}}
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(kind)
		u.SetName(id)
		return u, nil
	}
}

// simJobOptions are the store options of SimJobs in ns.
func simJobOptions(t testing.TB, ns string) kube.Options {
	t.Helper()
	dyn, err := dynamic.NewForConfig(storeCfg)
	require.NoError(t, err)
	return kube.Options{Namespace: ns, Resource: &kube.Resource{Client: dyn, GroupVersionResource: simJobs, Kind: "SimJob",
		StatusPath: "status.state.phase", New: templateOf(simJobs, "SimJob"), Progress: kube.ProgressOf(teraslice.Roles())}}
}

// newResourceStore is a store over SimJobs in a fresh namespace, as the
// store's user with the package's Roles and simJobsRole.
func newResourceStore(t testing.TB) *kube.Store {
	t.Helper()
	installSimJobs(t)
	ns := namespace(t)
	grant(t, resourceRole(simJobs, ns), storeUser)
	s, err := kube.New(storeClient, simJobOptions(t, ns))
	require.NoError(t, err)
	return s
}

// resourceStoreAs is a store over the resources of gvr in ns for the
// user of client and dyn, with progress when given.
func resourceStoreAs(t testing.TB, ns string, gvr schema.GroupVersionResource, kind string, progress func(string) (kube.Progress, bool)) *kube.Store {
	t.Helper()
	dyn, err := dynamic.NewForConfig(storeCfg)
	require.NoError(t, err)
	s, err := kube.New(storeClient, kube.Options{Namespace: ns, Resource: &kube.Resource{Client: dyn, GroupVersionResource: gvr,
		Kind: kind, StatusPath: "status.state.phase", New: templateOf(gvr, kind), Progress: progress}})
	require.NoError(t, err)
	return s
}

// adminResources is the administrator's client of gvr in ns: what the
// user, kubectl and the user's own controller play.
func adminResources(t testing.TB, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	t.Helper()
	admin, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return admin.Resource(gvr).Namespace(ns)
}

// The user's resource is the user's: the store writes its record into
// the status, and nothing else of it. The spec, labels, annotations, a
// status field the user's own controller writes beside the phase and a
// condition of the user's own type are all as they were after a
// creation, moves, a take-over and a release; only metadata.generation
// (the spec's) never moves.
func TestTheResourceStoreTouchesNothingOfTheUsersButTheRecord(t *testing.T) {
	t.Parallel()
	installSimJobs(t)
	ns := namespace(t)
	grant(t, resourceRole(simJobs, ns), storeUser)
	jobs := adminResources(t, simJobs, ns)
	job, err := templateOf(simJobs, "SimJob")("render-1")
	require.NoError(t, err)
	job.SetLabels(map[string]string{"team": "render"})
	job.SetAnnotations(map[string]string{"note": "the user's"})
	created, err := jobs.Create(bg, job, metav1.CreateOptions{})
	require.NoError(t, err)
	// The user's controller writes its own status: a message beside the
	// phase, and a condition of its own.
	require.NoError(t, unstructured.SetNestedField(created.Object, "waiting for nodes", "status", "state", "message"))
	require.NoError(t, unstructured.SetNestedSlice(created.Object, []any{map[string]any{"type": "PodsScheduled", "status": "False",
		"reason": "Unschedulable", "message": "0/3 nodes", "lastTransitionTime": "2026-12-07T12:00:00Z"}}, "status", "conditions"))
	foreign, err := jobs.UpdateStatus(bg, created, metav1.UpdateOptions{})
	require.NoError(t, err)

	store := resourceStoreAs(t, ns, simJobs, "SimJob", kube.ProgressOf(teraslice.Roles()))
	_, err = store.Get(bg, "render-1")
	require.ErrorIs(t, err, storage.ErrNotFound, "a resource whose status holds no record is not a record yet")
	recs, _, err := store.List(bg)
	require.NoError(t, err)
	require.Empty(t, recs)

	p, err := transition.NewPersisted(teraslice.Lifecycle(), store, "render-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	_, err = p.Walk(bg, state.Running, "placed")
	require.NoError(t, err)
	own, _, err := store.Acquire(bg, "render-1", storagetest.Lease("pod-a"))
	require.NoError(t, err)
	require.NoError(t, own.Release(bg))

	after, err := jobs.Get(bg, "render-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.Object["spec"], after.Object["spec"])
	require.Equal(t, foreign.GetLabels(), after.GetLabels())
	require.Equal(t, foreign.GetAnnotations(), after.GetAnnotations())
	require.Equal(t, foreign.GetGeneration(), after.GetGeneration())
	message, _, _ := unstructured.NestedString(after.Object, "status", "state", "message")
	require.Equal(t, "waiting for nodes", message)
	phase, _, _ := unstructured.NestedString(after.Object, "status", "state", "phase")
	require.Equal(t, "running", phase)
	conds := writtenConditions(t, after)
	require.NotNil(t, meta.FindStatusCondition(conds, "PodsScheduled"), "the user's condition is kept: %v", conds)
	require.True(t, meta.IsStatusConditionTrue(conds, kube.ConditionReconciling))
	rec, err := store.Get(bg, "render-1")
	require.NoError(t, err)
	require.Equal(t, "pod-a", rec.Owner)
	require.EqualValues(t, 1, rec.Epoch)
}

// `kubectl get simjobs` shows the phase, the owner and the epoch in the
// CRD's printer columns: the API server's own Table of the resources,
// the one kubectl prints, read as kubectl reads it.
func TestKubectlGetShowsThePhaseTheOwnerAndTheEpoch(t *testing.T) {
	t.Parallel()
	store := newResourceStore(t)
	_, err := store.Create(bg, storagetest.Unowned("render-2"))
	require.NoError(t, err)
	own, rec, err := store.Acquire(bg, "render-2", storagetest.Lease("pod-b"))
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Release(bg)) }()

	raw, err := clientset.CoreV1().RESTClient().Get().AbsPath("/apis", simJobs.Group, simJobs.Version, "namespaces", store.Namespace(), "simjobs").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(bg)
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(raw, &table))
	columns := map[string]int{}
	for k, c := range table.ColumnDefinitions {
		columns[c.Name] = k
	}
	require.Len(t, table.Rows, 1)
	cells := table.Rows[0].Cells
	require.Equal(t, "render-2", cells[columns["Name"]])
	require.Equal(t, rec.Status, cells[columns["Phase"]])
	require.Equal(t, "pod-b", cells[columns["Owner"]])
	require.EqualValues(t, rec.Epoch, cells[columns["Epoch"]])
}

// A Create for a resource that does not exist makes it from
// Resource.New; without New it fails, matching storage.ErrNotFound, and
// makes nothing. A record whose id no resource can be named by gets a
// resource of a name made from the id, and keeps its id.
func TestTheResourceStoreCreatesTheResourceOnlyFromItsTemplate(t *testing.T) {
	t.Parallel()
	installSimJobs(t)
	ns := namespace(t)
	grant(t, resourceRole(simJobs, ns), storeUser)
	dyn, err := dynamic.NewForConfig(storeCfg)
	require.NoError(t, err)
	bare, err := kube.New(storeClient, kube.Options{Namespace: ns, Resource: &kube.Resource{Client: dyn, GroupVersionResource: simJobs,
		Kind: "SimJob", StatusPath: "status.state.phase"}})
	require.NoError(t, err)
	_, err = bare.Create(bg, storagetest.Sample("render-3"))
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = adminResources(t, simJobs, ns).Get(bg, "render-3", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing was made: %v", err)

	store := resourceStoreAs(t, ns, simJobs, "SimJob", nil)
	odd, err := store.Create(bg, storagetest.Sample("Render_4"))
	require.NoError(t, err)
	got, err := store.Get(bg, "Render_4")
	require.NoError(t, err)
	require.Equal(t, odd.Revision, got.Revision)
	all, err := adminResources(t, simJobs, ns).List(bg, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, all.Items, 1)
	require.Regexp(t, `^execfsm-h-[0-9a-f]{24}$`, all.Items[0].GetName())
	created, err := store.Create(bg, storagetest.Sample("render-3"))
	require.NoError(t, err)
	job, err := adminResources(t, simJobs, ns).Get(bg, "render-3", metav1.GetOptions{})
	require.NoError(t, err)
	image, _, _ := unstructured.NestedString(job.Object, "spec", "image")
	require.Equal(t, "render:1", image, "made from the template")
	require.Equal(t, job.GetResourceVersion(), strconv.FormatUint(created.Revision, 10))
	_, err = store.Create(bg, storagetest.Sample("render-3"))
	require.ErrorIs(t, err, storage.ErrExists)
}

// The user edits the spec between the controller's read and its write:
// the write conflicts (the revision is the resource's), and a move made
// through Persisted is made again on the record read afresh.
func TestASpecEditedUnderAWriteMakesItConflictAndTheMoveIsMadeAgain(t *testing.T) {
	t.Parallel()
	store := newResourceStore(t)
	p, err := transition.NewPersisted(teraslice.Lifecycle(), store, "render-5", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	rec, err := store.Get(bg, "render-5")
	require.NoError(t, err)
	jobs := adminResources(t, simJobs, store.Namespace())
	job, err := jobs.Get(bg, "render-5", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(job.Object, int64(5), "spec", "maxRetry"))
	_, err = jobs.Update(bg, job, metav1.UpdateOptions{})
	require.NoError(t, err)

	next := rec
	next.Status = "scheduling"
	_, err = store.CompareAndSwap(bg, "render-5", rec.Revision, next)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "pending", conflict.Current.Status, "the record did not move; the resource did")
	_, err = p.Walk(bg, state.Scheduling, "placed")
	require.NoError(t, err)
	after, err := jobs.Get(bg, "render-5", metav1.GetOptions{})
	require.NoError(t, err)
	retries, _, _ := unstructured.NestedInt64(after.Object, "spec", "maxRetry")
	require.EqualValues(t, 5, retries, "the user's edit stands")
}

// Pages of live statuses over resources whose CRD declares no
// selectable field (Volcano's own declares none): the store lists them
// all and keeps the statuses asked, every record once, over pages.
func TestPagesOfStatusesWithoutASelectableFieldAreFilteredByTheStore(t *testing.T) {
	t.Parallel()
	installVCJobs(t)
	ns := namespace(t)
	grant(t, resourceRole(vcJobs, ns), storeUser)
	store := resourceStoreAs(t, ns, vcJobs, "VCJob", nil)
	want := map[string]bool{}
	for k := range 12 {
		rec := storagetest.Sample(fmt.Sprintf("job-%02d", k))
		rec.Status = []string{"Running", "Completed", "Pending"}[k%3]
		_, err := store.Create(bg, rec)
		require.NoError(t, err)
		if rec.Status != "Completed" {
			want[rec.ID] = true
		}
	}
	got, bad, err := storage.ListAll(bg, store, 5, "Running", "Pending")
	require.NoError(t, err)
	require.Empty(t, bad)
	ids := map[string]bool{}
	for _, rec := range got {
		require.False(t, ids[rec.ID], "%s listed twice", rec.ID)
		ids[rec.ID] = true
	}
	require.Equal(t, want, ids)
}

// A page of statuses over SimJobs goes on after its continue tokens
// expired (etcd compacts their revision every second in these tests):
// each status is read again from its first page, skipping to after the
// last resource the pages took, so nothing is listed twice or missed.
func TestPagesOfStatusesGoOnAfterTheirTokensExpired(t *testing.T) {
	t.Parallel()
	store := newResourceStore(t)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	want := map[string]bool{}
	for k := range 9 {
		rec := storagetest.Sample(fmt.Sprintf("job-%02d", k))
		rec.Status = []string{"running", "completed", "paused"}[k%3]
		_, err := store.Create(ctx, rec)
		require.NoError(t, err)
		if rec.Status != "completed" {
			want[rec.ID] = true
		}
	}
	// Two pages of two: the second leaves the running status on its
	// second list page, so the cursor holds that page's continue token.
	got := map[string]bool{}
	q := storage.Query{Statuses: []string{"running", "paused"}, Limit: 2}
	for range 2 {
		page, err := store.ListPage(ctx, q)
		require.NoError(t, err)
		require.Len(t, page.Records, 2)
		for _, rec := range page.Records {
			got[rec.ID] = true
		}
		q.Cursor = page.Next
	}
	// A token of a later moment, read raw: once the API server refuses
	// it, it refuses the cursor's own.
	list, err := adminResources(t, simJobs, store.Namespace()).List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, list.GetContinue())
	require.Eventually(t, func() bool {
		// Writes move the revision on, so that compaction passes the
		// token's.
		later := storagetest.Sample(fmt.Sprintf("later-%d", time.Now().UnixNano()))
		later.Status = "completed"
		_, err := store.Create(ctx, later)
		require.NoError(t, err)
		_, err = adminResources(t, simJobs, store.Namespace()).List(ctx, metav1.ListOptions{Limit: 1, Continue: list.GetContinue()})
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}, 30*time.Second, 200*time.Millisecond, "the continue tokens to expire with etcd's compaction")

	for q.Cursor != "" {
		page, err := store.ListPage(ctx, q)
		require.NoError(t, err, "the pages go on")
		for _, rec := range page.Records {
			require.False(t, got[rec.ID], "%s listed twice", rec.ID)
			got[rec.ID] = true
		}
		q.Cursor = page.Next
	}
	require.Equal(t, want, got, "every record of the statuses, once (the later ones are in no status asked)")
}

// The same over SimJobs, whose CRD declares the phase selectable: the
// API server selects each status in turn, pages cross from one status
// to the next, and a cursor the store did not give is refused.
func TestPagesOfStatusesWithASelectableFieldAreSelectedByTheAPIServer(t *testing.T) {
	t.Parallel()
	store := newResourceStore(t)
	want := map[string]bool{}
	for k := range 12 {
		rec := storagetest.Sample(fmt.Sprintf("job-%02d", k))
		rec.Status = []string{"running", "completed", "paused"}[k%3]
		_, err := store.Create(bg, rec)
		require.NoError(t, err)
		if rec.Status != "completed" {
			want[rec.ID] = true
		}
	}
	for _, limit := range []int{1, 3, 4, 8, 100} {
		got, bad, err := storage.ListAll(bg, store, limit, "paused", "running", "paused")
		require.NoError(t, err)
		require.Empty(t, bad)
		ids := map[string]bool{}
		for _, rec := range got {
			require.False(t, ids[rec.ID], "limit %d: %s listed twice", limit, rec.ID)
			ids[rec.ID] = true
		}
		require.Equal(t, want, ids, "limit %d", limit)
	}
	_, err := store.ListPage(bg, storage.Query{Statuses: []string{"running"}, Limit: 3, Cursor: "7/x"})
	require.ErrorIs(t, err, storage.ErrInvalidQuery)
}

// Every move is an Event on the user's resource, found as kubectl
// describe finds them.
func TestMovesAreEventsOnTheUsersResource(t *testing.T) {
	t.Parallel()
	store := newResourceStore(t)
	posted, postErr := eventsOf(t, store, "teraslice-master")
	p, err := transition.NewPersisted(teraslice.Lifecycle(), store, "render-6", transition.PersistedOptions{Actor: "master"}, posted.Observers())
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	_, err = p.Walk(bg, state.Running, "placed")
	require.NoError(t, err)
	posted.Close()
	require.NoError(t, postErr())
	job, err := adminResources(t, simJobs, store.Namespace()).Get(bg, "render-6", metav1.GetOptions{})
	require.NoError(t, err)
	list, err := clientset.CoreV1().Events(store.Namespace()).List(bg, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "SimJob", "involvedObject.name": "render-6", "involvedObject.uid": string(job.GetUID()),
	}.String()})
	require.NoError(t, err)
	var reasons []string
	for _, ev := range list.Items {
		reasons = append(reasons, ev.Reason)
		require.Equal(t, simJobs.GroupVersion().String(), ev.InvolvedObject.APIVersion)
	}
	require.ElementsMatch(t, []string{"Pending", "Scheduling", "Initializing", "Running"}, reasons)
}

func TestNewRefusesBadResourceOptions(t *testing.T) {
	dyn, err := dynamic.NewForConfig(storeCfg)
	require.NoError(t, err)
	good := kube.Resource{Client: dyn, GroupVersionResource: simJobs, Kind: "SimJob", StatusPath: "status.state.phase"}
	for name, mutate := range map[string]func(*kube.Resource){
		"no client":          func(r *kube.Resource) { r.Client = nil },
		"no resource":        func(r *kube.Resource) { r.GroupVersionResource.Resource = "" },
		"no kind":            func(r *kube.Resource) { r.Kind = "" },
		"state not a status": func(r *kube.Resource) { r.StatusPath = "spec.phase" },
		"state the status":   func(r *kube.Resource) { r.StatusPath = "status" },
		"empty part":         func(r *kube.Resource) { r.StatusPath = "status..phase" },
		"record holds state": func(r *kube.Resource) { r.RecordPath = "status.state" },
		"record conditions":  func(r *kube.Resource) { r.RecordPath = "status.conditions" },
		"bad selector":       func(r *kube.Resource) { r.Selector = "a in (" },
	} {
		r := good
		mutate(&r)
		_, err := kube.New(storeClient, kube.Options{Namespace: "default", Resource: &r})
		require.Error(t, err, name)
	}
	_, err = kube.New(storeClient, kube.Options{Namespace: "default", Resource: &good})
	require.NoError(t, err)
}
