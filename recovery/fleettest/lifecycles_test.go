package fleettest_test

import (
	"testing"

	"github.com/execfsm/execfsm/flink"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

// volcanoFleet is Volcano's Job lifecycle driven by a controller-manager
// (manager mode): users restart, abort, resume and complete Jobs; the
// work completes or fails; the retries budget ends a Job restarted too
// often.
func volcanoFleet() fleettest.Fleet[volcano.Phase] {
	return fleettest.Fleet[volcano.Phase]{
		Roles:  volcano.Roles(),
		Policy: recovery.Policy{Manager: true},
		Ends:   []volcano.Phase{volcano.Completed},
		Master: fleettest.Master[volcano.Phase]{Moves: []fleettest.Move[volcano.Phase]{
			{Name: "restart", From: volcano.Running, To: volcano.Restarting},
			{Name: "abort", From: volcano.Running, To: volcano.Aborting},
			{Name: "resume", From: volcano.Aborted, To: volcano.Restarting},
			{Name: "complete", From: volcano.Running, To: volcano.Completing},
		}},
	}
}

// flinkFleet is the Flink operator's job lifecycle, restart on failure
// on: users suspend, resume and upgrade; a JobManager is lost; a job
// fails and is resubmitted after its backoff; bounded jobs finish.
func flinkFleet(t *testing.T) fleettest.Fleet[flink.JobStatus] {
	roles, err := flink.Roles(flink.RestartingFailed)
	require.NoError(t, err)
	return fleettest.Fleet[flink.JobStatus]{
		Roles:  roles,
		Policy: recovery.Policy{Manager: true},
		Ends:   []flink.JobStatus{flink.Finished},
		Master: fleettest.Master[flink.JobStatus]{Moves: []fleettest.Move[flink.JobStatus]{
			{Name: "suspend", From: flink.Running, To: flink.Suspended},
			{Name: "resume", From: flink.Suspended, To: flink.Reconciling},
			{Name: "upgrade", From: flink.Running, To: flink.Finished},
			{Name: "redeploy", From: flink.Finished, To: flink.Reconciling},
			{Name: "jobmanager-lost", From: flink.Running, To: flink.Reconciling},
		}},
	}
}

var managers = fleettest.Bound{Depth: 14, Pods: 2, Crashes: 1, Drains: 1}

func TestVolcanosLifecycleUnderAManagerKeepsEveryInvariant(t *testing.T) {
	r := fleettest.Check(t, volcanoFleet(), managers)
	require.Greater(t, r.States, 1000, "%v", r)
}

func TestFlinksLifecycleUnderAnOperatorKeepsEveryInvariant(t *testing.T) {
	r := fleettest.Check(t, flinkFleet(t), managers)
	require.Greater(t, r.States, 1000, "%v", r)
}
