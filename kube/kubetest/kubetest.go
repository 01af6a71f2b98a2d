// Package kubetest starts a real Kubernetes control plane for tests:
// kube-apiserver and etcd through controller-runtime's envtest, and, if
// asked, a kube-controller-manager running some of its controllers (the
// Job controller, the garbage collector). Nothing plays the kubelet or the
// scheduler: a test does, through the API. A package's TestMain starts it
// with [Main] (see the example).
//
// # The binaries
//
// They come from the directory KUBEBUILDER_ASSETS names, as envtest's own
// users set it (`setup-envtest use -p path` prints one, without
// kube-controller-manager). When it is unset, kubetest runs the kube
// module's hack/test-assets.sh (found beside this package's source, so
// from the module cache too: a test in your own module needs nothing
// else), which builds kube-apiserver, kube-controller-manager and etcd
// from the Go module proxy once per machine and caches them under
// ~/.cache/execfsm/kube-assets ($EXECFSM_KUBE_ASSETS): about 9 minutes on
// 2 cores the first time, nothing after. Only the Go toolchain is needed.
//
// # Users, restarts, leaks
//
// The API server authorizes with RBAC. [ControlPlane.Config] is its
// administrator (group system:masters); [ControlPlane.AddUser] makes a
// user with no permission but what a test grants it
// ([ControlPlane.Grant]), to run code as the Roles it ships would let it. [ControlPlane.RestartAPIServer] stops
// and starts kube-apiserver on the same address and certificates, with
// etcd and everything stored kept: clients see it go away and come back.
// Main checks for leaked goroutines only when asked ([Options.LeakCheck]).
package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure [Start].
type Options struct {
	// AssetsScript is a script that prints the directory of the
	// binaries, run with bash when KUBEBUILDER_ASSETS is unset. Empty:
	// the kube module's hack/test-assets.sh, beside this package.
	AssetsScript string
	// APIServerFlags are set on kube-apiserver, such as
	// "etcd-compaction-interval": "1s".
	APIServerFlags map[string]string
	// Controllers, if any, are run by a real kube-controller-manager
	// (from the same assets) against the API server, such as "job" for
	// the Job controller. Nothing plays the kubelet or the scheduler: a
	// test does, through the API.
	Controllers []string
	// LeakCheck makes Main fail a package whose tests all passed if
	// goroutines are left running after the control plane stopped,
	// ignoring those client-go leaves idling (LingeringGoroutines).
	LeakCheck bool
}

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	// Config and Clientset are the API server's administrator's: group
	// system:masters, allowed everything.
	Config    *rest.Config
	Clientset *kubernetes.Clientset
	env       *envtest.Environment
	certDir   string             // the API server's certificates, kept across restarts
	kcm       *controllerManager // nil without Options.Controllers
	mu        sync.Mutex         // serialises restarts and users
}

