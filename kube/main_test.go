package kube_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var (
	cfg          *rest.Config
	clientset    *kubernetes.Clientset
	controlPlane *kubetest.ControlPlane
)

// TestMain starts a real kube-apiserver and etcd with envtest. Their
// binaries come from KUBEBUILDER_ASSETS or, when that is unset, from
// hack/test-assets.sh, which builds them once and caches them. If they
// cannot be had, every test of the package fails, saying why: they are
// never skipped.
func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Compact etcd every second (the default is five minutes) and serve
	// watches from etcd rather than the watch cache, so the tests meet
	// 410 Gone, which production watches meet after a while, within
	// seconds.
	// The real Job controller runs against it for the controller Job
	// tests; the tests play the kubelet.
	opts := kubetest.Options{APIServerFlags: map[string]string{"etcd-compaction-interval": "1s", "watch-cache": "false"},
		Controllers: []string{"job"}}
	return kubetest.Main(m, opts, func(cp *kubetest.ControlPlane) { cfg, clientset, controlPlane = cp.Config, cp.Clientset, cp })
}

var namespaces atomic.Int64

// namespace creates a fresh namespace for one test.
func namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d", os.Getpid(), namespaces.Add(1))
	_, err := clientset.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

const childEnv = "EXECFSM_KUBE_CHILD"

// decider is the Decider of roles and p, for a test.
func decider[S comparable](t testing.TB, roles *recovery.Roles[S], p recovery.Policy) *recovery.Decider[S] {
	t.Helper()
	d, err := recovery.NewDecider(roles, p)
	require.NoError(t, err)
	return d
}
