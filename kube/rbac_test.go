package kube_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

var updateManifest = flag.Bool("update-rbac", false, "write rbac/roles.yaml from the package's Roles")

// rbac/roles.yaml is the package's Roles, for kubectl apply -n NS -f.
func TestTheManifestIsThePackagesRoles(t *testing.T) {
	var manifest []byte
	manifest = append(manifest, "# The least each part of execfsm on Kubernetes needs, in the namespace\n"+
		"# of its store: kubectl apply -n NAMESPACE -f roles.yaml, then bind each\n"+
		"# Role to its service account. Generated from kube.MasterRole,\n"+
		"# kube.ControllerRole and kube.ReaderRole (go test -run Manifest -update-rbac).\n"...)
	for _, r := range []*rbacv1.Role{kube.MasterRole(""), kube.ControllerRole(""), kube.ReaderRole("")} {
		out, err := yaml.Marshal(r)
		require.NoError(t, err)
		manifest = append(append(manifest, "---\n"...), out...)
	}
	const path = "rbac/roles.yaml"
	if *updateManifest {
		require.NoError(t, os.MkdirAll("rbac", 0o755))
		require.NoError(t, os.WriteFile(path, manifest, 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(manifest), string(committed), "rbac/roles.yaml differs from the Roles: go test -run Manifest -update-rbac")
}

// Every verb of MasterRole and ControllerRole is needed: with the whole
// Role its part does all its work; with any one verb taken away it fails,
// and the API server says it was forbidden.
//
// The same holds of the Roles of a store over a custom resource
// (ResourceMasterRole and the others), over SimJobs.
func TestEachRoleHasNothingItsPartDoesNotNeed(t *testing.T) {
	t.Parallel()
	for _, kind := range []storeKind{configMapStores, simJobStores} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			requireRolesLeast(t, kind)
		})
	}
}

// storeKind is where a store keeps its records, and the Roles of each
// part for it, for the RBAC tests.
type storeKind struct {
	name                     string
	master, controller, read func(ns string) *rbacv1.Role
	// open opens the store in ns as the user of cfg.
	open func(t *testing.T, cfg *rest.Config, ns string) (*kube.Store, error)
}

var configMapStores = storeKind{name: "configmaps", master: kube.MasterRole, controller: kube.ControllerRole, read: kube.ReaderRole,
	open: func(t *testing.T, cfg *rest.Config, ns string) (*kube.Store, error) {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return kube.New(client, kube.Options{Namespace: ns})
	}}

var simJobStores = storeKind{name: "simjobs",
	master:     func(ns string) *rbacv1.Role { return kube.ResourceMasterRole(ns, simJobs) },
	controller: func(ns string) *rbacv1.Role { return kube.ResourceControllerRole(ns, simJobs) },
	read:       func(ns string) *rbacv1.Role { return kube.ResourceReaderRole(ns, simJobs) },
	open: func(t *testing.T, cfg *rest.Config, ns string) (*kube.Store, error) {
		installSimJobs(t)
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return kube.New(client, kube.Options{Namespace: ns, Resource: &kube.Resource{Client: dyn, GroupVersionResource: simJobs,
			Kind: "SimJob", StatusPath: "status.state.phase", New: templateOf(simJobs, "SimJob"), Progress: kube.ProgressOf(teraslice.Roles())}})
	}}

// adminStore is kind's store in ns as the administrator: what a test
// plays with.
func (kind storeKind) adminStore(t *testing.T, ns string) *kube.Store {
	t.Helper()
	s, err := kind.open(t, cfg, ns)
	require.NoError(t, err)
	return s
}

func requireRolesLeast(t *testing.T, kind storeKind) {
	parts := []struct {
		role   func(string) *rbacv1.Role
		duties func(t *testing.T, kind storeKind, cfg *rest.Config, ns string) error
	}{
		{kind.master, masterDuties},
		{kind.controller, controllerDuties},
		{kind.read, readerDuties},
	}
	for _, part := range parts {
		full := part.role("")
		t.Run(full.Name, func(t *testing.T) {
			t.Parallel()
			t.Run("whole", func(t *testing.T) {
				t.Parallel()
				cfg, ns := boundTo(t, full)
				require.NoError(t, part.duties(t, kind, cfg, ns))
			})
			for k, rule := range full.Rules {
				for _, verb := range rule.Verbs {
					t.Run(fmt.Sprintf("without %s %s", verb, rule.Resources[0]), func(t *testing.T) {
						t.Parallel()
						less := full.DeepCopy()
						less.Rules[k].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
						if len(less.Rules[k].Verbs) == 0 {
							less.Rules = slices.Delete(less.Rules, k, k+1)
						}
						cfg, ns := boundTo(t, less)
						err := part.duties(t, kind, cfg, ns)
						require.Error(t, err, "the part did all its work without %s on %s: the Role need not grant it", verb, rule.Resources[0])
						require.True(t, apierrors.IsForbidden(err), "failed, but not for want of %s %s: %v", verb, rule.Resources[0], err)
					})
				}
			}
		})
	}
}

