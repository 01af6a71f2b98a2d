package ctrlruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Options are what [Drive] needs besides the manager's config; each is
// optional.
type Options[S comparable] struct {
	// Owns are the kinds of object the Sync makes for an execution with
	// its resource as their controller owner
	// (controllerutil.SetControllerReference), such as a batch/v1 Job: a
	// change to one syncs the execution.
	Owns []client.Object
	// First, if set, is the first record of a resource its user created
	// without one, made from the resource (a limit read from its spec,
	// volcano.MaxRetry). An error is the resource's fault: it is not
	// retried, and the resource is left without a record until it
	// changes. Nil: the table's initial state, without metadata.
	First func(u *unstructured.Unstructured) (transition.Update[S], error)
	// Name names the controller in controller-runtime's logs and
	// metrics, unique in the process; "" is the resource's kind in lower
	// case.
	Name string
}

// Drive runs, in mgr, the executions whose records are the custom
// resources of c.Store (a kube.Store over kube.Options.Resource): the
// state in the resource's own status, where `kubectl get` shows it.
// A controller syncs an execution whenever its resource, or an object
// Options.Owns names that it controls, changes: the resource's record
// written first if its user created it without one (Options.First), then
// a [run.Driver]'s sync (taken over and decided on the first time, what
// fell due made, c.Sync called, requeued as its Step asks). A resource
// deleted is let go. When mgr stops (a SIGTERM), every execution is
// handed over as the config says (c.HandOver, as an operator whose work
// runs in its Jobs wants) before mgr.Start returns, which returns the
// hand-over's error. The controller runs in the leader only, when mgr
// elects one.
//
// c is Manage's config less its loop (see [run.NewDriver]): mgr's cache
// is the loop. The request's name is the execution's id: a resource is
// named by its execution.
func Drive[S comparable](mgr manager.Manager, c run.ManagerConfig[S], opts Options[S]) error {
	store, ok := c.Store.(*kube.Store)
	if !ok {
		return fmt.Errorf("ctrlruntime: %w: Drive needs a *kube.Store over a custom resource, not a %T", run.ErrInvalidConfig, c.Store)
	}
	kind, ok := store.ResourceKind()
	if !ok {
		return fmt.Errorf("ctrlruntime: %w: Drive needs a kube.Store over a custom resource (kube.Options.Resource), not one of ConfigMaps", run.ErrInvalidConfig)
	}
	if mgr == nil {
		return fmt.Errorf("ctrlruntime: %w: nil manager", run.ErrInvalidConfig)
	}
	driver, err := run.NewDriver(c)
	if err != nil {
		return err
	}
	if opts.Name == "" {
		opts.Name = strings.ToLower(kind.Kind)
	}
	r := &resourceReconciler[S]{reader: mgr.GetCache(), store: store, kind: kind, driver: driver, table: c.Roles.Table(),
		first: opts.First, ids: map[string]string{}}
	resource := &unstructured.Unstructured{}
	resource.SetGroupVersionKind(kind)
	b := builder.ControllerManagedBy(mgr).Named(opts.Name).For(resource).
		WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == store.Namespace() }))
	for _, owned := range opts.Owns {
		b = b.Owns(owned)
	}
	if err := b.Complete(ToReconciler(r)); err != nil {
		return fmt.Errorf("ctrlruntime: %w", err)
	}
	// Added after the controller, in the same (leader-elected) group:
	// started with it, stopped with it, and the hand-over waits for the
	// syncs under way (run.Driver.HandOver).
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		_, err := driver.HandOver(context.WithoutCancel(ctx))
		return err
	}))
	if err != nil {
		return fmt.Errorf("ctrlruntime: %w", err)
	}
	return nil
}

// resourceReconciler is Drive's reconciler.
type resourceReconciler[S comparable] struct {
	reader client.Reader
	store  *kube.Store
	kind   schema.GroupVersionKind // the store's resources'
	driver *run.Driver[S]
	table  *transition.Table[S]
	first  func(*unstructured.Unstructured) (transition.Update[S], error)

	mu  sync.Mutex
	ids map[string]string // resource name → execution id, for a resource that is gone
}

// Reconcile implements reconcile.Reconciler over the request's name.
func (r *resourceReconciler[S]) Reconcile(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.kind)
	err := r.reader.Get(ctx, key, u)
	switch {
	case apierrors.IsNotFound(err):
		// Deleted: the driver finds its record gone and lets it go.
		r.mu.Lock()
		id, ok := r.ids[key.Name]
		delete(r.ids, key.Name)
		r.mu.Unlock()
		if !ok {
			id = key.Name
		}
		return r.driver.Reconcile(ctx, id)
	case err != nil:
		return reconcile.Result{}, err
	}
	id, recorded := r.store.ExecutionOf(u)
	if !recorded {
		if err := r.create(ctx, id, u); err != nil {
			return reconcile.Result{}, err
		}
	}
	r.mu.Lock()
	r.ids[key.Name] = id
	r.mu.Unlock()
	return r.driver.Reconcile(ctx, id)
}

// create writes the first record of a resource its user created.
func (r *resourceReconciler[S]) create(ctx context.Context, id string, u *unstructured.Unstructured) error {
	first := transition.To(r.table.Initial()).Because("created by its user")
	if r.first != nil {
		var err error
		if first, err = r.first(u); err != nil {
			return reconcile.TerminalError(fmt.Errorf("ctrlruntime: the first record of %s: %w", id, err))
		}
	}
	exec, err := transition.NewPersisted(r.table, r.store, id, transition.PersistedOptions{Actor: r.driver.Holder()})
	if err != nil {
		return err
	}
	if _, err := exec.Create(ctx, first); err != nil && !errors.Is(err, storage.ErrExists) {
		return err
	}
	return nil
}
