package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// ExecutionLabel carries the execution's id on the controller's Job and
// pods, so `kubectl get pods -l execfsm.io/execution=ex-42` finds them.
const ExecutionLabel = "execfsm.io/execution"

// DefaultControllerBackoffLimit is how many controller crashes (an OOM
// kill, a non-zero exit other than a relocation's) a [ControllerJob]
// survives by default: Kubernetes' own default. Relocations never count.
const DefaultControllerBackoffLimit = 6

// ControllerJob describes the batch/v1 Job that runs one execution's
// controller on Kubernetes, as Teraslice's kubernetesV2 backend runs its
// execution controller: one pod at a time, replaced when it dies, until
// it exits 0.
//
// A relocating controller exits non-zero ([recovery.Action]'s ExitCode,
// 143) so that the Job replaces it. With a plain Job every such exit is a
// failed pod, and the default backoffLimit of 6 fails the whole Job at the
// seventh node drain: the crash loop's twin on the platform's side.
// [ControllerJob.Build] gives the Job a podFailurePolicy that ignores
// (does not count, and replaces) a pod that exited with the relocation's
// exit code or that carries the DisruptionTarget condition (eviction,
// node drain, preemption, taint eviction), while an OOM kill (137) and
// every other crash still count against BackoffLimit. The execution's
// own failover allowance ([recovery.Policy]) and the Job's limit then bound
// crashes from both sides, whichever is reached first; a Job that fails
// first is reported by [JobFailure], for the cluster master to fail the
// execution with its reason.
//
// What the policy does not change: the Job controller waits before it
// replaces any failed pod, ignored ones included (10 s, doubling with each
// failed pod since the Job's last success, at most 10 minutes, and only
// while the last failure is that recent). Relocations never fail the Job,
// but a quick run of them (a rolling node upgrade) delays the next
// replacement; the execution waits in relocating meanwhile, within its
// deadline. Both behaviours are checked against Kubernetes 1.37's own Job
// controller in this package's tests.
type ControllerJob struct {
	Namespace string
	Name      string // the Job's name
	// Execution is the execution's id, set as the ExecutionLabel (so it
	// must be a valid label value) and the IDAnnotation.
	Execution string
	// Status and Relocatable are the execution's status and relocatable
	// flag when the Job is made, set as StatusLabel and RelocatableLabel
	// on the Job, which [LabelJob] keeps current. Its pods do not carry
	// them: a Job's pod template cannot change, so every replacement pod
	// would carry the status the Job was made with. Select pods by
	// ExecutionLabel, and statuses on Jobs or ConfigMaps.
	Status      string
	Relocatable bool
	// Labels and Annotations are the execution's identity (Teraslice's
	// exId, jobId and jobName; VILLAS' simulator UUID and manager UUID),
	// set on the Job and its pods; see [Jobs] to adopt them by it.
	Labels      map[string]string
	Annotations map[string]string
	// Pod is the controller's pod. Its RestartPolicy must be Never or
	// empty: with OnFailure the kubelet restarts the container in place,
	// a podFailurePolicy is not allowed, and a relocation would not move.
	Pod corev1.PodTemplateSpec
	// Container is the controller's container, whose exit code is
	// matched; empty: the first container.
	Container string
	// RelocateExitCode is the exit code of a relocating controller; zero
	// means recovery.DefaultRelocateExitCode (143).
	RelocateExitCode int32
	// BackoffLimit is how many crashes fail the Job; nil means
	// DefaultControllerBackoffLimit.
	BackoffLimit *int32
	// Owner, if not nil, is the Job's owner: something that outlives
	// every controller pod (the cluster master's Deployment, the
	// execution's ConfigMap). A Pod is refused: the garbage collector
	// would delete the Job with the pod a relocation replaces.
	Owner *metav1.OwnerReference
}

// ErrInvalidControllerJob is matched by the error [ControllerJob.Build]
// returns for a description it cannot build a Job from.
var ErrInvalidControllerJob = errors.New("invalid controller job")

// Build returns the Job, or an error matching ErrInvalidControllerJob
// that lists every problem. The caller creates it
// (client.BatchV1().Jobs(ns).Create).
func (c ControllerJob) Build() (*batchv1.Job, error) {
	resolved, problems := c.check()
	if len(problems) > 0 {
		return nil, fmt.Errorf("kube: %w:\n  %s", ErrInvalidControllerJob, strings.Join(problems, "\n  "))
	}
	container, code, limit := resolved.container, resolved.exitCode, resolved.backoffLimit

	labels := maps.Clone(c.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ExecutionLabel] = c.Execution
	podLabels := maps.Clone(labels) // never a status: see ControllerJob.Status
	labels[StatusLabel] = c.Status
	labels[RelocatableLabel] = strconv.FormatBool(c.Relocatable)
	annotations := maps.Clone(c.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[IDAnnotation] = c.Execution

	pod := *c.Pod.DeepCopy()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Labels = merge(pod.Labels, podLabels)
	pod.Annotations = merge(pod.Annotations, annotations)

	one := int32(1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Parallelism:  &one,
			Completions:  &one,
			BackoffLimit: &limit,
			Template:     pod,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				// The platform moved the pod (drain, eviction, preemption):
				// whatever it exited with, a new one takes over.
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
				}},
				// The controller relocated on a SIGTERM nobody marked
				// (kubectl delete pod): the same.
				{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: &container, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{code},
				}},
			}},
		},
	}
	if c.Owner != nil {
		job.OwnerReferences = []metav1.OwnerReference{*c.Owner}
	}
	return job, nil
}

