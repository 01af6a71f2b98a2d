package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/storage"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

//go:embed trainingjob-crd.yaml
var crdYAML []byte

// namespace is where the demo's TrainingJobs live.
const namespace = "training"

// waitLong bounds every wait: far longer than any step takes (an OOM
// kill's restart waits out the Job controller's ten-second backoff), so
// a regression fails with a name instead of hanging.
const waitLong = 90 * time.Second

// leaseTTL is the operators' ownership of each TrainingJob: longer than
// the API server's restart, so the operator keeps what it drives.
const leaseTTL = 30 * time.Second

// cluster is what the demo plays against.
type cluster struct {
	cp       *kubetest.ControlPlane
	operator *rest.Config // the operators' user, bound to its Roles only
	jobs     dynamic.ResourceInterface
	store    *kube.Store // the records, read as an administrator
	kubelet  *kubelet
	phases   *phaseLog
	out      io.Writer
}

func demo(ctx context.Context, verbose bool, out io.Writer) (bool, error) {
	fmt.Fprintln(out, "starting kube-apiserver, etcd and kube-controller-manager (the Job controller, the garbage collector)")
	cp, err := kubetest.Start(kubetest.Options{Controllers: []string{"job", "garbagecollector"}})
	if err != nil {
		return false, err
	}
	defer cp.Stop()
	c, err := setUp(ctx, cp, out)
	if err != nil {
		return false, err
	}
	playing, stopPlaying := context.WithCancel(ctx)
	var played sync.WaitGroup
	played.Go(func() { c.kubelet.run(playing) })
	played.Go(func() { c.phases.watch(playing, c.jobs) })
	defer played.Wait()
	defer stopPlaying()

	g := &proc.Group{Echo: out}
	if !verbose {
		g.Show = shown
	}
	defer g.KillAll()
	operator := func(name string) (*proc.Child, error) {
		child, err := g.Start(name, "operator", operatorConfig{Host: c.operator.Host, CA: c.operator.CAData, Cert: c.operator.CertData,
			Key: c.operator.KeyData, Namespace: namespace, Holder: name, TTL: leaseTTL})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s started (pid %d)\n", name, child.PID())
		if _, err := child.Await(ctx, "leading", nil, waitLong); err != nil {
			return nil, fmt.Errorf("%s never led: %w", name, err)
		}
		return child, nil
	}
	a, err := operator("operator-a")
	if err != nil {
		return false, err
	}
	var failures []string
	for _, s := range []struct {
		name string
		run  func(context.Context, *cluster) error
	}{
		{"drain", drainScenario},
		{"oom", oomScenario},
		{"stop", stopScenario},
		{"restart", func(ctx context.Context, c *cluster) error { return restartScenario(ctx, c, a, operator) }},
	} {
		fmt.Fprintf(out, "\n== %s\n", s.name)
		if err := s.run(ctx, c); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			failures = append(failures, fmt.Sprintf("%s: %v", s.name, err))
			fmt.Fprintf(out, "FAIL %s: %v\n", s.name, err)
			continue
		}
		fmt.Fprintf(out, "PASS %s\n", s.name)
	}
	fmt.Fprintln(out, "\n$ kubectl get trainingjobs")
	if err := c.printTable(ctx); err != nil {
		return false, err
	}
	for _, f := range failures {
		fmt.Fprintln(out, "FAIL", f)
	}
	return len(failures) == 0, nil
}

