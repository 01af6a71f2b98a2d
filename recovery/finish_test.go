package recovery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

func finish(t *testing.T, s state.Status, e recovery.Ending) recovery.Outcome[state.Status] {
	t.Helper()
	end, err := recovery.End(teraslice.Roles(), record(s), podA, e)
	require.NoError(t, err)
	return end
}

var (
	finished    = recovery.Ending{Finished: true}
	withFailure = recovery.Ending{Finished: true, Failures: 2}
	withError   = recovery.Ending{Err: errors.New("slicer: index missing")}
	shutDown    = recovery.Ending{}
)

func TestFinishInARunningStatusWritesWhatTheWorkDid(t *testing.T) {
	for s := range state.RunningStatuses.All() {
		if s == state.Relocating || s == state.Stopping {
			continue
		}
		require.Equal(t, state.Completed, finish(t, s, finished).To, "%s", s)
		end := finish(t, s, withFailure)
		require.Equal(t, state.Failed, end.To, "%s", s)
		require.Equal(t, "the work finished with 2 failures", end.Reason)
		end = finish(t, s, withError)
		require.Equal(t, state.Failed, end.To, "%s", s)
		require.Equal(t, "slicer: index missing", end.Reason, "the error is the record's reason")
		end = finish(t, s, shutDown)
		require.Equal(t, recovery.EndWrite, end.Kind)
		require.Equal(t, state.Terminated, end.To, "%s shut down before finishing", s)
	}
}

func TestFinishWhileStoppingEndsTheStopUnlessTheWorkFinishedFirst(t *testing.T) {
	require.Equal(t, state.Stopped, finish(t, state.Stopping, shutDown).To)
	require.Equal(t, state.Completed, finish(t, state.Stopping, finished).To, "the work finished before the stop did")
	require.Equal(t, state.Failed, finish(t, state.Stopping, withFailure).To)
}

func TestFinishKeepsAnExecutionThatHasEnded(t *testing.T) {
	for s := range state.TerminalStatuses.All() {
		for _, e := range []recovery.Ending{finished, withFailure, withError, shutDown} {
			end := finish(t, s, e)
			require.Equal(t, recovery.EndKeep, end.Kind, "%s", s)
			require.Equal(t, s, end.To, "stopped is never overwritten with completed")
		}
	}
}

func TestFinishLeavesWhatIsNotThisControllersToEnd(t *testing.T) {
	end := finish(t, state.Relocating, finished)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Contains(t, end.Reason, "relocating")

	rec := record(state.Running)
	rec.Owner, rec.Epoch = "pod-b", 2
	end, err := recovery.End(teraslice.Roles(), rec, podA, finished)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Equal(t, "execution is owned by pod-b at epoch 2 now", end.Reason)
	require.Zero(t, end.ExitCode, "the pure decision has no policy: Decider.End sets the exit code")
}

func TestFinishRefusesInputItCannotDecideOn(t *testing.T) {
	_, err := recovery.End(teraslice.Roles(), record(state.Initializing), podA, finished)
	require.ErrorIs(t, err, transition.ErrNotAllowed, "work cannot finish before it ran")
	require.Contains(t, err.Error(), "initializing status, which cannot move to completed")

	_, err = recovery.End(teraslice.Roles(), record(state.Running), podA, recovery.Ending{Finished: true, Failures: -1})
	require.ErrorIs(t, err, recovery.ErrInvalidEnding)

	_, err = recovery.End[state.Status](nil, record(state.Running), podA, finished)
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)

	noEnds, err := recovery.DefineRoles(teraslice.Lifecycle()).
		NotStarted(state.Pending, state.Scheduling, state.Initializing).
		Running(state.Running, state.Recovering, state.Failing, state.Paused).
		Relocating(state.Relocating, state.Initializing).
		Stopping(state.Stopping, state.Stopped).
		Failed(state.Failed).Build()
	require.NoError(t, err)
	_, err = recovery.End(noEnds, record(state.Running), podA, finished)
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	require.Contains(t, err.Error(), "Ends")

	// A status the table does not know is not refused but left to a
	// controller whose table knows it.
	rec := record(state.Running)
	rec.Status = "Running"
	end, err := recovery.End(teraslice.Roles(), rec, podA, finished)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Contains(t, end.Reason, `unknown state "Running"`)
}

