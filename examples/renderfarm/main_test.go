package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// The test binary is also the controller the farm starts.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envFarmDir); dir != "" {
		os.Exit(controllerMain(dir))
	}
	goleak.VerifyTestMain(m)
}

func TestTheShotIsRenderedThroughACrashAndAMove(t *testing.T) {
	var out strings.Builder
	require.NoError(t, play(context.Background(), Farm{Dir: t.TempDir()}, &out))
	t.Log(out.String())
	for _, want := range []string{
		`msg=decided execution=shot-1 decision=resume reason="controller restarted unexpectedly in rendering status; resuming (unexpected restart 1, 3 within 30m0s allowed)"`,
		`msg=ended execution=trailer outcome=write state=cancelled reason="stopped on request"`,
		`msg=SIGTERM execution=shot-1 action=relocate reason="SIGTERM in rendering status, not stopping`,
		`msg=decided execution=shot-1 decision=resume reason="relocated controller took over; back to rendering"`,
		`msg=ended execution=shot-1 outcome=write state=done reason="the work finished"`,
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
	roles, err := Farm{Dir: t.TempDir()}.Lifecycle()
	require.NoError(t, err)
	transitiontest.Check(t, roles.Table())
}

// Whatever path a job takes, it is done only with every frame on disk:
// walked on a machine over a farm whose job has one frame missing, the
// guard vetoes every move to done, and nothing else.
func TestNoJobIsDoneWithAFrameMissing(t *testing.T) {
	farm := Farm{Dir: t.TempDir()}
	require.NoError(t, farm.Submit(shotID, 3))
	require.NoError(t, farm.RenderFrame(shotID, 0))
	require.NoError(t, farm.RenderFrame(shotID, 1))
	roles, err := farm.Lifecycle()
	require.NoError(t, err)
	table := roles.Table()
	rapid.Check(t, func(t *rapid.T) {
		path := transitiontest.Paths(table, 12).Draw(t, "path")
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

// The controller killed with SIGKILL in the middle of a render, started
// again, then sent SIGTERM, on each platform: the crash resumes where the
// platform restarts a controller (one unexpected restart counted) and
// fails the job where nothing does; the SIGTERM relocates where the
// platform drains (moving, exit 143) and under systemd is a stop, which
// cancels the job and exits 0.
func TestEachPlatformReadsAKillAndASIGTERMItsOwnWay(t *testing.T) {
	for _, tc := range []struct {
		platform  recovery.Platform
		start     string // the decision on the job after the kill
		afterTerm Status
		restarts  int
		code      int
	}{
		{recovery.KubernetesJob, "resume", StatusMoving, 1, 143},
		{recovery.KubernetesDeployment, "resume", StatusMoving, 1, 143},
		{recovery.SystemdOnFailure, "resume", StatusCancelled, 1, 0},
		{recovery.SystemdAlways, "resume", StatusCancelled, 1, 0},
		{recovery.Unmanaged, "fail", StatusFailed, 0, 0},
	} {
		t.Run(tc.platform.Name, func(t *testing.T) {
			ctx := context.Background()
			farm := Farm{Dir: t.TempDir()}
			require.NoError(t, farm.Submit(shotID, 10_000))
			out := proc.NewSyncBuffer()
			first, err := startController(ctx, farm, tc.platform, out)
			require.NoError(t, err)
			require.NoError(t, first.await(ctx, "two frames", func(*metrics) (bool, error) {
				n, err := farm.Rendered(shotID)
				return n >= 2, err
			}))
			require.Equal(t, -1, first.signal(syscall.SIGKILL), "killed")

			second, err := startController(ctx, farm, tc.platform, out)
			require.NoError(t, err)
			require.NoError(t, second.await(ctx, "the decision "+tc.start, func(m *metrics) (bool, error) {
				return m.value("execfsm_startup_decisions_total", "decision", tc.start) >= 1, nil
			}), out.String())
			require.Equal(t, tc.code, second.signal(syscall.SIGTERM), out.String())

			rec := record(t, farm, shotID)
			require.Equal(t, string(tc.afterTerm), rec.Status, out.String())
			restarts, err := recovery.FailoverCount(rec)
			require.NoError(t, err)
			require.Equal(t, tc.restarts, restarts.Total())
		})
	}
}

// record reads a job's record once no controller runs.
func record(t *testing.T, farm Farm, id string) storage.Record {
	t.Helper()
	db, err := boltstore.Open(farm.dbPath(), boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	store, err := db.Store("renders")
	require.NoError(t, err)
	rec, err := store.Get(context.Background(), id)
	require.NoError(t, err)
	return rec
}