// Start starts a control plane. Its error says why it could not, and
// what the assets script printed.
func Start(opts Options) (*ControlPlane, error) {
	assets, err := assetsDir(opts.AssetsScript)
	if err != nil {
		return nil, err
	}
	// The API server's certificates live in a directory of ours, not one
	// envtest removes when it stops the server: a restart then serves the
	// same certificate on the same port, and every client's config still
	// works.
	certDir, err := os.MkdirTemp("", "kubetest-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	apiserver := env.ControlPlane.GetAPIServer().Configure()
	// Without it, a stop waits a minute for every open watch (its
	// default is to let them be, and the server's shutdown timeout ends
	// them): with it, watches are ended within two seconds, as clients
	// see in a real control-plane restart.
	apiserver.Set("shutdown-watch-termination-grace-period", "2s")
	for k, v := range opts.APIServerFlags {
		apiserver.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("kubetest: envtest could not start kube-apiserver and etcd from %s: %w", assets, err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	cp := &ControlPlane{Config: cfg, Clientset: clientset, env: env, certDir: certDir}
	if len(opts.Controllers) > 0 {
		if cp.kcm, err = startControllerManager(env, assets, opts.Controllers); err != nil {
			_ = env.Stop()
			_ = os.RemoveAll(certDir)
			return nil, err
		}
	}
	return cp, nil
}

// assetsDir is KUBEBUILDER_ASSETS, or what script (or the kube module's
// own) prints.
func assetsDir(script string) (string, error) {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		return assets, nil
	}
	if script == "" {
		// This file's directory, in the repository or in the module
		// cache: the script is part of the module.
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return "", errors.New("kubetest: KUBEBUILDER_ASSETS is unset and this package's source cannot be located to find hack/test-assets.sh")
		}
		script = filepath.Join(filepath.Dir(file), "..", "hack", "test-assets.sh")
	}
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("kubetest: KUBEBUILDER_ASSETS is unset and the assets script is missing: %w", err)
	}
	var out, errOut bytes.Buffer
	// With bash, not as a program: the module cache keeps no file
	// executable.
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubetest: the kube-apiserver and etcd binaries could not be had (%v); %s said:\n%s", err, script, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// AddUser returns the config of a new user of the API server, name in
// groups, authenticated by a client certificate. RBAC gives it nothing
// until a test binds it to a Role: the way to run code as the
// permissions it is meant to have.
func (c *ControlPlane) AddUser(name string, groups ...string) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, c.Config)
	if err != nil {
		return nil, fmt.Errorf("kubetest: user %s: %w", name, err)
	}
	return user.Config(), nil
}

// Grant creates role in its namespace and binds it to user (made with
// AddUser), then waits until the API server's authorizer allows every
// verb of every rule, so the user's next request is not refused by an
// authorizer that has not seen the binding yet. It returns ctx's error
// if that does not happen while ctx allows.
func (c *ControlPlane) Grant(ctx context.Context, user string, role *rbacv1.Role) error {
	if role == nil || role.Namespace == "" || role.Name == "" {
		return errors.New("kubetest: Grant: the role needs a name and a namespace")
	}
	if _, err := c.Clientset.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: Grant: %w", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := c.Clientset.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: Grant: %w", err)
	}
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					if err := c.awaitAllowed(ctx, user, role.Namespace, group, resource, verb); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// awaitAllowed asks the API server whether user may verb the resource,
// until it says yes.
func (c *ControlPlane) awaitAllowed(ctx context.Context, user, namespace, group, resource, verb string) error {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Group: group, Resource: resource, Verb: verb},
	}}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && got.Status.Allowed {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("kubetest: Grant: %s may not %s %s in %s yet (%v): %w", user, verb, resource, namespace, err, ctx.Err())
		}
	}
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// address with the same certificates; etcd and the controller manager
// run on, so nothing stored is lost. Clients see their requests fail and
// their watches end while it is down, as in a control-plane upgrade.
// Each step is bounded by envtest's timeouts (a minute to stop, two to
// start); ctx is checked between them.
func (c *ControlPlane) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	apiserver := c.env.ControlPlane.GetAPIServer()
	if err := apiserver.Stop(); err != nil {
		return fmt.Errorf("kubetest: stopping kube-apiserver: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kubetest: kube-apiserver stopped, not started again: %w", err)
	}
	if err := apiserver.Start(); err != nil {
		return fmt.Errorf("kubetest: starting kube-apiserver again: %w", err)
	}
	return nil
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
	if err := os.RemoveAll(c.certDir); err != nil {
		errs = append(errs, fmt.Errorf("kubetest: %w", err))
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

// Main starts a control plane, hands it to started, runs the tests and
// stops it (and, with Options.LeakCheck, checks for leaked goroutines);
// it returns the exit code for os.Exit. If the control plane cannot start, every test fails (exit code
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
	if code == 0 && opts.LeakCheck {
		if err := goleak.Find(LingeringGoroutines()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