// setUp installs the CRD and makes the namespace and the nodes.
func setUp(ctx context.Context, cp *kubetest.ControlPlane, out io.Writer) (*cluster, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
		return nil, fmt.Errorf("installing the TrainingJob CRD: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cp.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	operator, err := operatorUser(ctx, cp)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	store, err := kube.New(cp.Clientset, kube.Options{Namespace: namespace, Resource: &kube.Resource{
		Client: dyn, GroupVersionResource: trainingJobs, Kind: "TrainingJob", StatusPath: "status.phase"}})
	if err != nil {
		return nil, err
	}
	jobs := dyn.Resource(trainingJobs).Namespace(namespace)
	// The watch starts where this list ends: before the first job.
	list, err := jobs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	k := &kubelet{client: cp.Clientset, ns: namespace, nodes: nodeNames}
	if err := k.start(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "API server %s; CRD trainingjobs.ml.example.com; nodes %s, played by this demo\n", cp.Config.Host, strings.Join(nodeNames, ", "))
	return &cluster{cp: cp, operator: operator, jobs: jobs, store: store, kubelet: k,
		phases: &phaseLog{from: list.GetResourceVersion(), seen: map[string][]string{}}, out: out}, nil
}

// operatorUser is the user the operators run as, allowed what the
// store's shipped Roles allow over TrainingJobs (kube.ResourceMasterRole
// and kube.ResourceControllerRole: the resources, their status, the
// Leases, the epoch floor, the table, Events) and what its Sync does
// besides: delete the Jobs it made, read their pods. Nothing else: a
// request the operator makes beyond them fails the demo.
func operatorUser(ctx context.Context, cp *kubetest.ControlPlane) (*rest.Config, error) {
	const name = "trainingjob-operator"
	user, err := cp.AddUser(name)
	if err != nil {
		return nil, err
	}
	own := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	}}
	for _, role := range []*rbacv1.Role{kube.ResourceMasterRole(namespace, trainingJobs), kube.ResourceControllerRole(namespace, trainingJobs), own} {
		if err := cp.Grant(ctx, name, role); err != nil {
			return nil, err
		}
	}
	return user, nil
}

