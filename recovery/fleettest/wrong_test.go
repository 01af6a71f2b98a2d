package fleettest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// violation explores f within b and returns the violation it must find.
func violation[S comparable](t *testing.T, f fleettest.Fleet[S], b fleettest.Bound) *fleettest.Violation {
	t.Helper()
	_, err := f.Explore(context.Background(), b)
	var v *fleettest.Violation
	require.True(t, errors.As(err, &v), "want a violation, got %v", err)
	t.Logf("%v", v)
	var replayed *fleettest.Violation
	require.True(t, errors.As(f.Replay(context.Background(), b, v.Path), &replayed), "the path replays to a violation")
	require.Equal(t, v.Invariant, replayed.Invariant)
	require.Equal(t, v.Timeline, replayed.Timeline)
	return v
}

// simulator is a VILLAS-like table of a user's own, with its pause and
// resume written by the master; stopFromPaused false leaves out the
// stop of a paused simulator.
func simulator(t *testing.T, stopFromPaused bool) fleettest.Fleet[string] {
	t.Helper()
	b := transition.New("idle").
		Allow("idle", "starting", "stopping").
		Allow("starting", "running", "error", "stopping", "killed").
		Allow("running", "paused", "stopping", "moving", "error", "done", "killed").
		Allow("paused", "running", "moving", "error", "done", "killed").
		Return("moving", "running", "paused").
		Allow("moving", "starting", "error", "stopping").
		Allow("stopping", "stopped", "done", "error").
		Terminal("stopped", "done", "error", "killed")
	if stopFromPaused {
		b.Allow("paused", "stopping")
	}
	table, err := b.Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).
		NotStarted("idle", "starting").
		Running("running", "paused").
		Relocating("moving", "starting").
		Stopping("stopping", "stopped").
		Deadline("moving", 15*time.Minute, "error").
		Deadline("stopping", 5*time.Minute, "stopped").
		Ends("done", "killed").
		Failed("error").
		Deadline("starting", 10*60e9, "error").
		Build()
	require.NoError(t, err)
	return fleettest.Fleet[string]{
		Roles:  roles,
		Policy: recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers},
		Reaper: recovery.ReaperOptions{Abandoned: teraslice.AbandonedAfter},
		Master: fleettest.Master[string]{Moves: []fleettest.Move[string]{
			{Name: "pause", From: "running", To: "paused"},
			{Name: "resume", From: "paused", To: "running"},
		}},
	}
}

func TestAUserTableWithItsRolesKeepsEveryInvariant(t *testing.T) {
	fleettest.Check(t, simulator(t, true), fleettest.DefaultBound())
}

// The master cannot stop a paused simulator: found with the shortest
// interleaving that pauses one and asks.
func TestAMissingStopEdgeIsFound(t *testing.T) {
	v := violation(t, simulator(t, false), fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantStopNeverLost, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start", "pod-1 run", "master pause ex-1", "master stop ex-1"}, v.Path)
	require.Contains(t, v.Problem, "cannot stop ex-1 in paused")
}

// Roles that leave the lifecycle's relocating state out (here: given it
// as a not-started state) make every drain of a running execution shut it
// down on a platform that would have moved it.
func TestARunningStatusWithNoRelocatingRoleIsFound(t *testing.T) {
	roles, err := recovery.DefineRoles(teraslice.Lifecycle()).
		NotStarted(state.Pending, state.Scheduling, state.Initializing, state.Relocating).
		Running(state.Running, state.Recovering, state.Failing, state.Paused).
		Stopping(state.Stopping, state.Stopped).
		Ends(state.Completed, state.Terminated).
		Failed(state.Failed).
		Build()
	require.NoError(t, err)
	f := lifecycle()
	f.Roles = roles
	v := violation(t, f, fleettest.DefaultBound())
	require.Equal(t, fleettest.InvariantDrainRelocates, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start", "pod-1 run", "platform sigterm pod-1"}, v.Path)
	require.Contains(t, v.Problem, "ended ex-1 in terminated")
}

// A relocation nobody takes over is ended by its deadline only if
// something enforces it: without a Reaper, a relocating execution whose
// replacement never comes is stranded.
func TestARelocatingStatusWithoutADeadlineIsFound(t *testing.T) {
	f := lifecycle()
	f.NoReaper = true
	f.Master.NoStop = true // a stop nobody ends is stranded too
	b := fleettest.DefaultBound()
	b.Crashes, b.Pods = 0, 1
	v := violation(t, f, b)
	require.Equal(t, fleettest.InvariantNothingStranded, v.Invariant)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start", "pod-1 run", "platform sigterm pod-1"}, v.Path)
	require.Contains(t, v.Problem, "ex-1 is relocating")
}
