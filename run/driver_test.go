package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

// driverConfig is a leader-elected, handing-over Driver over store whose
// Sync runs every Pending Job and ends every Running one.
func driverConfig(store storage.Store, holder string) run.ManagerConfig[volcano.Phase] {
	return run.ManagerConfig[volcano.Phase]{
		Roles: volcano.Roles(), Store: store, Table: "volcano-job", Holder: holder, Leader: "controller-manager", HandOver: true, TTL: time.Minute,
		Sync: func(ctx context.Context, exec *transition.Persisted[volcano.Phase], phase volcano.Phase) (run.Step, error) {
			switch phase {
			case volcano.Pending:
				_, err := exec.Fire(ctx, volcano.Running, "every pod runs")
				return run.Step{}, err
			case volcano.Running:
				return run.Step{}, nil
			}
			return run.After(time.Minute), nil
		},
	}
}

// A Driver is Manage without its loop: each Reconcile takes one
// execution over under the leader's lease and syncs it, a move asks for
// the next sync at once, an ended one is let go, and HandOver lets
// every execution and the leader go, after which it syncs nothing.
func TestADriverSyncsWhatItIsAskedAndHandsOver(t *testing.T) {
	store := jobs(t)
	d, err := run.NewDriver(driverConfig(store, "manager-a"))
	require.NoError(t, err)

	res, err := d.Reconcile(bg, "mnist")
	require.NoError(t, err)
	require.Positive(t, res.RequeueAfter, "it moved: synced again at once")
	rec, err := store.Get(bg, "mnist")
	require.NoError(t, err)
	require.Equal(t, string(volcano.Running), rec.Status)
	res, err = d.Reconcile(bg, "mnist")
	require.NoError(t, err)
	require.Zero(t, res.RequeueAfter, "Running waits for the next event")
	res, err = d.Reconcile(bg, "suspended")
	require.NoError(t, err)
	require.Equal(t, time.Minute, res.RequeueAfter, "the Step's After")

	for _, id := range []string{"mnist", "suspended", "controller-manager"} {
		claim, held, err := store.Held(bg, id)
		require.NoError(t, err)
		require.True(t, held, id)
		require.Equal(t, "manager-a", claim.Owner, id)
	}
	res, err = d.Reconcile(bg, "done")
	require.NoError(t, err, "an ended Job is nothing to drive")
	require.Zero(t, res)
	_, held, err := store.Held(bg, "done")
	require.NoError(t, err)
	require.False(t, held)

	code, err := d.HandOver(bg)
	require.NoError(t, err)
	require.Zero(t, code)
	for _, id := range []string{"mnist", "suspended", "controller-manager"} {
		_, held, err := store.Held(bg, id)
		require.NoError(t, err)
		require.False(t, held, "%s handed over", id)
	}
	_, err = d.Reconcile(bg, "resnet")
	require.ErrorIs(t, err, run.ErrHandedOver)
	_, held, err = store.Held(bg, "resnet")
	require.NoError(t, err)
	require.False(t, held, "nothing taken after the hand-over")

	// The next driver takes over at once: nothing was held.
	next, err := run.NewDriver(driverConfig(store, "manager-b"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	_, err = next.Reconcile(ctx, "mnist")
	require.NoError(t, err)
	claim, _, err := store.Held(bg, "mnist")
	require.NoError(t, err)
	require.Equal(t, "manager-b", claim.Owner)
	_, err = next.HandOver(bg)
	require.NoError(t, err)
}

// A Driver's caller runs the loop: the config's loop fields are refused,
// each named, not ignored.
func TestADriverRefusesTheLoopsFields(t *testing.T) {
	c := driverConfig(storage.NewMemory(), "m")
	c.Workers, c.Resync, c.Ready = 2, time.Second, func(int) {}
	_, err := run.NewDriver(c)
	require.ErrorIs(t, err, run.ErrInvalidConfig)
	require.ErrorContains(t, err, "Ready, Resync, Workers set for a Driver")
	c = driverConfig(storage.NewMemory(), "m")
	c.Sync = nil
	_, err = run.NewDriver(c)
	require.ErrorIs(t, err, run.ErrInvalidConfig)
	c = driverConfig(storage.NewMemory(), "m")
	c.HandOver, c.Platform = true, recovery.KubernetesJob
	_, err = run.NewDriver(c)
	require.ErrorIs(t, err, run.ErrInvalidConfig)
}
