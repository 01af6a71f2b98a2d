package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/proctest"
	"github.com/stretchr/testify/require"
)

// The test binary is also the managers and simulators.
func TestMain(m *testing.M) { proctest.Main(m, child) }

var startedPID = regexp.MustCompile(`started \S+ \S+ pid (\d+)`)

func simulatorPIDs(out string) []int {
	var pids []int
	for _, m := range startedPID.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

func TestManagerCrashRecoveryPassesOnEveryStore(t *testing.T) {
	for _, kind := range []string{"etcd", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			var out strings.Builder
			code := supervise([]string{"-store", kind}, &out)
			t.Log(out.String())
			require.Equal(t, 0, code)
			require.NotContains(t, out.String(), "FAIL")
			require.Contains(t, out.String(), "recovery listed 2 adopted 2 gone 1")
			pids := simulatorPIDs(out.String())
			require.Len(t, pids, 3)
			for _, pid := range pids {
				require.Eventually(t, func() bool { return proctest.Gone(pid) }, 10*time.Second, 10*time.Millisecond, "simulator %d left running", pid)
			}
		})
	}
}

func TestMemoryStoreIsRefused(t *testing.T) {
	var out strings.Builder
	require.Equal(t, 1, supervise([]string{"-store", "memory"}, &out))
}

// Ctrl-C with simulators running and their manager alive: nothing is
// left, not the simulators the manager started, not etcd, not a file.
func TestInterruptLeavesNoProcessSocketOrFileBehind(t *testing.T) {
	var g proc.Group
	defer g.KillAll()
	sup := proctest.StartSupervisor(t, &g, []string{"-store", "etcd"})
	ev, err := sup.Await(context.Background(), "before-crash", nil, waitLong)
	require.NoError(t, err)
	var pids []int
	for _, field := range strings.Split(ev.Attrs["simulators"], ",") {
		pid, err := strconv.Atoi(field)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, 3)
	sup.InterruptLeavesNothing(t, pids)
}