func TestFinishCutsAHugeErrorToWhatARecordHolds(t *testing.T) {
	huge := strings.Repeat("é", storage.MaxReasonLen) // two bytes each
	end := finish(t, state.Running, recovery.Ending{Err: errors.New(huge)})
	require.LessOrEqual(t, len(end.Reason), storage.MaxReasonLen)
	require.True(t, utf8.ValidString(end.Reason))
	require.True(t, strings.HasSuffix(end.Reason, "… (cut)"))
}

func TestRolesEndsAreCheckedAgainstTheTable(t *testing.T) {
	_, err := recovery.DefineRoles(teraslice.Lifecycle()).
		NotStarted(state.Pending, state.Scheduling, state.Initializing).
		Running(state.Running, state.Recovering, state.Failing, state.Paused).
		Relocating(state.Relocating, state.Initializing).
		Stopping(state.Stopping, state.Stopped).
		Ends(state.Rejected, state.Running).
		Failed(state.Failed).Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	require.Contains(t, err.Error(), `running "running" cannot move to Ends' completed "rejected"`)
	require.Contains(t, err.Error(), `Stopping "stopping" cannot move to Ends' completed "rejected"`)
	require.Contains(t, err.Error(), `Ends' terminated "running" must be a terminal, not-started or parked state`)
}

func TestDeciderFinishWritesTheEndWithTheStatisticsAndLetsGo(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	owned := owner(t, exec, "pod-0")
	end, err := decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob}).End(context.Background(), owned, withFailure, map[string]string{"processed": "98"})
	require.NoError(t, err)
	require.Equal(t, recovery.EndWrite, end.Kind)
	require.Zero(t, end.ExitCode, "the outcome is in the record: a platform that restarts controllers must not start another")
	require.NoError(t, end.ReleaseErr)
	rec, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Equal(t, "failed", rec.Status)
	require.Equal(t, "the work finished with 2 failures", rec.Reason)
	require.Equal(t, "98", rec.Meta["processed"])
	select {
	case <-owned.Ownership().Lost():
	default:
		t.Fatal("a controller that wrote the final status still owns the execution")
	}
}

func TestDeciderFinishOnAnEndedExecutionWritesOnlyTheStatistics(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	owned := owner(t, exec, "pod-0")
	// The cluster master stops it and a reaper ends the stop meanwhile.
	_, err := exec.Fire(context.Background(), state.Stopping, "user stop")
	require.NoError(t, err)
	_, err = exec.Fire(context.Background(), state.Stopped, "stop overdue")
	require.NoError(t, err)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(context.Background(), owned, finished, map[string]string{"processed": "100"})
	require.NoError(t, err)
	require.Equal(t, recovery.EndKeep, end.Kind)
	rec, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, "stopped", rec.Status)
	require.Equal(t, "stop overdue", rec.Reason, "the reason of the end stays")
	require.Equal(t, "100", rec.Meta["processed"])
}

// The cluster master's stop lands between the controller's read and its
// write: the write conflicts, End decides again on the stopping record,
// and the execution ends stopped, not terminated.
func TestDeciderFinishDecidesAgainWhenTheStopLandsFirst(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	owned := owner(t, exec, "pod-0")
	_, _, err := owned.Load(context.Background()) // the controller's cached view: running
	require.NoError(t, err)
	_, err = exec.Fire(context.Background(), state.Stopping, "user stop")
	require.NoError(t, err)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(context.Background(), owned, shutDown, nil)
	require.NoError(t, err)
	require.Equal(t, state.Stopped, end.To)
	rec, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, "stopped", rec.Status)
	require.Equal(t, []string{"running→stopping", "stopping→stopped"}, moves(rec)[len(moves(rec))-2:])
}

func TestDeciderFinishByAFencedControllerLeaves(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	stale := crashed(t, exec, "pod-0")
	owner(t, exec, "pod-1")
	before, _ := store.Get(context.Background(), "ex-1")
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(context.Background(), stale, finished, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Zero(t, end.ExitCode, "a platform that restarts nothing")
	end, err = decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.Platform{Restart: recovery.RestartOnFailure, Drains: true, RelocateExitCode: 75}}).End(context.Background(), stale, finished, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Equal(t, 75, end.ExitCode, "pod-1 drives the execution: this exit must not complete its Job")
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before.Revision, after.Revision)
}

