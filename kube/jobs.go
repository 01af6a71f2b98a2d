package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/execfsm/execfsm/reconcile"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
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

// List returns the Jobs as loop items keyed by their KeyLabel, sorted by
// key. A Job without a KeyLabel is left out: it is not an item.
func (j *Jobs) List(ctx context.Context) ([]reconcile.Item[string], error) {
	if j.Client == nil || len(j.Selector) == 0 || j.KeyLabel == "" {
		return nil, errors.New("kube: Jobs needs a Client, a Selector and a KeyLabel")
	}
	sel, err := labels.ValidatedSelectorFromSet(j.Selector)
	if err != nil {
		return nil, fmt.Errorf("kube: Jobs.Selector: %w", err)
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
