package fleettest_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lifecycle is the built-in lifecycle's fleet: Teraslice's master pauses
// and resumes, a platform that restarts controllers, restartable work.
func lifecycle() fleettest.Fleet[state.Status] {
	return fleettest.Fleet[state.Status]{
		Roles:  teraslice.Roles(),
		Policy: recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers},
		Reaper: recovery.ReaperOptions{Abandoned: teraslice.AbandonedAfter},
		Master: fleettest.Master[state.Status]{Moves: []fleettest.Move[state.Status]{
			{Name: "pause", From: state.Running, To: state.Paused},
			{Name: "resume", From: state.Paused, To: state.Running},
		}},
	}
}

// everyState is the default bound with room for every state the fleet
// can reach with two pods, a crash and a drain: the search ends when a
// level adds nothing new (at depth 19), not at the depth.
var everyState = fleettest.Bound{Depth: 40, Pods: 2, Crashes: 1, Drains: 1}

func TestTheBuiltInLifecycleKeepsEveryInvariantInEveryReachableState(t *testing.T) {
	r := fleettest.Check(t, lifecycle(), everyState)
	require.True(t, r.Exhausted, "every reachable state explored: %v", r)
	require.Greater(t, r.States, 5000)
}

// retiring is the built-in lifecycle with a Retirer: completed and
// stopped executions retired as soon as they end (a zero keeps nothing,
// so the retirer may land between any two steps after the end), failed
// ones kept a day. Every interleaving
// of drains, crashes, lost nodes that come back and stops with the
// retirer deleting what is due keeps the invariants: nothing is deleted
// under a live holder, and no controller (a stale one back from a lost
// node, a replacement its Job makes) brings a retired execution back.
func retiring(t *testing.T) fleettest.Fleet[state.Status] {
	roles, err := teraslice.RolesBuilder().Retain(0).Retain(24*time.Hour, state.Failed).Build()
	require.NoError(t, err)
	f := lifecycle()
	f.Roles, f.Retire = roles, true
	return f
}

func TestRetiringEndedExecutionsKeepsEveryInvariant(t *testing.T) {
	r := fleettest.Check(t, retiring(t), everyState)
	require.True(t, r.Exhausted, "every reachable state explored: %v", r)
	require.Greater(t, r.States, 5000)
}
