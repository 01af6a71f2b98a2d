package kube_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWait bounds every wait for the Job controller: a replacement pod
// after a counted failure comes after its backoff (10 s, then 20 s, 40 s).
const podWait = 3 * time.Minute

func controllerPod() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "execfsm.test/controller"}}}}
}

func TestControllerJobBuildsThePolicyAndTheLabels(t *testing.T) {
	limit := int32(2)
	job, err := kube.ControllerJob{Namespace: "teraslice", Name: "ex-42-controller", Execution: "ex-42", Status: "initializing",
		Relocatable: true, Labels: map[string]string{"teraslice.terascope.io/exId": "ex-42"}, Pod: controllerPod(), BackoffLimit: &limit,
		Owner: &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "teraslice-master", UID: "u-1"}}.Build()
	require.NoError(t, err)
	for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		require.Equal(t, "ex-42", labels[kube.ExecutionLabel])
		require.Equal(t, "ex-42", labels["teraslice.terascope.io/exId"])
	}
	require.Equal(t, "initializing", job.Labels[kube.StatusLabel])
	require.Equal(t, "true", job.Labels[kube.RelocatableLabel])
	// A pod template cannot change: a status on it would be stale on
	// every replacement pod.
	require.NotContains(t, job.Spec.Template.Labels, kube.StatusLabel)
	require.NotContains(t, job.Spec.Template.Labels, kube.RelocatableLabel)
	require.Equal(t, corev1.RestartPolicyNever, job.Spec.Template.Spec.RestartPolicy)
	require.Equal(t, int32(2), *job.Spec.BackoffLimit)
	rules := job.Spec.PodFailurePolicy.Rules
	require.Len(t, rules, 2)
	require.Equal(t, corev1.DisruptionTarget, rules[0].OnPodConditions[0].Type)
	require.Equal(t, []int32{143}, rules[1].OnExitCodes.Values)
	require.Equal(t, "controller", *rules[1].OnExitCodes.ContainerName)
	require.Equal(t, "teraslice-master", job.OwnerReferences[0].Name)
}

func TestControllerJobRefusesWhatCannotWork(t *testing.T) {
	neg := int32(-1)
	onFailure := controllerPod()
	onFailure.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	_, err := kube.ControllerJob{Namespace: "Bad_NS", Name: "", Execution: "Teraslice/ex 42", Status: "", Pod: onFailure,
		Container: "sidecar", RelocateExitCode: 300, BackoffLimit: &neg,
		Labels: map[string]string{kube.StatusLabel: "running"},
		Owner:  &metav1.OwnerReference{Kind: "Pod", Name: "controller-1", UID: "u"}}.Build()
	require.ErrorIs(t, err, kube.ErrInvalidControllerJob)
	for _, want := range []string{`namespace "Bad_NS"`, `name ""`, `execution "Teraslice/ex 42" must be a label value`, `status ""`,
		"restartPolicy is OnFailure", `no container "sidecar"`, "relocate exit code 300", "backoff limit -1", "label execfsm.io/status is set by Build",
		`owner Pod "controller-1"`} {
		require.ErrorContains(t, err, want)
	}
	_, err = kube.ControllerJob{Namespace: "ns", Name: "j", Execution: "ex-1", Status: "pending"}.Build()
	require.ErrorContains(t, err, "the pod has no container")
}

// kubelet plays the node agent for one controller Job's pods against the
// real Job controller: it binds each new pod to its node, runs it as a
// real controller process, and reports how the process ended, as a
// kubelet reports a container's exit.
type kubelet struct {
	t      *testing.T
	ns     string
	job    string
	node   string
	budget int
	seen   map[string]bool
}

