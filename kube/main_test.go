package kube_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var (
	// cfg and clientset are the API server's administrator's: what a
	// test plays (the platform, the kubelet, an operator with kubectl)
	// uses them, never the code under test.
	cfg          *rest.Config
	clientset    *kubernetes.Clientset
	controlPlane *kubetest.ControlPlane

	// The parts under test run as users bound only to the package's
	// Roles in each test's namespace (see namespace): the master to
	// MasterRole, controllers to ControllerRole, and storeClient, which
	// the conformance suites use as master and controller at once, to
	// both.
	masterCfg, controllerCfg, storeCfg *rest.Config
	masterClient, storeClient          *kubernetes.Clientset
)

// The users the parts under test run as.
const (
	masterUser     = "execfsm-test-master"
	controllerUser = "execfsm-test-controller"
	storeUser      = "execfsm-test-store"
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
	// The parallel tests wait on the API server and its controllers (a
	// Job's backoff, a lease running out), not on the CPU: eight at a
	// time instead of one a core took the package from 113 to 79 s on
	// two cores. A -parallel given on the command line wins.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", "8"); err != nil {
			panic(err)
		}
	}
	// Compact etcd every second (the default is five minutes) and serve
	// watches from etcd rather than the watch cache, so the tests meet
	// 410 Gone, which production watches meet after a while, within
	// seconds.
	// The real Job controller runs against it for the controller Job
	// tests, and the garbage collector, which deletes a record's Lease
	// with it; the tests play the kubelet.
	opts := kubetest.Options{APIServerFlags: map[string]string{"etcd-compaction-interval": "1s", "watch-cache": "false"},
		Controllers: []string{"job", "garbagecollector"}}
	opts.LeakCheck = true
	return kubetest.Main(m, opts, func(cp *kubetest.ControlPlane) {
		cfg, clientset, controlPlane = cp.Config, cp.Clientset, cp
		masterCfg, masterClient = user(cp, masterUser)
		controllerCfg, _ = user(cp, controllerUser)
		storeCfg, storeClient = user(cp, storeUser)
	})
}

// user makes a user of the control plane; nothing can run without them.
func user(cp *kubetest.ControlPlane, name string) (*rest.Config, *kubernetes.Clientset) {
	c, err := cp.AddUser(name)
	if err != nil {
		panic(err)
	}
	return c, kubernetes.NewForConfigOrDie(c)
}

var namespaces atomic.Int64

// namespace creates a fresh namespace for one test, with the package's
// Roles bound to the users the parts under test run as.
func namespace(t testing.TB) string {
	t.Helper()
	name := bareNamespace(t)
	grant(t, kube.MasterRole(name), masterUser, storeUser)
	grant(t, kube.ControllerRole(name), controllerUser, storeUser)
	return name
}

// grant binds role to users, and waits until the API server allows it.
func grant(t testing.TB, role *rbacv1.Role, users ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range users {
		require.NoError(t, controlPlane.Grant(ctx, u, role))
	}
}

// bareNamespace creates a fresh namespace where nobody but the
// administrator may do anything.
func bareNamespace(t testing.TB) string {
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
