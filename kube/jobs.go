package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/execfsm/execfsm/reconcile"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Jobs lists a controller's batch/v1 Jobs as the items of a
// reconcile.Loop, each with the identity its labels and annotations
// carry, so a restarted controller adopts them under the same keys: give
// Jobs.List to reconcile.Options.World, and rebuild each item in an
// Adopter from its Identity.
//
// The Jobs listed are those with every label of Selector (a manager's
// own label: which Jobs are this controller's); each one's key is the
// value of its KeyLabel (a Job without it is not an item). Identity
// carries the Job's labels and annotations as they are, plus nothing
// invented. VILLAScontroller's Kubernetes manager, for one (see the
// example), selects its Jobs by its manager UUID, keys them by service
// UUID, and finds a simulator's name, location, realm and owner in the
// service.villas.io/* annotations.
//
// The ownerReference trap: a Job whose ownerReference is the manager's
// own Pod is garbage-collected by Kubernetes when that Pod is deleted,
// which is exactly what a relocation does, so there would be nothing left
// to adopt. Give the Jobs an owner that survives the manager's Pod (the
// manager's Deployment or Job, or none at all and clean up by label).
type Jobs struct {
	Client    kubernetes.Interface
	Namespace string
	Selector  map[string]string // labels every Job of this controller has; at least one
	KeyLabel  string            // the label whose value is an item's key
}

// selector checks j and returns its label selector.
func (j *Jobs) selector() (labels.Selector, error) {
	if j.Client == nil || len(j.Selector) == 0 || j.KeyLabel == "" {
		return nil, errors.New("kube: Jobs needs a Client, a Selector and a KeyLabel")
	}
	sel, err := labels.ValidatedSelectorFromSet(j.Selector)
	if err != nil {
		return nil, fmt.Errorf("kube: Jobs.Selector: %w", err)
	}
	return sel, nil
}

// List returns the Jobs as loop items keyed by their KeyLabel, sorted by
// key. A Job without a KeyLabel is left out: it is not an item.
func (j *Jobs) List(ctx context.Context) ([]reconcile.Item[string], error) {
	sel, err := j.selector()
	if err != nil {
		return nil, err
	}
	list, err := j.Client.BatchV1().Jobs(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kube: list Jobs matching %s: %w", sel, err)
	}
	var items []reconcile.Item[string]
	for k := range list.Items {
		job := &list.Items[k]
		key := job.Labels[j.KeyLabel]
		if key == "" {
			continue
		}
		items = append(items, reconcile.Item[string]{Key: key, Identity: reconcile.Identity{
			Labels: maps.Clone(job.Labels), Annotations: maps.Clone(job.Annotations),
		}})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].Key < items[b].Key })
	return items, nil
}

// Events delivers the key of every Job of this controller when it is
// listed, changes (a pod failed, the Job failed or completed) or is
// deleted, for reconcile.Options.Events: a Job that fails or is deleted
// is reconciled at once, not at the Loop's next resync. The Jobs are
// followed by a client-go informer (list, then watch, listing again when
// the watch cannot resume), so it needs list and watch on Jobs; both are
// tried before Events returns, so a missing permission is its error, not
// a silent retry. The channel is closed once ctx is done
// and the informer has stopped.
//
// A deleted Job's key comes once more: reconciling it, the master finds
// no Job and ends the execution nobody will run (recovery.Decider.Abandon).
func (j *Jobs) Events(ctx context.Context) (<-chan string, error) {
	sel, err := j.selector()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	jobs := j.Client.BatchV1().Jobs(j.Namespace)
	// The informer would retry a refused list or watch forever: try
	// each once here, so that a missing permission is Events' error.
	probe, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("kube: list Jobs matching %s: %w", sel, err)
	}
	w, err := jobs.Watch(ctx, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: probe.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("kube: watch Jobs matching %s: %w", sel, err)
	}
	w.Stop()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = sel.String()
			return jobs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel.String()
			return jobs.Watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &batchv1.Job{}, 0, cache.Indexers{})
	out := make(chan string)
	send := func(obj any) {
		if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = gone.Obj
		}
		job, ok := obj.(*batchv1.Job)
		if !ok || job.Labels[j.KeyLabel] == "" {
			return
		}
		select {
		case out <- job.Labels[j.KeyLabel]:
		case <-ctx.Done():
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, now any) { send(now) },
		DeleteFunc: send,
	}); err != nil {
		return nil, fmt.Errorf("kube: Jobs.Events: %w", err)
	}
	go func() {
		// RunWithContext returns once its handlers have stopped: nothing
		// sends on out after it.
		informer.RunWithContext(ctx)
		close(out)
	}()
	return out, nil
}
