package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controllerManager is a kube-controller-manager process running some of
// its controllers against the test API server.
type controllerManager struct {
	cmd  *exec.Cmd
	dir  string // kubeconfig and log
	done chan error
}

// kcmStopTimeout bounds how long a stopping controller manager may take
// before it is killed.
const kcmStopTimeout = 30 * time.Second

// startControllerManager starts kube-controller-manager from assets with
// only controllers enabled, as a user of group system:masters, without
// leader election and without serving anything.
func startControllerManager(env *envtest.Environment, assets string, controllers []string) (*controllerManager, error) {
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kubetest: %s is missing (kube/hack/test-assets.sh builds it): %w", bin, err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "kubetest-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("kubetest: a user for kube-controller-manager: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubetest: kube-controller-manager's kubeconfig: %w", err)
	}
	dir, err := os.MkdirTemp("", "kubetest-kcm-")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cfgPath, kubeconfig, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+cfgPath,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0", // serve nothing: no port to collide with
		"--v=2",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("kubetest: start %s: %w", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = log.Close() }()
	return &controllerManager{cmd: cmd, dir: dir, done: done}, nil
}

// stop ends the controller manager (SIGTERM, then SIGKILL past
// kcmStopTimeout) and removes its files; an early exit is an error that
// quotes the end of its log.
func (c *controllerManager) stop() error {
	select {
	case err := <-c.done:
		tail := c.logTail()
		_ = os.RemoveAll(c.dir)
		return fmt.Errorf("kubetest: kube-controller-manager exited during the tests (%v); its log ends:\n%s", err, tail)
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(kcmStopTimeout):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	return os.RemoveAll(c.dir)
}

// logTail is the end of the controller manager's log.
func (c *controllerManager) logTail() string {
	b, err := os.ReadFile(filepath.Join(c.dir, "kube-controller-manager.log"))
	if err != nil {
		return err.Error()
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// errNoControllerManager is the error of ControllerManagerLog on a
// control plane started without controllers.
var errNoControllerManager = errors.New("kubetest: no kube-controller-manager: Options.Controllers is empty")

// ControllerManagerLog returns the end of kube-controller-manager's log,
// for a test that fails to show what the controllers did.
func (c *ControlPlane) ControllerManagerLog() (string, error) {
	if c.kcm == nil {
		return "", errNoControllerManager
	}
	return c.kcm.logTail(), nil
}