// next waits for the Job's next pod, binds it and starts its controller.
func (k *kubelet) next() (*corev1.Pod, *exec.Cmd, <-chan string) {
	k.t.Helper()
	found := k.bindNext()
	cmd, out := podWithBudget(k.t, k.ns, "ex-42", found.Name, k.budget)
	k.report(found.Name, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	return found, cmd, out
}

// bindNext waits for the Job's next pod and binds it to the node.
func (k *kubelet) bindNext() *corev1.Pod {
	k.t.Helper()
	var found *corev1.Pod
	deadline := time.Now().Add(podWait)
	for found == nil {
		pods, err := clientset.CoreV1().Pods(k.ns).List(bg, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + k.job})
		require.NoError(k.t, err)
		for i := range pods.Items {
			if p := &pods.Items[i]; !k.seen[p.Name] && p.DeletionTimestamp == nil {
				found = p
			}
		}
		if found == nil {
			if time.Now().After(deadline) {
				k.t.Fatalf("the Job controller made no new pod for %s within %v; Job status %+v\n%s", k.job, podWait, k.jobStatus(), kcmLog())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	k.seen[found.Name] = true
	require.NoError(k.t, clientset.CoreV1().Pods(k.ns).Bind(bg, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: found.Name, Namespace: k.ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: k.node}}, metav1.CreateOptions{}))
	return found
}

// exited reports the controller's exit as the kubelet does: the pod is
// Succeeded for 0, Failed otherwise, with the exit code and reason, and
// then deleted (the kubelet's final delete after a graceful one).
func (k *kubelet) exited(name string, code int32, reason string, deleteIt bool) {
	k.t.Helper()
	phase := corev1.PodFailed
	if code == 0 {
		phase = corev1.PodSucceeded
	}
	k.report(name, phase, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.Now()}})
	if deleteIt {
		zero := int64(0)
		require.NoError(k.t, clientset.CoreV1().Pods(k.ns).Delete(bg, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	}
}

func (k *kubelet) report(name string, phase corev1.PodPhase, cs corev1.ContainerState) {
	k.t.Helper()
	p, err := clientset.CoreV1().Pods(k.ns).Get(bg, name, metav1.GetOptions{})
	require.NoError(k.t, err)
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "controller", Image: "execfsm.test/controller", State: cs, Ready: phase == corev1.PodRunning}}
	_, err = clientset.CoreV1().Pods(k.ns).UpdateStatus(bg, p, metav1.UpdateOptions{})
	require.NoError(k.t, err)
}

func (k *kubelet) jobStatus() batchv1.JobStatus {
	job, err := clientset.BatchV1().Jobs(k.ns).Get(bg, k.job, metav1.GetOptions{})
	if err != nil {
		return batchv1.JobStatus{}
	}
	return job.Status
}

// drain moves the controller off its node: by the eviction API (which
// marks the pod DisruptionTarget, as a node drain does) or by a plain
// delete (kubectl delete pod: no condition, only the exit code says it).
// The kubelet sends SIGTERM; the controller relocates and exits 143.
func (k *kubelet) drain(p *corev1.Pod, cmd *exec.Cmd, out <-chan string, evict bool) {
	k.t.Helper()
	if evict {
		require.NoError(k.t, clientset.PolicyV1().Evictions(k.ns).Evict(bg, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: k.ns}}))
		got, err := clientset.CoreV1().Pods(k.ns).Get(bg, p.Name, metav1.GetOptions{})
		require.NoError(k.t, err)
		require.True(k.t, hasCondition(got, corev1.DisruptionTarget), "the eviction API marks the pod")
	} else {
		require.NoError(k.t, clientset.CoreV1().Pods(k.ns).Delete(bg, p.Name, metav1.DeleteOptions{}))
	}
	require.NoError(k.t, cmd.Process.Signal(syscall.SIGTERM))
	expect(k.t, out, "terminate relocate")
	requireExit(k.t, cmd, 143)
	k.exited(p.Name, 143, "Error", true)
}

// oom kills the controller as the kernel does, and reports it.
func (k *kubelet) oom(p *corev1.Pod, cmd *exec.Cmd) {
	k.t.Helper()
	require.NoError(k.t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	k.exited(p.Name, 137, "OOMKilled", false)
}

func hasCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == c && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func kcmLog() string {
	log, err := controlPlane.ControllerManagerLog()
	if err != nil {
		return err.Error()
	}
	return "kube-controller-manager's log ends:\n" + log
}

// submit plays the cluster master: the execution's record (relocatable,
// initializing) and its controller Job with the given crash limit.
func submit(t *testing.T, ns string, limit int32) (*transition.Persisted[state.Status], *kubelet) {
	t.Helper()
	s, err := kube.New(masterClient, kube.Options{Namespace: ns})
	require.NoError(t, err)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-42", transition.PersistedOptions{Actor: "cluster-master", History: storage.MaxHistory})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Pending).Because("submitted").Set(recovery.MetaRelocatable, "true"))
	require.NoError(t, err)
	for _, to := range []state.Status{state.Scheduling, state.Initializing} {
		_, err := master.Fire(bg, to, "cluster master")
		require.NoError(t, err)
	}
	_, rec, err := master.Load(bg)
	require.NoError(t, err)
	job, err := kube.ControllerJob{Namespace: ns, Name: "ex-42-controller", Execution: "ex-42", Status: rec.Status, Relocatable: true,
		Pod: controllerPod(), BackoffLimit: &limit}.Build()
	require.NoError(t, err)
	_, err = masterClient.BatchV1().Jobs(ns).Create(bg, job, metav1.CreateOptions{})
	require.NoError(t, err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns}}
	_, err = clientset.CoreV1().Nodes().Create(bg, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = clientset.CoreV1().Nodes().Delete(bg, node.Name, metav1.DeleteOptions{}) })
	return master, &kubelet{t: t, ns: ns, job: job.Name, node: node.Name, seen: map[string]bool{}}
}

