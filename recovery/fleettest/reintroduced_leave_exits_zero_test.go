//go:build execfsm_bug_leave_exits_zero

package fleettest_test

// A bug package recovery once had, compiled back in with a build tag
// (recovery/reintroduced_leave_exits_zero.go), to show the explorer finds
// it. Run:
//
//	go test -tags execfsm_bug_leave_exits_zero -run TestReintroduced ./recovery/fleettest
//
// The package's other tests fail under the tag, as they should.

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
