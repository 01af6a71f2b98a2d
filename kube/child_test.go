package kube_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// controllerSpec is what a child execution controller is told: how to
// reach the API server and which execution it runs.
type controllerSpec struct {
	Host      string `json:"host"`
	CA        []byte `json:"ca"`
	Cert      []byte `json:"cert"`
	Key       []byte `json:"key"`
	Namespace string `json:"namespace"`
	ID        string `json:"id"`
	Pod       string `json:"pod"`
	Budget    int    `json:"budget"`
}

const leaseDuration = 2 * time.Second

func runChild(raw string) int {
	var spec controllerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Println("error", err)
		return 2
	}
	code, err := controller(spec)
	if err != nil {
		fmt.Println("error", err)
		return 5
	}
	return code
}

type restartable struct{}

func (restartable) IsRestartable() bool { return true }

// controller is a Teraslice-style execution controller on Kubernetes: its
// status in a ConfigMap, its hold on the execution a Lease, startup
// decided by a recovery.Decider, SIGTERM too.
func controller(spec controllerSpec) (int, error) {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: spec.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: spec.CA, CertData: spec.Cert, KeyData: spec.Key}})
	if err != nil {
		return 0, err
	}
	store, err := kube.New(client, kube.Options{Namespace: spec.Namespace})
	if err != nil {
		return 0, err
	}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, spec.ID, transition.PersistedOptions{Actor: spec.Pod})
	if err != nil {
		return 0, err
	}
	// The store-agnostic startup path: acquire (waiting for a crashed
	// predecessor's Lease to expire), then decide.
	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: restartable{},
		Failovers: recovery.Allowance{Count: spec.Budget, Window: teraslice.Failovers.Window}})
	if err != nil {
		return 0, err
	}
	// A SIGTERM while it starts (waiting for a live holder's Lease) ends
	// the wait: the platform is moving a controller that has taken
	// nothing over yet.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	termedWhileStarting := false
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-terms:
			termedWhileStarting = true
			cancel()
		case <-waitCtx.Done():
		}
	}()
	fmt.Println("starting")
	v, err := decider.Start(waitCtx, exec, storage.Lease{Holder: spec.Pod, TTL: leaseDuration, Wait: true})
	cancel()
	<-watching
	if termedWhileStarting {
		a, err := decider.Terminate(ctx, exec, nil)
		if err != nil {
			return 0, err
		}
		fmt.Println("terminate", a.Kind)
		if a.ReleaseErr != nil {
			return 0, a.ReleaseErr
		}
		return a.ExitCode, nil
	}
	if errors.Is(err, recovery.ErrTerminalStatus) {
		// Exit 0: the outcome is in the record, and on a Job a non-zero
		// exit would only start another pod that refuses.
		fmt.Println("refused", err)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	own := exec.Ownership()
	fmt.Println("lease", exec.Claim().Epoch)
	fmt.Println("verdict", v.Decision, v.To)
	if v.Decision == recovery.DecisionFail {
		return 0, own.Release(ctx) // failed is written: exit 0, as for a refusal
	}
	if v.Decision == recovery.DecisionStart {
		if _, err := exec.Walk(ctx, state.Running, "slicer ready"); err != nil {
			return 0, err
		}
	}
	fmt.Println("running")
	<-terms // until the platform deletes the pod
	a, err := decider.Terminate(ctx, exec, nil)
	if err != nil {
		return 0, err
	}
	fmt.Println("terminate", a.Kind)
	if a.ReleaseErr != nil { // Decider.Terminate released the Lease on relocation
		return 0, a.ReleaseErr
	}
	if a.Kind == recovery.ActionShutdown {
		end, err := decider.End(ctx, exec, recovery.Ending{}, nil)
		if err != nil {
			return 0, err
		}
		fmt.Println("finish", end.To)
		return end.ExitCode, nil
	}
	return a.ExitCode, nil
}

// pod starts a controller process for execution id, as the platform
// starting a pod would.
func pod(t *testing.T, ns, id, name string) (*exec.Cmd, <-chan string) {
	t.Helper()
	return podWithBudget(t, ns, id, name, 2)
}

// podWithBudget is pod with a failover allowance of its own.
func podWithBudget(t *testing.T, ns, id, name string, budget int) (*exec.Cmd, <-chan string) {
	t.Helper()
	raw, err := json.Marshal(controllerSpec{Host: controllerCfg.Host, CA: controllerCfg.CAData, Cert: controllerCfg.CertData, Key: controllerCfg.KeyData,
		Namespace: ns, ID: id, Pod: name, Budget: budget})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// expect reads lines until one equal to want.
func expect(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the controller exited before saying %q", want)
			require.NotContains(t, l, "error", "controller said %q", l)
			if l == want {
				return
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no %q", want)
		}
	}
}