// requireStatus reads the execution's status as the master sees it.
func requireStatus(t *testing.T, master *transition.Persisted[state.Status], want state.Status) storage.Record {
	t.Helper()
	cur, rec, err := master.Load(bg)
	require.NoError(t, err)
	require.Equal(t, want, cur, "reason: %s", rec.Reason)
	return rec
}

// Node drains never fail the controller's Job: each relocation exits 143
// or carries DisruptionTarget, the Job controller ignores the pod and
// makes a new one, and the execution relocates and resumes every time.
// The Job's crash limit is 1: the two drains (one exiting 143, one
// carrying DisruptionTarget) would have failed a Job without the
// podFailurePolicy. (Two, not more: the Job controller still waits its
// doubling backoff before each replacement, 10 s then 20 s, and a third
// drain would add 40 s to every CI run to prove nothing new.) Stopped at
// the end, the Job completes with no failed pod at all.
func TestControllerJobRelocationsNeverCount(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := submit(t, ns, 1)
	k.budget = 1

	p, cmd, out := k.next()
	expect(t, out, "verdict start initializing")
	expect(t, out, "running")
	const drains = 2
	for n := range drains {
		k.drain(p, cmd, out, n%2 == 0)
		rec := requireStatus(t, master, state.Relocating)
		require.Equal(t, "running", rec.Previous)
		p, cmd, out = k.next()
		expect(t, out, "verdict resume running")
		expect(t, out, "running")
		st := k.jobStatus()
		require.Zero(t, st.Failed, "a relocation is never a failed pod")
		require.Empty(t, ended(st), "the Job is still active")
	}
	require.Len(t, k.seen, drains+1, "N drains, N replacement pods")
	require.NoError(t, kube.LabelJob(bg, masterClient, ns, k.job, requireStatus(t, master, state.Running)))
	jobs, err := clientset.BatchV1().Jobs(ns).List(bg, metav1.ListOptions{LabelSelector: kube.StatusLabel + "=running," + kube.RelocatableLabel + "=true"})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1, "operators select controllers by status and by whether they can move")

	// The user stops it: the master writes stopping and the platform
	// deletes the pod; the controller shuts down, writes stopped and
	// exits 0.
	_, err = master.Fire(bg, state.Stopping, "user stop")
	require.NoError(t, err)
	require.NoError(t, clientset.CoreV1().Pods(ns).Delete(bg, p.Name, metav1.DeleteOptions{}))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	expect(t, out, "terminate shutdown")
	expect(t, out, "finish stopped")
	requireExit(t, cmd, 0)
	k.exited(p.Name, 0, "Completed", true)
	requireStatus(t, master, state.Stopped)
	job := waitJob(t, ns, k.job, batchv1.JobComplete)
	require.Zero(t, job.Status.Failed, "%d relocations, no failed pod", drains)
}

