package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var (
	cfg       *rest.Config
	clientset *kubernetes.Clientset
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
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		var out, errOut bytes.Buffer
		cmd := exec.Command("hack/test-assets.sh")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "kube tests: the kube-apiserver and etcd binaries could not be had (%v); hack/test-assets.sh said:\n%s\n", err, errOut.String())
			return 1
		}
		assets = strings.TrimSpace(out.String())
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	// Compact etcd every second (the default is five minutes) and serve
	// watches from etcd rather than the watch cache, so the tests meet
	// 410 Gone, which production watches meet after a while, within
	// seconds.
	apiserver := env.ControlPlane.GetAPIServer().Configure()
	apiserver.Set("etcd-compaction-interval", "1s")
	apiserver.Set("watch-cache", "false")
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "kube tests: envtest could not start kube-apiserver and etcd from %s: %v\n", assets, err)
		return 1
	}
	if clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kube tests: stopping envtest:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext.func1"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*clientConnReadLoop).run")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
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
