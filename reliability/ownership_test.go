package reliability_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/reliability/workload"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// Controllers take executions over, move them and let them go, while
// others are refused or move them as outside authorities: on every store
// the history is one where nobody acquired a held execution, every
// take-over was at the next epoch, and no move under a claim happened
// while another claim held.
func TestOwnershipIsLinearizableOnEveryStore(t *testing.T) {
	etcd, _ := etcdStore(t)
	for name, store := range map[string]storage.Store{
		"memory": storage.NewMemory(), "bolt": boltStore(t), "etcd": etcd,
	} {
		t.Run(name, func(t *testing.T) {
			execs := ids("own-"+name, 2)
			createAll(t, store, execs)
			rec := concurrently(t, 5, func(c int, emit func(history.Op)) error {
				return workload.Ownership(context.Background(), store, c, execs, 40, 6, emit)
			})
			CheckOwnership(t, rec.Ops(), "ownership-"+name)
		})
	}
}

// CheckOwnership checks ops against the ownership model and that the
// history did what it is for: take-overs, refusals and fenced moves.
func CheckOwnership(t *testing.T, ops []history.Op, name string) {
	t.Helper()
	require.NoError(t, history.Check(history.OwnershipModel(teraslice.Lifecycle()), ops, artifacts(), name, checkTimeout))
	require.NoError(t, workload.OwnershipExercised(ops))
}

// The ownership checker is only worth something if it can fail: two
// owners at once, an acquire whose epoch is not above the last, and a
// let-go handle that wrote are each caught. (An epoch may skip: the
// Store contract asks for one above every earlier one, and a kube
// Acquire whose attempt failed spends one.)
func TestTheOwnershipCheckerCatchesTwoOwnersAndStaleWrites(t *testing.T) {
	model := history.OwnershipModel(teraslice.Lifecycle())
	dir := t.TempDir()
	acq := func(c int, epoch uint64, at int64) history.Op {
		return history.Op{Client: c, ID: "x", Kind: "acquire", Holder: "c" + string(rune('0'+c)), Outcome: history.Changed, Epoch: epoch, Call: at, Return: at + 1}
	}
	twoOwners := []history.Op{acq(0, 1, 1), acq(1, 2, 3)}
	require.Error(t, history.Check(model, twoOwners, dir, "two-owners", checkTimeout))
	release := func(c int, epoch uint64, at int64) history.Op {
		return history.Op{Client: c, ID: "x", Kind: "release", Holder: "c" + string(rune('0'+c)), Epoch: epoch, Outcome: history.Changed, Call: at, Return: at + 1}
	}
	reused := []history.Op{acq(0, 1, 1), release(0, 1, 3), acq(1, 1, 5)}
	require.Error(t, history.Check(model, reused, dir, "reused-epoch", checkTimeout))
	skipped := []history.Op{acq(0, 1, 1), release(0, 1, 3), acq(1, 3, 5)}
	require.NoError(t, history.Check(model, skipped, dir, "skipped-epoch", checkTimeout))
	staleWrite := []history.Op{
		acq(0, 1, 1),
		{Client: 0, ID: "x", Kind: "release", Holder: "c0", Epoch: 1, Outcome: history.Changed, Call: 3, Return: 4},
		{Client: 0, ID: "x", Kind: "fire", Holder: "c0", Epoch: 1, To: "scheduling", From: "pending", Outcome: history.Changed, Call: 5, Return: 6},
	}
	require.Error(t, history.Check(model, staleWrite, dir, "stale-write", checkTimeout))
	fine := append(append([]history.Op(nil), staleWrite[:2]...), acq(1, 2, 7))
	require.NoError(t, history.Check(model, fine, dir, "fine", checkTimeout))
}
