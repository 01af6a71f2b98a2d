// Package kubetest starts a real Kubernetes control plane (kube-apiserver
// and etcd, through controller-runtime's envtest) for tests, with the
// binaries from KUBEBUILDER_ASSETS or, when that is unset, from the kube
// module's hack/test-assets.sh, which builds them once and caches them.
// A package's TestMain starts it with [Main] (see the example).
package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure [Start].
type Options struct {
	// AssetsScript is the path of hack/test-assets.sh, run when
	// KUBEBUILDER_ASSETS is unset. Empty: the kube module's, found from
	// the working directory of a test in the kube module or in a sibling
	// module of the repository.
	AssetsScript string
	// APIServerFlags are set on kube-apiserver, such as
	// "etcd-compaction-interval": "1s".
	APIServerFlags map[string]string
	// Controllers, if any, are run by a real kube-controller-manager
	// (from the same assets) against the API server, such as "job" for
	// the Job controller. Nothing plays the kubelet or the scheduler: a
	// test does, through the API.
	Controllers []string
}

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	Config    *rest.Config
	Clientset *kubernetes.Clientset
	env       *envtest.Environment
	kcm       *controllerManager // nil without Options.Controllers
}

// Start starts a control plane. Its error says why it could not, and
// what the assets script printed.
func Start(opts Options) (*ControlPlane, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		script := opts.AssetsScript
		if script == "" {
			for _, p := range []string{"hack/test-assets.sh", "../kube/hack/test-assets.sh", "../../kube/hack/test-assets.sh"} {
				if _, err := os.Stat(p); err == nil {
					script = p
					break
				}
			}
		}
		if script == "" {
			return nil, errors.New("kubetest: KUBEBUILDER_ASSETS is unset and kube/hack/test-assets.sh was not found")
		}
		var out, errOut bytes.Buffer
		cmd := exec.Command(script)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("kubetest: the kube-apiserver and etcd binaries could not be had (%v); %s said:\n%s", err, script, errOut.String())
		}
		assets = strings.TrimSpace(out.String())
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	apiserver := env.ControlPlane.GetAPIServer().Configure()
	for k, v := range opts.APIServerFlags {
		apiserver.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("kubetest: envtest could not start kube-apiserver and etcd from %s: %w", assets, err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	cp := &ControlPlane{Config: cfg, Clientset: clientset, env: env}
	if len(opts.Controllers) > 0 {
		if cp.kcm, err = startControllerManager(env, assets, opts.Controllers); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	return cp, nil
}

// Stop stops the control plane.
func (c *ControlPlane) Stop() error {
	var errs []error
	if c.kcm != nil {
		errs = append(errs, c.kcm.stop())
	}
	if err := c.env.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("kubetest: stopping envtest: %w", err))
	}
	return errors.Join(errs...)
}

// LingeringGoroutines are the goroutines client-go leaves idling after a
// control plane stops, for goleak.
func LingeringGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*clientConnReadLoop).run"),
	}
}

// Main starts a control plane, hands it to started, runs the tests, stops
// it and checks for leaked goroutines; it returns the exit code for
// os.Exit. If the control plane cannot start, every test fails (exit code
// 1, saying why on stderr): they are never skipped.
func Main(m *testing.M, opts Options, started func(*ControlPlane)) int {
	cp, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started(cp)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(LingeringGoroutines()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
