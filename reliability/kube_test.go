package reliability_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kubePlane is the control plane the kube store's figures run against,
// started by the first test or benchmark that needs it (the rest of the
// suite does not) and stopped by TestMain.
var kubePlane struct {
	once sync.Once
	cp   *kubetest.ControlPlane
	user *rest.Config // kubeUser's
	err  error
}

// kubeUser is the user the kube stores run as: bound to the master's
// and the controller's Roles in each namespace, nothing else, so its
// requests are classified by priority and fairness as a controller's
// are (the administrator's would be exempt).
const kubeUser = "execfsm-reliability"

var kubeNamespaces atomic.Int64

// kubeSpec is what a child process needs to reach a kube store.
type kubeSpec struct {
	Host      string `json:"host"`
	CAData    []byte `json:"ca"`
	CertData  []byte `json:"cert"`
	KeyData   []byte `json:"key"`
	Namespace string `json:"namespace"`
	// Resource keeps the records in LoadJobs, a custom resource
	// (kube.Options.Resource), instead of ConfigMaps.
	Resource bool `json:"resource,omitempty"`
}

// loadJobs are the custom resources of testdata/loadjob-crd.yaml.
var loadJobs = schema.GroupVersionResource{Group: "reliability.execfsm.test", Version: "v1", Resource: "loadjobs"}

// newLoadJob is the LoadJob a record's Create makes when there is none.
func newLoadJob(id string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetAPIVersion(loadJobs.GroupVersion().String())
	u.SetKind("LoadJob")
	return u, nil
}

// config is the user's client config, with no client-side rate limit:
// what is measured is the store and the API server, not client-go's
// default of 5 requests a second (docs/kubernetes.md says what to set).
func (k kubeSpec) config() *rest.Config {
	return &rest.Config{Host: k.Host, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.CAData, CertData: k.CertData, KeyData: k.KeyData}}
}

func (k kubeSpec) store() (*kube.Store, error) {
	client, err := kubernetes.NewForConfig(k.config())
	if err != nil {
		return nil, err
	}
	opts := kube.Options{Namespace: k.Namespace}
	if k.Resource {
		dyn, err := dynamic.NewForConfig(k.config())
		if err != nil {
			return nil, err
		}
		opts.Resource = &kube.Resource{Client: dyn, GroupVersionResource: loadJobs, Kind: "LoadJob",
			StatusPath: "status.phase", New: newLoadJob}
	}
	return kube.New(client, opts)
}

// kubeStore returns a kube store of ConfigMaps in a namespace of its
// own on the shared control plane, and how a child process reaches it.
func kubeStore(tb testing.TB) (*kube.Store, kubeSpec) { tb.Helper(); return kubeStoreOf(tb, false) }

// kubeResourceStore is kubeStore over LoadJobs, a custom resource.
func kubeResourceStore(tb testing.TB) (*kube.Store, kubeSpec) {
	tb.Helper()
	return kubeStoreOf(tb, true)
}

func kubeStoreOf(tb testing.TB, resource bool) (*kube.Store, kubeSpec) {
	tb.Helper()
	kubePlane.once.Do(func() {
		kubePlane.cp, kubePlane.err = kubetest.Start(kubetest.Options{})
		if kubePlane.err == nil {
			kubePlane.user, kubePlane.err = kubePlane.cp.AddUser(kubeUser)
		}
		if kubePlane.err == nil {
			_, kubePlane.err = envtest.InstallCRDs(kubePlane.cp.Config, envtest.CRDInstallOptions{
				Paths: []string{"testdata/loadjob-crd.yaml"}, ErrorIfPathMissing: true})
		}
	})
	require.NoError(tb, kubePlane.err, "the kube figures need a control plane")
	cp := kubePlane.cp
	ns := fmt.Sprintf("rel-%d-%d", os.Getpid(), kubeNamespaces.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cp.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	master, controller := kube.MasterRole(ns), kube.ControllerRole(ns)
	if resource {
		master, controller = kube.ResourceMasterRole(ns, loadJobs), kube.ResourceControllerRole(ns, loadJobs)
	}
	require.NoError(tb, cp.Grant(ctx, kubeUser, master))
	require.NoError(tb, cp.Grant(ctx, kubeUser, controller))
	spec := kubeSpec{Host: kubePlane.user.Host, CAData: kubePlane.user.CAData, CertData: kubePlane.user.CertData,
		KeyData: kubePlane.user.KeyData, Namespace: ns, Resource: resource}
	s, err := spec.store()
	require.NoError(tb, err)
	return s, spec
}

// stopKubePlane stops the control plane if anything started it.
func stopKubePlane() error {
	if kubePlane.cp == nil {
		return nil
	}
	return kubePlane.cp.Stop()
}
