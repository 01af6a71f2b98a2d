package volcano_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

func TestEveryPhaseHasTheRoleVolcanoGivesIt(t *testing.T) {
	roles := volcano.Roles()
	for phase, want := range map[volcano.Phase]recovery.Role{
		volcano.Pending: recovery.RoleNotStarted, volcano.Running: recovery.RoleRunning,
		volcano.Restarting: recovery.RoleStopping, volcano.Aborting: recovery.RoleStopping,
		volcano.Completing: recovery.RoleStopping, volcano.Terminating: recovery.RoleStopping,
		volcano.Aborted: recovery.RoleParked, volcano.Completed: recovery.RoleTerminal,
		volcano.Terminated: recovery.RoleTerminal, volcano.Failed: recovery.RoleTerminal,
	} {
		got, ok := roles.Role(phase)
		require.True(t, ok, phase)
		require.Equal(t, want, got, phase)
	}
	stopping, end, ok := roles.Stopping()
	require.True(t, ok)
	require.Equal(t, []volcano.Phase{volcano.Terminating, volcano.Terminated}, []volcano.Phase{stopping, end}, "the stop an outside authority asks for")
	pending, err := volcano.Lifecycle().Parse("")
	require.NoError(t, err)
	require.Equal(t, volcano.Pending, pending, "a Job is created with an empty phase")
	require.Empty(t, roles.Timers(), "Volcano has no timers")
}

// maxRetry m fails the m-th restart.
func TestMaxRetryFailsTheRestartThatReachesIt(t *testing.T) {
	require.Nil(t, volcano.MaxRetry(0))
	for _, maxRetry := range []int{1, 2, 5} {
		for restarts := 1; restarts <= maxRetry; restarts++ {
			var c transition.Count
			for k := range restarts {
				c = c.Add(time.Unix(int64(k), 0))
			}
			meta := volcano.MaxRetry(maxRetry)
			meta[transition.CountKey(volcano.Retries)] = c.String()
			rec := storage.Record{ID: "job", Status: string(volcano.Restarting), Meta: meta}
			v, err := recovery.Startup(volcano.Roles(), rec, recovery.Policy{Manager: true}, time.Now())
			require.NoError(t, err)
			if restarts == maxRetry {
				require.Equal(t, recovery.DecisionFail, v.Decision, "maxRetry %d, restart %d", maxRetry, restarts)
			} else {
				require.Equal(t, recovery.DecisionStop, v.Decision, "maxRetry %d, restart %d: drain back to pending", maxRetry, restarts)
			}
		}
	}
}

// The preset is a table and roles like any other: described, recorded
// and rebuilt by a tool outside the controller.
func TestTheLifecycleIsDescribedAndRebuilt(t *testing.T) {
	d, err := schema.Describe("volcano-job", volcano.Roles())
	require.NoError(t, err)
	data, err := d.Encode()
	require.NoError(t, err)
	back, err := schema.Decode(data)
	require.NoError(t, err)
	table, roles, err := back.Rebuild()
	require.NoError(t, err)
	require.Equal(t, volcano.Lifecycle().Describe(), table.Describe())
	require.Equal(t, volcano.Roles().Describe(), roles.Describe())
}

// What a restarted controller-manager does with a Job in each phase.
func ExampleRoles() {
	for _, phase := range []volcano.Phase{volcano.Running, volcano.Aborting, volcano.Aborted, volcano.Completed} {
		rec := storage.Record{ID: "job-1", Status: string(phase)}
		v, _ := recovery.Startup(volcano.Roles(), rec, recovery.Policy{Manager: true}, time.Now())
		fmt.Printf("%s: %s\n", phase, v.Decision)
	}
	// Output:
	// Running: resume
	// Aborting: stop
	// Aborted: wait
	// Completed: refuse
}
