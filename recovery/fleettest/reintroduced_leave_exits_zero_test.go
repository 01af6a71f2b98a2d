//go:build reintroduced_leave_exits_zero

package fleettest_test

// A bug package recovery once had, kept as a patch of its files
// (testdata/reintroduced/leave_exits_zero.patch; the shipped files carry no trace
// of it), to show the explorer finds it. tools/testall applies the patch
// to a copy of the module and runs there
//
//	go test -tags reintroduced_leave_exits_zero -run TestReintroduced ./recovery/fleettest
//
// Without the patch this test fails: the bug is not there to find.

import (
	"testing"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/stretchr/testify/require"
)

// A controller that left an execution exited 0 on every platform: on a
// Job that completes the Job, and nothing replaces the controller. Here
// a pod sent SIGTERM before its first start leaves the master's stop to
// nobody.
func TestReintroducedLeaveExitingZeroIsFound(t *testing.T) {
	v := violation(t, lifecycle(), fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantJobEndsWithExecution, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "master stop ex-1", "platform sigterm pod-1"}, v.Path)
	require.Contains(t, v.Problem, "pod-1 exits 0 (leave) while ex-1 is stopping")
}
