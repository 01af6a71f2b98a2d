//go:build reintroduced_start_unowned

package fleettest_test

// A bug package recovery once had, kept as a patch of its files
// (testdata/reintroduced/start_unowned.patch; the shipped files carry no trace
// of it), to show the explorer finds it. tools/testall applies the patch
// to a copy of the module and runs there
//
//	go test -tags reintroduced_start_unowned -run TestReintroduced ./recovery/fleettest
//
// Without the patch this test fails: the bug is not there to find.

import (
	"testing"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/stretchr/testify/require"
)

// A start on a record nobody owns wrote its verdict as an outside
// authority, taking no ownership: the first controller drives an execution
// it does not hold.
func TestReintroducedStartOnAnUnownedRecordTakingNoOwnershipIsFound(t *testing.T) {
	v := violation(t, lifecycle(), fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantOneOwnerWrites, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start"}, v.Path)
	require.Contains(t, v.Problem, "pod-1 wrote ex-1 (pending → pending) as an outside authority")
}