// A controller sent SIGTERM before its first start (here while it waits
// for a live holder's Lease, as a replacement waits out a predecessor
// still alive elsewhere) has taken nothing over and leaves; it exits as a
// relocation does, so the Job, which an exit 0 would have completed
// with the execution unfinished, replaces it without counting a failure,
// and the replacement takes the execution over once the holder is gone.
func TestControllerJobALeaveBeforeTheFirstStartIsReplaced(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := submit(t, ns, 1)
	s, err := kube.New(clientset, kube.Options{Namespace: ns})
	require.NoError(t, err)
	elsewhere, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-42", transition.PersistedOptions{Actor: "elsewhere"})
	require.NoError(t, err)
	_, _, err = elsewhere.Acquire(bg, storage.Lease{Holder: "elsewhere", TTL: time.Minute}, nil)
	require.NoError(t, err)

	p, cmd, out := k.next()
	expect(t, out, "starting")
	require.NoError(t, clientset.CoreV1().Pods(ns).Delete(bg, p.Name, metav1.DeleteOptions{}))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	expect(t, out, "terminate leave")
	requireExit(t, cmd, recovery.DefaultRelocateExitCode)
	k.exited(p.Name, recovery.DefaultRelocateExitCode, "Error", true)
	rec := requireStatus(t, master, state.Initializing)
	require.Equal(t, "elsewhere", rec.Owner, "the pod that left wrote nothing")
	require.Empty(t, ended(k.jobStatus()), "the Job goes on")

	require.NoError(t, elsewhere.Ownership().Release(bg))
	p, cmd, out = k.next()
	expect(t, out, "verdict start initializing")
	expect(t, out, "running")
	_, err = master.Fire(bg, state.Stopping, "user stop")
	require.NoError(t, err)
	require.NoError(t, clientset.CoreV1().Pods(ns).Delete(bg, p.Name, metav1.DeleteOptions{}))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	expect(t, out, "finish stopped")
	requireExit(t, cmd, 0)
	k.exited(p.Name, 0, "Completed", true)
	job := waitJob(t, ns, k.job, batchv1.JobComplete)
	require.Zero(t, job.Status.Failed, "the pod that left is not a failed pod")
}

// OOM kills count, against the execution's failover allowance (1) and the
// Job's crash limit (6): the budget is spent first, so the execution
// fails with its reason, the last controller exits 0 and the Job
// completes having counted exactly the OOM kills.
func TestControllerJobFailoverAllowanceEndsOOMsBeforeTheJobLimit(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := oomTwice(t, ns, 6, 1)
	p, cmd, out := k.next()
	expect(t, out, "verdict fail failed")
	requireExit(t, cmd, 0)
	k.exited(p.Name, 0, "Completed", false)
	rec := requireStatus(t, master, state.Failed)
	require.Contains(t, rec.Reason, "failovers spent")
	job := waitJob(t, ns, k.job, batchv1.JobComplete)
	require.Equal(t, int32(2), job.Status.Failed, "the two OOM kills, and only they, counted")
}

// When the Job's crash limit (1) is reached before the execution's
// failover allowance (5), the Job fails with its reason and nothing is left
// to write the end: the cluster master fails the execution with the
// Job's reason.
func TestControllerJobLimitReachedFirstFailsTheExecutionWithItsReason(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	master, k := oomTwice(t, ns, 1, 5)
	job := waitJob(t, ns, k.job, batchv1.JobFailed)
	why, failed := kube.JobFailure(job)
	require.True(t, failed)
	require.Contains(t, why, "BackoffLimitExceeded")
	requireStatus(t, master, state.Running) // nobody is left to say otherwise

	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(bg, master, recovery.Ending{Err: errors.New(why)}, nil)
	require.NoError(t, err)
	require.Equal(t, state.Failed, end.To)
	rec := requireStatus(t, master, state.Failed)
	require.Equal(t, why, rec.Reason)
	require.Equal(t, "cluster-master", rec.History.Entries()[rec.History.Len()-1].Actor)
}

// oomTwice submits an execution with the Job's crash limit and the
// controllers' failover allowance, lets its controller run, and OOM-kills it
// twice: the first restart resumes, what follows the second is the test's.
func oomTwice(t *testing.T, ns string, limit int32, budget int) (*transition.Persisted[state.Status], *kubelet) {
	t.Helper()
	master, k := submit(t, ns, limit)
	k.budget = budget
	p, cmd, out := k.next()
	expect(t, out, "running")
	k.oom(p, cmd)
	p, cmd, out = k.next()
	expect(t, out, "verdict resume running")
	expect(t, out, "running")
	k.oom(p, cmd)
	return master, k
}

// waitJob waits for the Job's condition.
func waitJob(t *testing.T, ns, name string, cond batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(podWait)
	for {
		job, err := clientset.BatchV1().Jobs(ns).Get(bg, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range job.Status.Conditions {
			if c.Type == cond && c.Status == corev1.ConditionTrue {
				return job
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Job %s/%s not %s within %v: %s\n%s", ns, name, cond, podWait, conditions(job), kcmLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ended returns the Job's terminal conditions, if any.
func ended(st batchv1.JobStatus) []batchv1.JobConditionType {
	var out []batchv1.JobConditionType
	for _, c := range st.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			out = append(out, c.Type)
		}
	}
	return out
}

func conditions(job *batchv1.Job) string {
	var parts []string
	for _, c := range job.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, ", ")
}
