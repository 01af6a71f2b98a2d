//go:build reintroduced_delete_under_holder

package fleettest_test

// A bug a store could have, kept as a patch of storage.Memory
// (testdata/reintroduced/delete_under_holder.patch; the shipped files
// carry no trace of it), to show the explorer finds it. tools/testall
// applies the patch to a copy of the module and runs there
//
//	go test -tags reintroduced_delete_under_holder -run TestReintroduced ./recovery/fleettest
//
// Without the patch this test fails: the bug is not there to find.

import (
	"testing"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/stretchr/testify/require"
)

// A delete that does not ask who holds the record lets the Retirer
// retire an execution its controller still holds.
func TestReintroducedDeleteUnderALiveHolderIsFound(t *testing.T) {
	v := violation(t, retiring(t), fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantRetiredStaysGone, v.Invariant)
	require.Contains(t, v.Problem, "while pod-1 held it")
	require.Equal(t, []string{"platform spawn ex-1", "master stop ex-1", "time tick", "pod-1 start", "retirer retire"}, v.Path,
		"pod-1 finishes the stop, holding ex-1 until its lease ends, and the retirer deletes it meanwhile")
}
