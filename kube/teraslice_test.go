package kube_test

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// The Teraslice case on Kubernetes, with real processes: the platform
// deletes the controller's pod (SIGTERM), which writes relocating and
// exits 143; a new pod takes the Lease and resumes where it was. Then
// OOM kills (SIGKILL): each restart waits for the dead pod's Lease to
// expire, resumes within the failover allowance, and the one past the allowance
// fails the execution instead of crash-looping.
func TestTerasliceControllerRelocatesAndSurvivesOOMWithinItsBudgetOnKubernetes(t *testing.T) {
	ns := namespace(t)
	s := newStoreIn(t, ns)
	exec0, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-42", transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = exec0.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	for _, to := range []state.Status{state.Scheduling, state.Initializing} {
		_, err := exec0.Fire(bg, to, "cluster master")
		require.NoError(t, err)
	}

	c1, out1 := pod(t, ns, "ex-42", "controller-1")
	expect(t, out1, "verdict start initializing")
	expect(t, out1, "running")
	require.NoError(t, c1.Process.Signal(syscall.SIGTERM)) // kubectl delete pod
	expect(t, out1, "terminate relocate")
	requireExit(t, c1, 143)
	cur, rec, err := exec0.Load(bg)
	require.NoError(t, err)
	require.Equal(t, state.Relocating, cur)
	require.Equal(t, "running", rec.Previous)

	c2, out2 := pod(t, ns, "ex-42", "controller-2")
	expect(t, out2, "lease 2")
	expect(t, out2, "verdict resume running")
	expect(t, out2, "running")

	// OOM kills, budget 2: two restarts resume, the third fails.
	victim := c2
	for k, name := range []string{"controller-3", "controller-4", "controller-5"} {
		require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
		_ = victim.Wait()
		next, out := pod(t, ns, "ex-42", name)
		if k < 2 {
			expect(t, out, "verdict resume running")
			expect(t, out, "running")
			victim = next
			continue
		}
		expect(t, out, "verdict fail failed")
		requireExit(t, next, 0) // the outcome is in the record
	}
	cur, rec, err = exec0.Load(bg)
	require.NoError(t, err)
	require.Equal(t, state.Failed, cur)
	require.Contains(t, rec.Reason, "failovers spent")

	// The platform restarts it once more: refused at once, nothing written.
	again, out := pod(t, ns, "ex-42", "controller-6")
	expect(t, out, "starting")
	line := recv(t, out, "the refused controller's line after starting")
	require.True(t, strings.HasPrefix(line, "refused ") && strings.Contains(line, "invalid state: terminal"), "%q", line)
	requireExit(t, again, 0)
	_, after, err := exec0.Load(bg)
	require.NoError(t, err)
	require.Equal(t, rec.Revision, after.Revision)
}

func requireExit(t *testing.T, cmd *exec.Cmd, code int) {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if code == 0 {
		require.NoError(t, err)
		return
	}
	require.True(t, errors.As(err, &exit), "want exit %d, got %v (nil: exit 0)", code, err)
	require.Equal(t, code, exit.ExitCode())
}