// drainScenario: the node under a running job is drained; the job
// relocates to the other node, uncounted, and finishes there.
func drainScenario(ctx context.Context, c *cluster) error {
	const job = "resnet"
	first, err := c.submitAndRun(ctx, job, 3)
	if err != nil {
		return err
	}
	node := first.Spec.NodeName
	fmt.Fprintf(c.out, "$ kubectl drain %s\n", node)
	if err := c.kubelet.drain(ctx, node); err != nil {
		return err
	}
	second, err := c.runningPod(ctx, job, first.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s resumed in pod %s on %s\n", job, second.Name, second.Spec.NodeName)
	if err := c.kubelet.cordon(ctx, node, false); err != nil {
		return err
	}
	if err := c.kubelet.exit(ctx, second.Name, 0, "Completed"); err != nil {
		return err
	}
	return c.expect(ctx, job, "Pending", "Running", "Relocating", "Running", "Succeeded")
}

// oomScenario: the pod is OOM-killed twice; the first restart is within
// maxRetry 2, the second is not.
func oomScenario(ctx context.Context, c *cluster) error {
	const job = "bert"
	pod, err := c.submitAndRun(ctx, job, 2)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "pod %s is OOM-killed\n", pod.Name)
	if err := c.kubelet.exit(ctx, pod.Name, 137, "OOMKilled"); err != nil {
		return err
	}
	next, err := c.runningPod(ctx, job, pod.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%s restarted in pod %s; it is OOM-killed too\n", job, next.Name)
	if err := c.kubelet.exit(ctx, next.Name, 137, "OOMKilled"); err != nil {
		return err
	}
	return c.expect(ctx, job, "Pending", "Running", "Restarting", "Pending", "Running", "Restarting", "Failed")
}

// stopScenario: the user asks for a stop in the spec; the operator
// deletes the Job, and the job is stopped once its pod is gone.
func stopScenario(ctx context.Context, c *cluster) error {
	const job = "gpt"
	if _, err := c.submitAndRun(ctx, job, 3); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "$ kubectl patch trainingjob %s --type merge -p '{\"spec\":{\"stop\":true}}'\n", job)
	if _, err := c.jobs.Patch(ctx, job, types.MergePatchType, []byte(`{"spec":{"stop":true}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := c.expect(ctx, job, "Pending", "Running", "Stopping", "Stopped"); err != nil {
		return err
	}
	pods, err := c.cp.Clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("stopped with %d pods left", len(pods.Items))
	}
	return nil
}

// restartScenario: the API server restarts under a running job, and
// the operator runs a job submitted after it; then the operator is
// replaced, handing both over as they are; the next one finishes them.
func restartScenario(ctx context.Context, c *cluster, a *proc.Child, operator func(string) (*proc.Child, error)) error {
	jobs := []string{"mnist", "vit"}
	mnist, err := c.submitAndRun(ctx, jobs[0], 3)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, "kube-apiserver restarts")
	if err := c.cp.RestartAPIServer(ctx); err != nil {
		return err
	}
	vit, err := c.submitAndRun(ctx, jobs[1], 3)
	if err != nil {
		return err
	}
	before := map[string]storage.Record{}
	for _, job := range jobs {
		if before[job], err = c.store.Get(ctx, job); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.out, "operator-a is sent SIGTERM")
	if err := a.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	exit, err := a.Wait(ctx, waitLong)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "operator-a exited: %s\n", exit)
	if exit.Code != 0 {
		return fmt.Errorf("operator-a exited %s, want 0", exit)
	}
	for _, job := range jobs {
		handed, err := c.store.Get(ctx, job)
		if err != nil {
			return err
		}
		if handed.Revision != before[job].Revision || handed.Status != "Running" {
			return fmt.Errorf("the hand-over wrote %s %s (at %d, was %s at %d)", job, handed.Status, handed.Revision, before[job].Status, before[job].Revision)
		}
	}
	if _, err := operator("operator-b"); err != nil {
		return err
	}
	for i, pod := range []*corev1.Pod{mnist, vit} {
		if err := c.heldBy(ctx, jobs[i], "operator-b"); err != nil {
			return err
		}
		if err := c.kubelet.exit(ctx, pod.Name, 0, "Completed"); err != nil {
			return err
		}
		if err := c.expect(ctx, jobs[i], "Pending", "Running", "Succeeded"); err != nil {
			return err
		}
	}
	return nil
}

// submitAndRun creates a TrainingJob as its user does (a spec, no
// status) and waits for it to run; it returns its pod.
func (c *cluster) submitAndRun(ctx context.Context, job string, maxRetry int) (*corev1.Pod, error) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "trainer:1", "maxRetry": int64(maxRetry)}}}
	u.SetAPIVersion(trainingJobs.GroupVersion().String())
	u.SetKind("TrainingJob")
	u.SetName(job)
	fmt.Fprintf(c.out, "$ kubectl create trainingjob %s (maxRetry %d)\n", job, maxRetry)
	if _, err := c.jobs.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	pod, err := c.runningPod(ctx, job, "")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "%s runs in pod %s on %s\n", job, pod.Name, pod.Spec.NodeName)
	return pod, nil
}

// runningPod waits until job is Running in a pod other than not, and
// returns that pod.
func (c *cluster) runningPod(ctx context.Context, job, not string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := c.await(ctx, job+" running in a new pod", func() (bool, error) {
		rec, err := c.store.Get(ctx, job)
		if errors.Is(err, storage.ErrNotFound) || err == nil && (rec.Status != "Running" || rec.Meta[podLabel] == not) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		pod, err = c.cp.Clientset.CoreV1().Pods(namespace).Get(ctx, rec.Meta[podLabel], metav1.GetOptions{})
		return err == nil, err
	})
	return pod, err
}

// heldBy waits until holder owns job.
func (c *cluster) heldBy(ctx context.Context, job, holder string) error {
	return c.await(ctx, job+" held by "+holder, func() (bool, error) {
		claim, held, err := c.store.Held(ctx, job)
		return held && claim.Owner == holder, err
	})
}

// expect waits until job's trail has moved through phases, in order, to
// the last, and requires the watch to have shown the same.
func (c *cluster) expect(ctx context.Context, job string, phases ...string) error {
	var got []string
	err := c.await(ctx, fmt.Sprintf("%s to end %s", job, phases[len(phases)-1]), func() (bool, error) {
		rec, err := c.store.Get(ctx, job)
		if err != nil {
			return false, err
		}
		got = moves(rec)
		return rec.Status == phases[len(phases)-1], nil
	})
	if err != nil {
		return fmt.Errorf("%w; its trail: %s", err, strings.Join(got, " → "))
	}
	rec, err := c.store.Get(ctx, job)
	if err != nil {
		return err
	}
	for _, e := range rec.History.Entries() {
		if e.From != e.To {
			fmt.Fprintf(c.out, "  %-10s → %-10s %s (%s)\n", e.From, e.To, e.Reason, e.Actor)
		}
	}
	if !slices.Equal(got, phases) {
		return fmt.Errorf("trail %s, want %s", strings.Join(got, " → "), strings.Join(phases, " → "))
	}
	err = c.await(ctx, job+"'s last phase watched", func() (bool, error) { return slices.Equal(c.phases.of(job), phases), nil })
	if err != nil {
		return fmt.Errorf("kubectl get -w showed %s, its trail is %s", strings.Join(c.phases.of(job), " → "), strings.Join(phases, " → "))
	}
	return nil
}

// moves are the phases rec's trail went through, from the first.
func moves(rec storage.Record) []string {
	var phases []string
	for _, e := range rec.History.Entries() {
		if len(phases) == 0 {
			phases = append(phases, e.To)
		} else if e.From != e.To {
			phases = append(phases, e.To)
		}
	}
	return phases
}

// await polls done until it is true, bounded by waitLong.
func (c *cluster) await(ctx context.Context, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := done()
		if ok && err == nil {
			return nil
		}
		last = err
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		}
	}
}

// printTable prints the TrainingJobs as `kubectl get` does: the API
// server's Table, with the CRD's printer columns.
func (c *cluster) printTable(ctx context.Context) error {
	raw, err := c.cp.Clientset.CoreV1().RESTClient().Get().AbsPath("/apis", trainingJobs.Group, trainingJobs.Version, "namespaces", namespace, trainingJobs.Resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return err
	}
	var table metav1.Table
	if err := yaml.Unmarshal(raw, &table); err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 3, ' ', 0)
	var header []string
	for _, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			header = append(header, strings.ToUpper(col.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for i, cell := range row.Cells {
			if table.ColumnDefinitions[i].Priority == 0 {
				cells = append(cells, fmt.Sprint(cell))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// phaseLog is what `kubectl get trainingjobs -w` showed: each job's
// phases in the order the API server sent them, a phase shown twice in
// a row once.
type phaseLog struct {
	from string // the resourceVersion the watch starts from

	mu   sync.Mutex
	seen map[string][]string
}

// watch records every phase until ctx ends. A watch the API server
// ends for good (its restart forgets the versions before it: 410 Gone)
// is followed by a list, whose phases are recorded, and a watch from it,
// as kubectl get -w does.
func (l *phaseLog) watch(ctx context.Context, jobs dynamic.ResourceInterface) {
	// The retries during a restart are expected: not for stderr.
	ctx = klog.NewContext(ctx, logr.Discard())
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return jobs.Watch(ctx, opts)
	}}
	from := l.from
	for ctx.Err() == nil {
		if from == "" {
			list, err := jobs.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // the API server is restarting
				continue
			}
			for i := range list.Items {
				l.record(&list.Items[i])
			}
			from = list.GetResourceVersion()
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, from, lw)
		if err != nil {
			return
		}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				l.record(u)
			}
		}
		w.Stop()
		from = ""
	}
}

// record records u's phase, unless it is the last recorded.
func (l *phaseLog) record(u *unstructured.Unstructured) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	l.mu.Lock()
	defer l.mu.Unlock()
	if seen := l.seen[u.GetName()]; phase != "" && (len(seen) == 0 || seen[len(seen)-1] != phase) {
		l.seen[u.GetName()] = append(seen, phase)
	}
}

func (l *phaseLog) of(job string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[job])
}
