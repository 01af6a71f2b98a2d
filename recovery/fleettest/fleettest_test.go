package fleettest_test

import (
	"context"
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
		Policy: recovery.Policy{Restarts: true, Work: recovery.Restartability(true)},
		Master: fleettest.Master[state.Status]{Moves: []fleettest.Move[state.Status]{
			{Name: "pause", From: state.Running, To: state.Paused},
			{Name: "resume", From: state.Paused, To: state.Running},
		}},
	}
}

func TestTheBuiltInLifecycleKeepsEveryInvariant(t *testing.T) {
	start := time.Now()
	r := fleettest.Check(t, lifecycle(), fleettest.DefaultBound())
	t.Logf("%v in %v", r, time.Since(start))
	require.Greater(t, r.States, 100)
}

var _ = context.Background
