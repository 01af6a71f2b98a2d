//go:build reintroduced_restart_live_holder

package fleettest_test

// A bug package recovery once had, kept as a patch of its files
// (testdata/reintroduced/restart_live_holder.patch; the shipped files carry no trace
// of it), to show the explorer finds it. tools/testall applies the patch
// to a copy of the module and runs there
//
//	go test -tags reintroduced_restart_live_holder -run TestReintroduced ./recovery/fleettest
//
// Without the patch this test fails: the bug is not there to find.

import (
	"testing"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/stretchr/testify/require"
)

// A live holder retrying its start counted an unexpected restart each
// time, and failed its own healthy execution once the budget was spent.
func TestReintroducedRestartCountedForALiveHolderIsFound(t *testing.T) {
	v := violation(t, lifecycle(), fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantRestartsAreCrashes, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start", "pod-1 run", "pod-1 retry"}, v.Path)
	require.Contains(t, v.Problem, "1 unexpected restarts of ex-1 counted, but 0 of its controllers died")
}