// boundTo returns the config of a new user bound only to role, in a
// namespace of its own.
func boundTo(t *testing.T, role *rbacv1.Role) (*rest.Config, string) {
	t.Helper()
	ns := bareNamespace(t)
	r := role.DeepCopy()
	r.Namespace = ns
	name := "execfsm-rbac-" + ns
	c, err := controlPlane.AddUser(name)
	require.NoError(t, err)
	grant(t, r, name)
	return c, ns
}

// masterDuties is all a cluster master does through this package: it
// creates an execution, asks it to stop, lists and watches executions,
// asks whether a controller holds one, creates its controller's Job,
// adopts it by its labels, labels it and reads it, and retires an
// execution that ended.
func masterDuties(t *testing.T, kind storeKind, cfg *rest.Config, ns string) error {
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cfg)
	store, err := kind.open(t, cfg, ns)
	if err != nil {
		return err
	}
	posted, postErr := eventsOf(t, store, "master")
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"}, posted.Observers())
	if err != nil {
		return err
	}
	defer posted.Close()
	events, err := reconcile.StoreEvents(ctx, store, reconcile.StoreEventsOptions{})
	if err != nil {
		return err
	}
	if _, err := master.Create(ctx, transition.To(state.Pending).Because("submitted")); err != nil {
		return err
	}
	select {
	case <-events:
	case <-ctx.Done():
		return errors.New("no event for the execution created")
	}
	if _, err := master.Fire(ctx, state.Stopping, "user stop"); err != nil {
		return err
	}
	if _, _, err := store.List(ctx); err != nil {
		return err
	}
	if _, _, err := store.Held(ctx, "ex-1"); err != nil {
		return err
	}
	job, err := kube.ControllerJob{Namespace: ns, Name: "ex-1-controller", Execution: "ex-1", Status: "pending", Pod: controllerPod()}.Build()
	if err != nil {
		return err
	}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	jobs := &kube.Jobs{Client: client, Namespace: ns, Selector: map[string]string{kube.ExecutionLabel: "ex-1"}, KeyLabel: kube.ExecutionLabel}
	if _, err := jobs.List(ctx); err != nil {
		return err
	}
	jobEvents, err := jobs.Events(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		for range jobEvents { // until the informer has stopped
		}
	}()
	select {
	case key := <-jobEvents:
		if key != "ex-1" {
			return fmt.Errorf("Jobs.Events said %q", key)
		}
	case <-ctx.Done():
		return errors.New("no event for the Job created")
	}
	_, rec, err := master.Load(ctx)
	if err != nil {
		return err
	}
	if err := kube.LabelJob(ctx, client, ns, job.Name, rec); err != nil {
		return err
	}
	if _, err = client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
		return err
	}
	// Retires executions that ended, each owned by a controller (the
	// administrator plays it) at a higher epoch than the one before: its
	// record deleted, the store's epoch floor made, then raised.
	admin := kind.adminStore(t, ns)
	for k, epochs := range []int{1, 2} {
		id := fmt.Sprintf("ex-ended-%d", k)
		ended, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "master"})
		if err != nil {
			return err
		}
		if _, err := ended.Create(ctx, transition.To(state.Pending).Because("submitted")); err != nil {
			return err
		}
		for range epochs {
			own, _, err := admin.Acquire(ctx, id, storage.Lease{Holder: "pod-1", TTL: 30 * time.Second})
			require.NoError(t, err)
			require.NoError(t, own.Release(ctx))
		}
		if _, err := ended.Fire(ctx, state.Rejected, "refused"); err != nil {
			return err
		}
		if _, err := ended.Delete(ctx, transition.Deletion{Reason: "kept long enough"}); err != nil {
			return err
		}
	}
	posted.Close()
	return postErr()
}

