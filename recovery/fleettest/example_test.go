package fleettest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// A user's table of simulator states, with roles that forget that a
// paused simulator can be stopped. The explorer runs a master, two
// controller pods, a drain, a crash and the Reaper through every
// interleaving, and prints the shortest that breaks an invariant. In a test,
// fleettest.Check(t, fleet, bound) does the same and fails t.
func Example() {
	table, err := transition.New("idle").
		Allow("idle", "starting", "stopping").
		Allow("starting", "running", "error", "stopping", "killed").
		Allow("running", "paused", "stopping", "moving", "error", "done", "killed").
		Allow("paused", "running", "moving", "error", "done", "killed"). // no stopping
		Return("moving", "running", "paused").
		Allow("moving", "starting", "error", "stopping").
		Allow("stopping", "stopped", "done", "error").
		Terminal("stopped", "done", "error", "killed").
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	roles, err := recovery.DefineRoles(table).
		NotStarted("idle", "starting").
		Running("running", "paused").
		Relocating("moving", "starting").
		Stopping("stopping", "stopped").
		Deadline("moving", 15*time.Minute, "error").
		Deadline("stopping", 5*time.Minute, "stopped").
		Ends("done", "killed").
		Failed("error").
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fleet := fleettest.Fleet[string]{
		Roles:  roles,
		Policy: recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers},
		Reaper: recovery.ReaperOptions{Abandoned: teraslice.AbandonedAfter},
		Master: fleettest.Master[string]{Moves: []fleettest.Move[string]{
			{Name: "pause", From: "running", To: "paused"},
			{Name: "resume", From: "paused", To: "running"},
		}},
	}
	_, err = fleet.Explore(context.Background(), fleettest.DefaultBound())
	var v *fleettest.Violation
	if !errors.As(err, &v) {
		fmt.Println("no violation:", err)
		return
	}
	fmt.Println(v.Invariant+":", v.Problem)
	for _, line := range v.Timeline {
		fmt.Println(strings.Join(strings.Fields(line), " "))
	}
	// Output:
	// StopNeverLost: the master cannot stop ex-1 in paused: transition: ex-1: paused → stopping: transition not allowed: no such edge (paused moves to running, error, killed, moving, done); if the move is right, add Allow("paused", "stopping") to the table
	// +0s master (created) idle created
	// +0s platform starts pod-1 for ex-1
	// +0s pod-1@1 idle (owner) controller started for idle execution
	// +0s pod-1@1 idle → starting set up; running
	// +0s pod-1@1 starting → running set up; running
	// +0s master running → paused pause requested
}
