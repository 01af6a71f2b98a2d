package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// kubelet plays the scheduler and the node agent of the demo's nodes:
// a control plane for tests runs no pods, so this binds each new pod to
// a node that takes pods, reports it running, ends its container when
// the demo says so (an OOM kill, a success), and finishes the deletion
// of a pod being deleted (an eviction, the Job deleted) as a kubelet
// does once its containers have stopped.
type kubelet struct {
	client kubernetes.Interface
	ns     string
	nodes  []string
}

// nodeNames are the demo's nodes.
var nodeNames = []string{"node-a", "node-b"}

// start makes the nodes; run plays them.
func (k *kubelet) start(ctx context.Context) error {
	for _, name := range k.nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// run plays the nodes every few milliseconds until ctx ends. An error
// (the API server restarting) is tried again at the next tick.
func (k *kubelet) run(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = k.tick(ctx)
		}
	}
}

// tick moves each pod one step. Each write carries the resourceVersion
// read, so one that races the demo's own (an OOM kill) is refused.
func (k *kubelet) tick(ctx context.Context) error {
	pods, err := k.client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.DeletionTimestamp != nil && !terminal(p):
			// Its container got SIGTERM and stopped.
			end(p, 143, "Error")
			_, err = k.client.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		case p.DeletionTimestamp != nil && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 0):
			err = k.client.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64),
				Preconditions: &metav1.Preconditions{UID: &p.UID}})
		case p.Spec.NodeName == "":
			err = k.bind(ctx, p)
		case p.Status.Phase == "" || p.Status.Phase == corev1.PodPending:
			now := metav1.Now()
			p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
				Ready: true, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
			_, err = k.client.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// bind puts p on the first node that takes pods.
func (k *kubelet) bind(ctx context.Context, p *corev1.Pod) error {
	for _, name := range k.nodes {
		node, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Spec.Unschedulable {
			continue
		}
		return k.client.CoreV1().Pods(k.ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: name}}, metav1.CreateOptions{})
	}
	return fmt.Errorf("no node takes pods")
}

// exit ends the container of pod as a kubelet reports it: exit code 0
// succeeds the pod, any other fails it (137 with reason OOMKilled is an
// OOM kill).
func (k *kubelet) exit(ctx context.Context, pod string, code int32, reason string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := k.client.CoreV1().Pods(k.ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		end(p, code, reason)
		_, err = k.client.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// drain is `kubectl drain node`: the node cordoned, then every pod on it
// evicted through the Eviction API, which marks each with the
// DisruptionTarget condition and deletes it gracefully.
func (k *kubelet) drain(ctx context.Context, node string) error {
	if err := k.cordon(ctx, node, true); err != nil {
		return err
	}
	pods, err := k.client.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := k.client.PolicyV1().Evictions(k.ns).Evict(ctx, eviction); err != nil {
			return fmt.Errorf("evicting %s: %w", p.Name, err)
		}
	}
	return nil
}

// cordon marks node as taking no pods (or taking them again).
func (k *kubelet) cordon(ctx context.Context, node string, unschedulable bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	_, err := k.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// end reports p's container ended with code.
func end(p *corev1.Pod, code int32, reason string) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodFailed
	if code == 0 {
		p.Status.Phase = corev1.PodSucceeded
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	name := p.Spec.Containers[0].Name
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: now}}}}
}

// terminal reports whether p's phase is an end.
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