// eventsOf returns the Events of store's executions, posted as component,
// and the first error posting them.
func eventsOf(t *testing.T, store *kube.Store, component string) (*kube.Events[state.Status], func() error) {
	t.Helper()
	var mu sync.Mutex
	var first error
	e, err := kube.NewEvents(store, teraslice.Roles(), kube.EventsOptions{Component: component, OnError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e, func() error { mu.Lock(); defer mu.Unlock(); return first }
}

// controllerDuties is all an execution's controller does through this
// package: the first pod starts the execution, runs it and relocates on
// SIGTERM; a later one starts while an old pod (played by the
// administrator) still holds it, waits, and takes it over once the old
// pod relocates.
func controllerDuties(t *testing.T, kind storeKind, cfg *rest.Config, ns string) error {
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	admin := kind.adminStore(t, ns)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), admin, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Initializing).Set(recovery.MetaRelocatable, "true"))
	require.NoError(t, err)

	store, err := kind.open(t, cfg, ns)
	if err != nil {
		return err
	}
	posted, postErr := eventsOf(t, store, "pod-1")
	decider := decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob, Failovers: teraslice.Failovers})
	lease := storage.Lease{Holder: "pod-1", TTL: 30 * time.Second, Wait: true}
	first, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-1"}, posted.Observers())
	require.NoError(t, err)
	releaseAtCleanup(t, first)
	if _, err := decider.Start(ctx, first, lease); err != nil {
		return err
	}
	if _, err := first.Fire(ctx, state.Running, "slicer ready"); err != nil {
		return err
	}
	if a, err := decider.Terminate(ctx, first, nil); err != nil {
		return err
	} else if a.ReleaseErr != nil {
		return a.ReleaseErr // relocated, but the successor would wait out the Lease
	}
	posted.Close()
	if err := postErr(); err != nil {
		return err
	}

	old, err := transition.NewPersisted(teraslice.Lifecycle(), admin, "ex-1", transition.PersistedOptions{Actor: "pod-2"})
	require.NoError(t, err)
	releaseAtCleanup(t, old)
	_, err = decider.Start(ctx, old, storage.Lease{Holder: "pod-2", TTL: 30 * time.Second})
	require.NoError(t, err)
	next, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-3"})
	require.NoError(t, err)
	releaseAtCleanup(t, next)
	// While the old pod holds it, the new one waits, watching its Lease,
	// until it gives up (a second here).
	waitCtx, stopWaiting := context.WithTimeout(ctx, time.Second)
	_, err = decider.Start(waitCtx, next, storage.Lease{Holder: "pod-3", TTL: 30 * time.Second, Wait: true})
	stopWaiting()
	if !errors.Is(err, storage.ErrHeld) {
		return fmt.Errorf("want the execution held by the old pod, got: %w", err)
	}
	a, err := decider.Terminate(ctx, old, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	_, err = decider.Start(ctx, next, storage.Lease{Holder: "pod-3", TTL: 30 * time.Second, Wait: true})
	return err
}

// releaseAtCleanup lets go of what exec owns when the test ends, so no
// renewal outlives it.
func releaseAtCleanup(t *testing.T, exec *transition.Persisted[state.Status]) {
	t.Cleanup(func() {
		if o := exec.Ownership(); o != nil {
			_ = o.Release(bg)
		}
	})
}

// readerDuties is all a reader does: read a record, list them, follow
// their changes and ask who holds one. Its one attempt to write is
// refused.
func readerDuties(t *testing.T, kind storeKind, cfg *rest.Config, ns string) error {
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	admin, err := transition.NewPersisted(teraslice.Lifecycle(), kind.adminStore(t, ns), "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = admin.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)

	store, err := kind.open(t, cfg, ns)
	if err != nil {
		return err
	}
	if _, err := store.Get(ctx, "ex-1"); err != nil {
		return err
	}
	if _, _, err := store.List(ctx); err != nil {
		return err
	}
	events, err := store.Watch(ctx, 0)
	if err != nil {
		return err
	}
	<-events // the record listed
	if _, _, err := store.Held(ctx, "ex-1"); err != nil {
		return err
	}
	reader, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "reader"})
	require.NoError(t, err)
	_, err = reader.Fire(ctx, state.Stopping, "a reader cannot")
	require.True(t, apierrors.IsForbidden(err), "a reader's write: %v", err)
	return nil
}