// Work that ends after its controller relocated (SIGTERM and the work's
// end racing) leaves the execution to the successor, and exits as the
// relocation does: an exit 0 would complete a Job, and the successor
// would never come to the relocating execution.
func TestDeciderFinishAfterARelocationLeavesItToTheSuccessor(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	owned := owner(t, exec, "pod-0")
	d := decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers})
	a, err := d.Terminate(context.Background(), owned, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	before, _ := store.Get(context.Background(), "ex-1")

	end, err := d.End(context.Background(), owned, finished, map[string]string{"slices": "10"})
	require.NoError(t, err)
	require.Equal(t, recovery.EndLeave, end.Kind)
	require.Equal(t, a.ExitCode, end.ExitCode)
	require.Equal(t, recovery.DefaultRelocateExitCode, end.ExitCode)
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before, after, "nothing written over the relocation")
}

func moves(rec storage.Record) []string {
	var out []string
	for _, e := range rec.History.All() {
		out = append(out, e.From+"→"+e.To)
	}
	return out
}

// TestFinishTableInPackageDocIsTrue recomputes every cell of the final
// status table in doc.go from End and fails if the doc disagrees.
func TestFinishTableInPackageDocIsTrue(t *testing.T) {
	requireDocTable(t, "stored status  finished", func(s state.Status) []string {
		return []string{finishCell(s, finished), finishCell(s, withFailure), finishCell(s, withError), finishCell(s, shutDown)}
	})
}

func finishCell(s state.Status, e recovery.Ending) string {
	end, err := recovery.End(teraslice.Roles(), tableRecord(s), podA, e)
	switch {
	case errors.Is(err, transition.ErrNotAllowed):
		return "not allowed"
	case err != nil:
		return err.Error()
	case end.Kind == recovery.EndWrite:
		return "→ " + end.To.String()
	}
	return end.Kind.String()
}

// A force stop goes through stopping: the master writes it, kills the
// controller, and ends the stop itself; the killed controller, had it
// lived on, could write nothing more.
func TestForceStopEndsThroughStoppingWrittenByTheMaster(t *testing.T) {
	ctx := context.Background()
	exec, store := newExecution(t, state.Running, time.Now)
	controller := owner(t, exec, "pod-0")
	_, err := exec.Fire(ctx, state.Stopped, "force stop")
	require.ErrorIs(t, err, transition.ErrNotAllowed, "never straight to stopped")

	_, err = exec.Fire(ctx, state.Stopping, "force stop")
	require.NoError(t, err)
	end, err := decider(t, teraslice.Roles(), recovery.Policy{}).End(ctx, exec, recovery.Ending{}, nil) // the master, after killing the pods
	require.NoError(t, err)
	require.Equal(t, state.Stopped, end.To)
	_, err = controller.Fire(ctx, state.Completed, "late")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	rec, _ := store.Get(ctx, "ex-1")
	require.Equal(t, []string{"running→stopping", "stopping→stopped"}, moves(rec)[len(moves(rec))-2:])
}

// A guard that vetoes the end the work earned leaves the execution where
// it was and says what to do about it; the error still matches
// transition.ErrGuard and reaches the guard's own.
func TestAGuardsVetoOfTheEndNamesTheFix(t *testing.T) {
	missing := errors.New("frames missing")
	table, err := transition.New("queued").Allow("queued", "rendering", "failed", "done", "cancelled").
		Allow("rendering", "done", "failed", "cancelled").Terminal("done", "failed", "cancelled").
		Guard("rendering", "done", func(context.Context, transition.Change[string], transition.View) error { return missing }).Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("queued").Running("rendering").Failed("failed").Ends("done", "cancelled").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	job, err := transition.NewPersisted(table, store, "shot", transition.PersistedOptions{Actor: "farm"})
	require.NoError(t, err)
	_, err = job.Create(context.Background(), transition.To("rendering"))
	require.NoError(t, err)
	d, err := recovery.NewDecider(roles, recovery.Policy{})
	require.NoError(t, err)
	_, err = d.End(context.Background(), job, recovery.Ending{Finished: true}, nil)
	require.ErrorIs(t, err, transition.ErrGuard)
	require.ErrorIs(t, err, missing)
	require.ErrorContains(t, err, "fix what the guard checks, or end the work otherwise")
	rec, err := store.Get(context.Background(), "shot")
	require.NoError(t, err)
	require.Equal(t, "rendering", rec.Status)
}