// jobSettings are what Build uses of a ControllerJob once its defaults
// are applied: the container a relocation's exit code is read from, that
// code, and the Job's backoff limit.
type jobSettings struct {
	container    string
	exitCode     int32
	backoffLimit int32
}

// check applies the defaults and returns every problem with c.
func (c ControllerJob) check() (jobSettings, []string) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, p := range c.checkNames() {
		add("%s", p)
	}
	switch c.Pod.Spec.RestartPolicy {
	case "", corev1.RestartPolicyNever:
	default:
		add("the pod's restartPolicy is %s; it must be Never (a podFailurePolicy needs it, and a relocation must replace the pod)", c.Pod.Spec.RestartPolicy)
	}
	set := jobSettings{container: c.Container, exitCode: c.RelocateExitCode, backoffLimit: DefaultControllerBackoffLimit}
	switch {
	case len(c.Pod.Spec.Containers) == 0:
		add("the pod has no container")
	case set.container == "":
		set.container = c.Pod.Spec.Containers[0].Name
	case !slices.ContainsFunc(c.Pod.Spec.Containers, func(ct corev1.Container) bool { return ct.Name == set.container }):
		add("the pod has no container %q", set.container)
	}
	if set.exitCode == 0 {
		set.exitCode = recovery.DefaultRelocateExitCode
	}
	if set.exitCode < 1 || set.exitCode > 255 {
		add("relocate exit code %d: want 1 to 255 (0: 143)", set.exitCode)
	}
	if c.BackoffLimit != nil {
		set.backoffLimit = *c.BackoffLimit
	}
	if set.backoffLimit < 0 {
		add("backoff limit %d is negative", set.backoffLimit)
	}
	if c.Owner != nil && (c.Owner.Kind == "Pod" || c.Owner.Kind == "" || c.Owner.Name == "" || c.Owner.UID == "") {
		add("owner %s %q: want a kind that outlives a controller pod, with a name and a uid (a Pod's Job is deleted with the pod a relocation replaces)", c.Owner.Kind, c.Owner.Name)
	}
	return set, problems
}

// checkNames returns the problems with the names c gives: the namespace,
// the Job's name, the execution, its status and the extra labels.
func (c ControllerJob) checkNames() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		add("namespace %q: %s", c.Namespace, strings.Join(errs, "; "))
	}
	// The Job controller labels its pods with the Job's name, so the name
	// must be a valid label value as well as a DNS subdomain.
	if errs := append(validation.IsDNS1123Subdomain(c.Name), validation.IsValidLabelValue(c.Name)...); len(errs) > 0 || c.Name == "" {
		add("name %q: %s", c.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(c.Execution); len(errs) > 0 || c.Execution == "" {
		add("execution %q must be a label value: %s", c.Execution, strings.Join(errs, "; "))
	}
	if err := storage.ValidateID(c.Execution); err != nil {
		add("execution: %v", err)
	}
	if _, ok := statusLabel(c.Status); !ok || c.Status == "" {
		add("status %q must be a label value", c.Status)
	}
	for k, v := range c.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			add("label %s=%s: %s", k, v, strings.Join(errs, "; "))
		}
		if k == ExecutionLabel || k == StatusLabel || k == RelocatableLabel {
			add("label %s is set by Build", k)
		}
	}
	return problems
}

// merge returns base with every entry of over set.
func merge(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// LabelJob sets the status and relocatable labels of the controller Job
// name from rec, so they follow the execution as the ConfigMap's do:
// `kubectl get jobs -l execfsm.io/status=relocating`. A status that is
// no label value, or a record without the flag, removes the label rather
// than leave a stale one. The Job's pods carry no status to update (see
// ControllerJob.Status).
func LabelJob(ctx context.Context, client kubernetes.Interface, namespace, name string, rec storage.Record) error {
	if client == nil {
		return errors.New("kube: LabelJob: nil client")
	}
	labels := map[string]*string{StatusLabel: nil, RelocatableLabel: nil}
	if v, ok := statusLabel(rec.Status); ok && v != "" {
		labels[StatusLabel] = &v
	}
	if v, ok := recovery.RecordedRestartability(rec); ok {
		s := strconv.FormatBool(bool(v))
		labels[RelocatableLabel] = &s
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := client.BatchV1().Jobs(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kube: label Job %s/%s: %w", namespace, name, err)
	}
	return nil
}

// JobFailure reports whether job has failed and why (its Failed
// condition's reason and message: BackoffLimitExceeded when controller
// crashes exhausted its limit, PodFailurePolicy, DeadlineExceeded). The
// cluster master fails the execution with it, when the Job's limit was
// reached before the execution's failover allowance and no controller is
// left to write the end (see the example).
func JobFailure(job *batchv1.Job) (string, bool) {
	if job == nil {
		return "", false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("controller Job %s failed: %s: %s", job.Name, c.Reason, c.Message), true
		}
	}
	return "", false
}
