package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/execfsm/execfsm/recovery"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// IdentityKeys say where a Job keeps its item's identity. UUID and
// Manager are labels (the manager's Jobs are selected by its label);
// the others are annotations, which may hold any text. The zero value is
// VILLAScontroller's: DefaultIdentityKeys.
type IdentityKeys struct {
	UUID, Manager                string // labels
	Name, Location, Realm, Owner string // annotations
}

// DefaultIdentityKeys are the keys VILLAScontroller's Kubernetes manager
// labels and annotates its simulator Jobs with.
func DefaultIdentityKeys() IdentityKeys {
	return IdentityKeys{
		UUID: "service.villas.io/uuid", Manager: "manager.villas.io/uuid",
		Name: "service.villas.io/name", Location: "service.villas.io/location",
		Realm: "service.villas.io/realm", Owner: "service.villas.io/owner",
	}
}

// Jobs lists a manager's batch/v1 Jobs as the items of a recovery.Loop,
// with the identity their labels and annotations carry, so a restarted
// manager adopts them under the same UUIDs: give Jobs.List to
// recovery.Options.List, and rebuild each item in an Adopter.
//
// The ownerReference trap: a Job whose ownerReference is the manager's
// own Pod is garbage-collected by Kubernetes when that Pod is deleted,
// which is exactly what a relocation does, so there would be nothing left
// to adopt. Give the Jobs an owner that survives the manager's Pod (the
// manager's Deployment or Job, or none at all and clean up by label).
type Jobs struct {
	Client    kubernetes.Interface
	Namespace string
	Manager   string // the manager UUID whose Jobs to list
	Keys      IdentityKeys
}

// List returns the manager's Jobs as loop items keyed by item UUID,
// sorted. A Job without a UUID label is left out: it is not an item.
func (j *Jobs) List(ctx context.Context) ([]recovery.Item[string], error) {
	if j.Client == nil || j.Manager == "" {
		return nil, errors.New("kube: Jobs needs a Client and a Manager")
	}
	keys := j.Keys
	if keys == (IdentityKeys{}) {
		keys = DefaultIdentityKeys()
	}
	sel := labels.Set{keys.Manager: j.Manager}.AsSelector().String()
	list, err := j.Client.BatchV1().Jobs(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("kube: list Jobs of manager %q: %w", j.Manager, err)
	}
	var items []recovery.Item[string]
	for k := range list.Items {
		if it, ok := itemOf(&list.Items[k], keys); ok {
			items = append(items, it)
		}
	}
	sort.Slice(items, func(a, b int) bool { return items[a].Key < items[b].Key })
	return items, nil
}

func itemOf(job *batchv1.Job, keys IdentityKeys) (recovery.Item[string], bool) {
	uuid := job.Labels[keys.UUID]
	if uuid == "" {
		return recovery.Item[string]{}, false
	}
	id := recovery.Identity{
		UUID: uuid, Manager: job.Labels[keys.Manager],
		Name: job.Annotations[keys.Name], Location: job.Annotations[keys.Location],
		Realm: job.Annotations[keys.Realm], Owner: job.Annotations[keys.Owner],
		Extra: map[string]string{"job": job.Namespace + "/" + job.Name},
	}
	return recovery.Item[string]{Key: uuid, Identity: id}, true
}

// Labels returns the labels and annotations a Job for identity should be
// created with, so that Jobs.List finds it and reads its identity back.
func (k IdentityKeys) Labels(id recovery.Identity) (labels, annotations map[string]string) {
	if k == (IdentityKeys{}) {
		k = DefaultIdentityKeys()
	}
	return map[string]string{k.UUID: id.UUID, k.Manager: id.Manager},
		map[string]string{k.Name: id.Name, k.Location: id.Location, k.Realm: id.Realm, k.Owner: id.Owner}
}
