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

// The test binary is also the managers.
func TestMain(m *testing.M) { proctest.Main(m, child) }

func TestEveryJobOutlivesItsManager(t *testing.T) {
	var out strings.Builder
	code := supervise(nil, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	require.NotContains(t, out.String(), "FAIL")
	require.Contains(t, out.String(), "manager-a exited: exit 0")
	require.Contains(t, out.String(), "PASS")
	require.Equal(t, 2, strings.Count(out.String(), "msg=SIGTERM execution=mnist action=handover"), "manager-a and manager-c hand over")
}

func TestAStoreOfOneProcessIsRefused(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		var out strings.Builder
		require.Equal(t, 1, supervise([]string{"-store", kind}, &out), kind)
		require.Contains(t, out.String(), "use etcd", kind)
	}
	var out strings.Builder
	require.Equal(t, 2, supervise([]string{"-nonsense"}, &out))
}

// Ctrl-C with a manager driving the Jobs: nothing is left, not the
// manager, not etcd, not a file.
func TestInterruptLeavesNoProcessSocketOrFileBehind(t *testing.T) {
	var g proc.Group
	defer g.KillAll()
	sup := proctest.StartSupervisor(t, &g, []string{"-store", "etcd"})
	ev, err := sup.Await(context.Background(), "manager", map[string]string{"name": "manager-a"}, waitLong)
	require.NoError(t, err)
	pid, err := strconv.Atoi(ev.Attrs["pid"])
	require.NoError(t, err)
	sup.InterruptLeavesNothing(t, []int{pid})
}
