package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/proctest"
	"github.com/stretchr/testify/require"
)

// The test binary is also the controllers the supervisor starts.
func TestMain(m *testing.M) { proctest.Main(m, child) }

func TestEveryScenarioPassesOnEtcd(t *testing.T) {
	var out strings.Builder
	code := supervise([]string{"-store", "etcd"}, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	for _, name := range scenarioNames() {
		require.Contains(t, out.String(), "PASS "+name)
	}
	require.Contains(t, out.String(), "late write fenced", "the overlap's old controller was fenced")
	require.Contains(t, out.String(), "failovers spent")
	requireOwnershipMoves(t, out.String())
}

// requireOwnershipMoves checks the drain's timeline: each controller
// that started took the execution over at the next epoch, in one write
// with its verdict.
func requireOwnershipMoves(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"pod-1@1  initializing   (owner)      controller started for initializing execution",
		"pod-1@1  running      → relocating",
		"pod-2@2  relocating   → running      relocated controller took over; back to running",
		"final: completed, owner pod-2 at epoch 2",
	} {
		require.Contains(t, out, want)
	}
}

func TestBoltRunsOnlyTheScenariosWithoutOverlapAndSaysSo(t *testing.T) {
	var out strings.Builder
	code := supervise([]string{"-store", "bolt"}, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	require.Contains(t, out.String(), "PASS drain")
	require.Contains(t, out.String(), "PASS oom")
	for _, name := range []string{"stop", "race", "overlap"} {
		require.Contains(t, out.String(), "  "+name+strings.Repeat(" ", 8-len(name))+" SKIP")
	}
	require.Contains(t, out.String(), "bbolt locks its file to one process")
	requireOwnershipMoves(t, out.String())
}

func TestBadFlagsAreRefused(t *testing.T) {
	var out strings.Builder
	require.Equal(t, 1, supervise([]string{"-store", "memory"}, &out))
	require.Equal(t, 1, supervise([]string{"-scenarios", "nope"}, &out))
	require.Equal(t, 2, supervise([]string{"-bogus"}, &out))
}

// Ctrl-C in the middle of a run: the supervisor stops every controller,
// shuts etcd down and removes its directory. Nothing is left behind.
func TestInterruptLeavesNoProcessSocketOrFileBehind(t *testing.T) {
	var g proc.Group
	defer g.KillAll()
	sup := proctest.StartSupervisor(t, &g, []string{"-store", "etcd", "-scenarios", "drain"})
	pod, err := sup.Await(context.Background(), "pod-started", map[string]string{"name": "pod-1"}, waitLong)
	require.NoError(t, err)
	pid, err := strconv.Atoi(pod.Attrs["pid"])
	require.NoError(t, err)
	sup.InterruptLeavesNothing(t, []int{pid})
}
