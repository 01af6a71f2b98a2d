package kube_test

import (
	"testing"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Every move is an Event on the execution's ConfigMap, found as kubectl
// describe finds them (by the object's uid), in order; the failure is a
// Warning.
func TestMovesAreEventsOnTheRecord(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	store, err := kube.New(masterClient, kube.Options{Namespace: ns})
	require.NoError(t, err)
	posted, postErr := eventsOf(t, store, "teraslice-master")
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions{Actor: "master"}, posted.Observers())
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	_, err = master.Walk(bg, state.Running, "placed")
	require.NoError(t, err)
	_, _, err = master.Apply(bg, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
		return transition.To(cur).Set("progress", "50%"), nil // no move: no Event
	})
	require.NoError(t, err)
	_, err = master.Fire(bg, state.Failed, "slicer: index missing")
	require.NoError(t, err)
	posted.Close()
	require.NoError(t, postErr())

	cm, err := clientset.CoreV1().ConfigMaps(ns).Get(bg, store.Name("ex-42"), metav1.GetOptions{})
	require.NoError(t, err)
	list, err := clientset.CoreV1().Events(ns).List(bg, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "ConfigMap", "involvedObject.name": cm.Name, "involvedObject.uid": string(cm.UID),
	}.String()})
	require.NoError(t, err)
	var reasons []string
	for _, ev := range list.Items {
		reasons = append(reasons, ev.Reason)
		require.Equal(t, "teraslice-master", ev.Source.Component)
		if ev.Reason == "Failed" {
			require.Equal(t, corev1.EventTypeWarning, ev.Type)
			require.Equal(t, "running → failed: slicer: index missing (by master)", ev.Message)
		} else {
			require.Equal(t, corev1.EventTypeNormal, ev.Type)
		}
	}
	require.ElementsMatch(t, []string{"Pending", "Scheduling", "Initializing", "Running", "Failed"}, reasons)
}

func TestEventsRefuseWhatTheyCannotPost(t *testing.T) {
	store := newStore(t)
	_, err := kube.NewEvents(store, teraslice.Roles(), kube.EventsOptions{})
	require.ErrorContains(t, err, "Component")
	_, err = kube.NewEvents(nil, teraslice.Roles(), kube.EventsOptions{Component: "x"})
	require.Error(t, err)
	_, err = kube.NewEvents[state.Status](store, nil, kube.EventsOptions{Component: "x"})
	require.Error(t, err)
	_, err = kube.NewEvents(store, teraslice.Roles(), kube.EventsOptions{Component: "x", Queue: -1})
	require.Error(t, err)
}
