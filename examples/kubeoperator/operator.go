package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/ctrlruntime"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// trainingJobs are the operator's custom resources.
var trainingJobs = schema.GroupVersionResource{Group: "ml.example.com", Version: "v1", Resource: "trainingjobs"}

// operatorConfig is what the demo tells an operator process: where the
// API server is and who it is.
type operatorConfig struct {
	Host      string        `json:"host"`
	CA        []byte        `json:"ca"`
	Cert      []byte        `json:"cert"`
	Key       []byte        `json:"key"`
	Namespace string        `json:"namespace"`
	Holder    string        `json:"holder"`
	TTL       time.Duration `json:"ttl"`
}

func (c operatorConfig) rest() *rest.Config {
	return &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA, CertData: c.Cert, KeyData: c.Key}}
}

// podLabel names the pod a running TrainingJob runs in, in its record.
const podLabel = "pod"

// runOperator is one operator process: a controller-runtime manager,
// leader-elected, driving every TrainingJob of its namespace until a
// SIGTERM, when it hands them over.
func runOperator(raw json.RawMessage) int {
	var c operatorConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := operate(c); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

func operate(c operatorConfig) error {
	logf.SetLogger(logr.Discard()) // what it does is in the resources and their Events
	roles, err := lifecycle()
	if err != nil {
		return err
	}
	cfg := c.rest()
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	store, err := kube.New(clientset, kube.Options{Namespace: c.Namespace, Resource: &kube.Resource{
		Client: dyn, GroupVersionResource: trainingJobs, Kind: "TrainingJob", StatusPath: "status.phase",
		Progress: kube.ProgressOf(roles)}})
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{c.Namespace: {}}},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              "trainingjob-operator",
		LeaderElectionNamespace:       c.Namespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	op := &operator{client: mgr.GetClient(), api: mgr.GetAPIReader(), ns: c.Namespace}
	err = ctrlruntime.Drive(mgr, run.ManagerConfig[Phase]{
		Roles: roles, Store: store, Table: "trainingjobs", Holder: c.Holder, HandOver: true, TTL: c.TTL,
		Sync: op.sync, Logger: slog.New(slog.NewTextHandler(os.Stdout, nil)),
	}, ctrlruntime.Options[Phase]{Owns: []client.Object{&batchv1.Job{}}, First: first})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		select {
		case <-mgr.Elected():
			fmt.Println("leading")
			proc.Emit("leading")
		case <-ctx.Done():
		}
	}()
	return mgr.Start(ctx)
}

// first is a TrainingJob's first record: Pending, its restarts limited
// by its spec's maxRetry (maxRetry-1 restarts, as Volcano counts).
func first(u *unstructured.Unstructured) (transition.Update[Phase], error) {
	maxRetry, _, err := unstructured.NestedInt64(u.Object, "spec", "maxRetry")
	if err != nil {
		return transition.Update[Phase]{}, err
	}
	return transition.To(Pending).Because("submitted").Set(recovery.LimitKey(restarts), fmt.Sprint(max(maxRetry, 1)-1)), nil
}

// operator is the work on each TrainingJob: a batch/v1 Job runs it, and
// its phase follows the Job's pod.
type operator struct {
	client client.Client // writes, and reads of what the cache holds
	api    client.Reader // reads of what must be fresh: the pods, the spec
	ns     string
}

// spec is what the operator reads of a TrainingJob's spec.
type spec struct {
	image    string
	maxRetry int64
	stop     bool
}

