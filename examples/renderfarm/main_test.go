package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// The test binary is also the controller the farm starts.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envFarmDir); dir != "" {
		os.Exit(runController(Farm{Dir: dir}, os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

func TestTheShotIsRenderedThroughACrashAndAMove(t *testing.T) {
	var out strings.Builder
	require.NoError(t, play(context.Background(), Farm{Dir: t.TempDir()}, &out))
	t.Log(out.String())
	for _, want := range []string{
		"start shot-1: resume rendering → rendering (controller restarted unexpectedly in rendering status; resuming (unexpected restart 1, 3 within 30m0s allowed)",
		"end trailer: cancelled",
		"sigterm shot-1: relocate",
		"start shot-1: resume moving → rendering (relocated controller took over; back to rendering)",
		"end shot-1: done",
		"shot-1: done, 120 of 120 frames, 1 unexpected restart(s)",
		"rendering  → moving     SIGTERM in rendering status",
		"moving     → rendering  relocated controller took over",
		"rendering  → done       the work finished",
		"rendering  → cancelling withdrawn from the spool",
		"cancelling → cancelled  stopped on request",
	} {
		require.Contains(t, out.String(), want)
	}
}

func TestTheLifecycleHasEveryPropertyOfATable(t *testing.T) {
	table, _, err := Farm{Dir: t.TempDir()}.Lifecycle()
	require.NoError(t, err)
	transitiontest.Check(t, table)
}

// Whatever path a job takes, it is done only with every frame on disk:
// walked on a machine over a farm whose job has one frame missing, the
// guard vetoes every move to done, and nothing else.
func TestNoJobIsDoneWithAFrameMissing(t *testing.T) {
	farm := Farm{Dir: t.TempDir()}
	require.NoError(t, farm.Submit(shotID, 3))
	require.NoError(t, farm.RenderFrame(shotID, 0))
	require.NoError(t, farm.RenderFrame(shotID, 1))
	table, _, err := farm.Lifecycle()
	require.NoError(t, err)
	rapid.Check(t, func(t *rapid.T) {
		path := transitiontest.Walk(table, 12).Draw(t, "path")
		machine, err := transition.NewMachine(table, transition.MachineOptions{ID: shotID})
		require.NoError(t, err)
		for _, next := range path[1:] {
			_, err := machine.Fire(context.Background(), next, "walk")
			if next == StatusDone {
				require.ErrorIs(t, err, transition.ErrGuard)
				require.ErrorIs(t, err, errFramesMissing)
				return
			}
			require.NoError(t, err)
		}
		require.False(t, slices.Contains(path, StatusDone))
	})
	require.NoError(t, farm.RenderFrame(shotID, 2))
	machine, err := transition.NewMachineAt(table, StatusRendering, transition.MachineOptions{ID: shotID})
	require.NoError(t, err)
	_, err = machine.Fire(context.Background(), StatusDone, "all three frames")
	require.NoError(t, err, "with every frame rendered the guard agrees")
}

func TestABadSpoolFileIsRefusedByName(t *testing.T) {
	farm := Farm{Dir: t.TempDir()}
	require.NoError(t, os.MkdirAll(farm.spool(), 0o755))
	require.NoError(t, os.WriteFile(farm.spool()+"/bad.job", []byte("many"), 0o644))
	_, err := farm.Jobs()
	require.ErrorContains(t, err, `spool file bad.job: want a frame count, got "many"`)
	require.False(t, errors.Is(err, os.ErrNotExist))
}