// sync brings one TrainingJob's phase in line with its Job's pod, or the
// Job in line with its phase.
func (o *operator) sync(ctx context.Context, job *transition.Persisted[Phase], phase Phase) (run.Step, error) {
	owner, s, err := o.spec(ctx, job.ID())
	if err != nil {
		return run.Step{}, err
	}
	if s.stop && phase != Stopping {
		_, err := job.Fire(ctx, Stopping, "its spec asks it to stop")
		return run.Step{}, err
	}
	_, rec, err := job.Load(ctx)
	if err != nil {
		return run.Step{}, err
	}
	pods, err := o.pods(ctx, job.ID())
	if err != nil {
		return run.Step{}, err
	}
	if phase == Stopping {
		return o.stop(ctx, job.ID(), pods)
	}
	if err := o.ensureJob(ctx, owner, s); err != nil {
		return run.Step{}, err
	}
	mine, found := pods[rec.Meta[podLabel]]
	switch phase {
	case Pending, Relocating:
		for _, p := range pods {
			if running(p) && p.Name != rec.Meta[podLabel] {
				return run.Step{}, move(ctx, job, Running, fmt.Sprintf("pod %s runs on %s", p.Name, p.Spec.NodeName), p.Name)
			}
		}
	case Running:
		switch {
		case found && mine.Status.Phase == corev1.PodSucceeded:
			return run.End(recovery.Ending{Finished: true}), nil
		case !found || disrupted(mine):
			return run.Step{}, move(ctx, job, Relocating, fmt.Sprintf("pod %s was evicted from %s", rec.Meta[podLabel], nodeOf(mine)), "")
		case mine.Status.Phase == corev1.PodFailed:
			return run.Step{}, move(ctx, job, Restarting, fmt.Sprintf("pod %s %s", mine.Name, failure(mine)), "")
		}
	case Restarting:
		if !found || mine.Status.Phase == corev1.PodFailed {
			return run.Step{}, move(ctx, job, Pending, "the Job starts another pod", "")
		}
	}
	return run.Step{}, nil
}

// move moves job to phase, naming the pod it runs in (keeping the one it
// ran in when pod is "").
func move(ctx context.Context, job *transition.Persisted[Phase], phase Phase, reason, pod string) error {
	_, _, err := job.Apply(ctx, func(Phase, storage.Record) (transition.Update[Phase], error) {
		u := transition.To(phase).Because(reason)
		if pod != "" {
			u = u.Set(podLabel, pod)
		}
		return u, nil
	})
	return err
}

// spec reads the TrainingJob.
func (o *operator) spec(ctx context.Context, id string) (*unstructured.Unstructured, spec, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(trainingJobs.GroupVersion().WithKind("TrainingJob"))
	if err := o.api.Get(ctx, client.ObjectKey{Namespace: o.ns, Name: id}, u); err != nil {
		return nil, spec{}, err
	}
	var s spec
	s.image, _, _ = unstructured.NestedString(u.Object, "spec", "image")
	s.maxRetry, _, _ = unstructured.NestedInt64(u.Object, "spec", "maxRetry")
	s.stop, _, _ = unstructured.NestedBool(u.Object, "spec", "stop")
	return u, s, nil
}

// pods are the pods of id's Job, by name, read from the API server: the
// Job's change that triggered this sync came after its pods'.
func (o *operator) pods(ctx context.Context, id string) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := o.api.List(ctx, &list, client.InNamespace(o.ns), client.MatchingLabels{batchv1.JobNameLabel: id}); err != nil {
		return nil, err
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods, nil
}

// ensureJob makes the TrainingJob's batch/v1 Job if it has none: one pod
// at a time, restarted by the Job controller after a failure up to
// maxRetry-1 times (as the record's budget counts them), and after an
// eviction without counting it.
func (o *operator) ensureJob(ctx context.Context, owner *unstructured.Unstructured, s spec) error {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: owner.GetName()},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(max(s.maxRetry, 1) - 1)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "train", Image: s.image}},
			}},
		},
	}
	if err := controllerutil.SetControllerReference(owner, job, o.client.Scheme()); err != nil {
		return err
	}
	err := o.client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// stop deletes the Job and its pods; once they are gone the stop is over.
func (o *operator) stop(ctx context.Context, id string, pods map[string]*corev1.Pod) (run.Step, error) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: id}}
	err := o.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return run.Step{}, err
	case len(pods) > 0:
		return run.After(200 * time.Millisecond), nil // the pods are being deleted
	}
	return run.End(recovery.Ending{}), nil
}

// running reports whether p runs and is not being deleted.
func running(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
}

// disrupted reports whether p was evicted (a drain, a preemption): the
// API server marks it with the DisruptionTarget condition.
func disrupted(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// failure says how p's container ended: "was OOMKilled (exit 137)".
func failure(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("was %s (exit %d)", t.Reason, t.ExitCode)
		}
	}
	return "failed"
}

func nodeOf(p *corev1.Pod) string {
	if p == nil || p.Spec.NodeName == "" {
		return "its node"
	}
	return p.Spec.NodeName
}
