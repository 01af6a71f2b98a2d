package recovery_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

var podA = storage.Claim{Owner: "pod-a", Epoch: 1}

func terminate(t *testing.T, s state.Status, p recovery.Policy) recovery.Action {
	t.Helper()
	a, err := recovery.Terminate(teraslice.Roles(), record(s), podA, p)
	require.NoError(t, err)
	return a
}

func TestTerminateWhileStoppingShutsDown(t *testing.T) {
	a := terminate(t, state.Stopping, policy())
	require.Equal(t, recovery.ActionShutdown, a.Kind)
	require.Zero(t, a.ExitCode)
	require.Contains(t, a.Reason, "the cluster master asked to stop")
}

func TestTerminateInARunningStatusRelocatesRestartableWork(t *testing.T) {
	for _, s := range []state.Status{state.Running, state.Recovering, state.Failing, state.Paused, state.Relocating} {
		a := terminate(t, s, policy())
		require.Equal(t, recovery.ActionRelocate, a.Kind, "%s", s)
		require.Equal(t, recovery.DefaultRelocateExitCode, a.ExitCode, "never 0: a Job would count it a success")
	}
	p := policy()
	p.Platform.RelocateExitCode = 3
	require.Equal(t, 3, terminate(t, state.Running, p).ExitCode)
}

func TestTerminateShutsDownWhatCannotBeRestarted(t *testing.T) {
	for name, p := range map[string]recovery.Policy{
		"platform does not restart":          {Work: slicer{true}},
		"work not restartable":               {Platform: recovery.KubernetesJob, Work: slicer{false}},
		"work that says nothing":             {Platform: recovery.KubernetesJob, Work: recovery.AsRecorded},
		"a platform whose SIGTERM is a stop": {Platform: recovery.SystemdOnFailure, Work: slicer{true}},
	} {
		a := terminate(t, state.Running, p)
		require.Equal(t, recovery.ActionShutdown, a.Kind, name)
		require.Zero(t, a.ExitCode, name)
	}
	for s := range state.InitStatuses.Union(state.TerminalStatuses).All() {
		require.Equal(t, recovery.ActionShutdown, terminate(t, s, policy()).Kind, "%s", s)
	}
}

// A SIGTERM may come before the controller has loaded its work: the flag
// recorded on the execution answers for it.
func TestTerminateAsksTheRecordedFlagWhenTheWorkCannotAnswer(t *testing.T) {
	noWork := recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob}
	for flag, want := range map[string]recovery.ActionKind{"true": recovery.ActionRelocate, "false": recovery.ActionShutdown, "": recovery.ActionShutdown} {
		rec := record(state.Running)
		rec.Meta = map[string]string{recovery.MetaRelocatable: flag}
		a, err := recovery.Terminate(teraslice.Roles(), rec, podA, noWork)
		require.NoError(t, err)
		require.Equal(t, want, a.Kind, "recorded %q", flag)
	}
	rec := record(state.Running)
	rec.Meta = map[string]string{recovery.MetaRelocatable: "true"}
	p := noWork
	p.Work = slicer{false}
	a, err := recovery.Terminate(teraslice.Roles(), rec, podA, p)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionShutdown, a.Kind, "the work's own answer wins over the record's")
}

func TestTerminateLeavesAnExecutionSomeoneElseOwns(t *testing.T) {
	rec := record(state.Running)
	rec.Owner, rec.Epoch = "pod-b", 2
	p := policy()
	p.Platform.RelocateExitCode = 75
	a, err := recovery.Terminate(teraslice.Roles(), rec, podA, p)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	require.Equal(t, "leave", a.Kind.String())
	require.Equal(t, 75, a.ExitCode, "the execution has not ended: the platform must not count the controller's exit a success")

	p.Platform = recovery.Unmanaged
	a, err = recovery.Terminate(teraslice.Roles(), rec, podA, p)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	require.Equal(t, 0, a.ExitCode, "a platform that restarts nothing reads no exit status")
}

// A controller that gives up an execution without a decision (its start
// stopped waiting for a live holder) exits as a Leave does.
func TestPolicyLeaveExitCode(t *testing.T) {
	require.Equal(t, 0, recovery.Policy{}.LeaveExitCode())
	require.Equal(t, 0, recovery.Policy{Platform: recovery.Platform{RelocateExitCode: 75}}.LeaveExitCode())
	require.Equal(t, recovery.DefaultRelocateExitCode, recovery.Policy{Platform: recovery.KubernetesJob}.LeaveExitCode())
	require.Equal(t, 75, recovery.Policy{Platform: recovery.Platform{Restart: recovery.RestartOnFailure, Drains: true, RelocateExitCode: 75}}.LeaveExitCode())
}

func TestDeciderTerminateCheckpointsThenWritesRelocatingRememberingTheStatus(t *testing.T) {
	exec, store := newExecution(t, state.Paused, time.Now)
	owned := owner(t, exec, "pod-0")
	checkpoints := 0
	a, err := decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}).Terminate(context.Background(), owned, func(context.Context) error {
		checkpoints++
		rec, _ := store.Get(context.Background(), "ex-1")
		require.Equal(t, "paused", rec.Status, "checkpoint runs before the status changes")
		return nil
	})

	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	require.NoError(t, a.CheckpointErr)
	require.Equal(t, 1, checkpoints)
	rec, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, "relocating", rec.Status)
	require.Equal(t, "paused", rec.Previous)

	require.NoError(t, a.ReleaseErr)
	select {
	case <-owned.Ownership().Lost():
	default:
		t.Fatal("the relocating controller still owns the execution")
	}
	_, err = owned.Fire(context.Background(), state.Failed, "late write")
	require.ErrorIs(t, err, storage.ErrFenced, "a relocated controller writes nothing more")

	// The successor takes over at once and brings it back paused.
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), controllerOf(t, exec, "pod-1"), lease("pod-1"))
	require.NoError(t, err)
	require.Equal(t, state.Paused, v.To)
}

func TestDeciderTerminateRelocatesEvenWhenTheCheckpointFails(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	errFlush := errors.New("flush failed")
	a, err := decider(t, teraslice.Roles(),
		recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}).Terminate(context.Background(), owner(t, exec, "pod-0"),
		func(context.Context) error { return errFlush })

	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	require.ErrorIs(t, a.CheckpointErr, errFlush)
	rec, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, "relocating", rec.Status)
}

// A controller sent SIGTERM before its first start (its handle has taken
// nothing over, so to transition.Persisted it is an outside authority's)
// leaves, writing nothing over the controller that holds the execution:
// found by fleettest, where it wrote relocating over a killed
// predecessor's record. It exits as a relocation does: on a Job an exit
// 0 would complete the Job, and nothing would replace the killed
// predecessor (fleettest's JobEndsWithExecution).
func TestDeciderTerminateBeforeAnyStartLeavesAndWritesNothing(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	owner(t, exec, "pod-0")
	before, _ := store.Get(context.Background(), "ex-1")
	successor, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-1"})
	require.NoError(t, err)
	a, err := decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}).Terminate(context.Background(), successor, nil)

	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	require.Equal(t, recovery.DefaultRelocateExitCode, a.ExitCode)
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before, after)

	a, err = decider(t, teraslice.Roles(), recovery.Policy{Work: slicer{true}}).Terminate(context.Background(), successor, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	require.Equal(t, 0, a.ExitCode, "a platform that restarts nothing")
}

func TestDeciderTerminateShutdownWritesNothing(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	controller := owner(t, exec, "pod-0")
	before, _ := store.Get(context.Background(), "ex-1")
	a, err := decider(t, teraslice.Roles(), recovery.Policy{Work: slicer{true}}).Terminate(context.Background(), controller, func(context.Context) error {
		t.Fatal("no checkpoint for a shutdown")
		return nil
	})

	require.NoError(t, err)
	require.Equal(t, recovery.ActionShutdown, a.Kind)
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before.Revision, after.Revision, "the shutdown itself writes the final status, not the decision")
}

func TestDeciderTerminateByAFencedControllerLeaves(t *testing.T) {
	exec, store := newExecution(t, state.Running, time.Now)
	stale := crashed(t, exec, "pod-0")
	owner(t, exec, "pod-1")
	before, _ := store.Get(context.Background(), "ex-1")
	a, err := decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}).Terminate(context.Background(), stale, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionLeave, a.Kind)
	require.Equal(t, recovery.DefaultRelocateExitCode, a.ExitCode)
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before.Revision, after.Revision)
}

// The race Teraslice gets wrong: SIGTERM reaches the controller while the
// cluster master writes stopping. Whatever the interleaving there is
// exactly one outcome: the controller relocated before the stop (the
// trail shows relocating, then stopping) or it saw the stop and shut
// down (the execution never entered relocating).
func TestDeciderTerminateRacingTheClusterMastersStopHasExactlyOneOutcome(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 200
	}
	counts := map[recovery.ActionKind]int{}
	for range rounds {
		_, store := newExecution(t, state.Running, time.Now)
		controller, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "controller"})
		require.NoError(t, err)
		controller = owner(t, controller, "pod-0")
		master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)

		var wg sync.WaitGroup
		var action recovery.Action
		var termErr, stopErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			action, termErr = decider(t, teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}).Terminate(context.Background(), controller, nil)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, stopErr = master.Fire(context.Background(), state.Stopping, "user stop")
		}()
		close(start)
		wg.Wait()
		require.NoError(t, termErr)
		require.NoError(t, stopErr, "stopping is allowed from running and from relocating")

		rec, err := store.Get(context.Background(), "ex-1")
		require.NoError(t, err)
		require.Equal(t, "stopping", rec.Status)
		var trail []string
		for _, e := range rec.History.Entries()[1:] {
			if e.From != e.To { // the take-over keeps the status
				trail = append(trail, e.To)
			}
		}
		switch action.Kind {
		case recovery.ActionRelocate:
			require.Equal(t, []string{"relocating", "stopping"}, trail)
		case recovery.ActionShutdown:
			require.Equal(t, []string{"stopping"}, trail)
		default:
			t.Fatalf("unexpected action %v", action.Kind)
		}
		counts[action.Kind]++
	}
	t.Logf("relocated first %d times, saw the stop first %d times", counts[recovery.ActionRelocate], counts[recovery.ActionShutdown])
}

// TestDecisionTableInPackageDocIsTrue recomputes every cell of the table
// in doc.go from the functions and fails if the doc disagrees.
func TestDecisionTableInPackageDocIsTrue(t *testing.T) {
	requireDocTable(t, "stored status  start", func(s state.Status) []string {
		return []string{startCell(t, s, false), sigtermCell(t, s), stopCell(t, s), startCell(t, s, true)}
	})
}

// requireDocTable checks the table in doc.go headed by header: one row
// per status, whose cells after the status are what cells computes.
func requireDocTable(t *testing.T, header string, cells func(state.Status) []string) {
	t.Helper()
	rows := docTable(t, header)
	require.Len(t, rows, state.NumStatuses, "one row per status")
	for _, row := range rows {
		s, err := state.Parse(row[0])
		require.NoError(t, err)
		require.Equal(t, append([]string{row[0]}, cells(s)...), row)
	}
}

func tableRecord(s state.Status) storage.Record {
	rec := record(s)
	if s == state.Relocating {
		rec.Previous = "paused"
	}
	return rec
}

func startCell(t *testing.T, s state.Status, budgetSpent bool) string {
	rec := tableRecord(s)
	now := t0
	if budgetSpent {
		// Three unexpected restarts already within the window.
		rec.Meta = map[string]string{recovery.MetaFailovers: strings.Repeat("1764676800000,", 2) + "1764676800000"}
		now = time.UnixMilli(1764676800000).Add(time.Minute)
		rec.Since, rec.UpdatedAt = now.Add(-time.Second), now.Add(-time.Second)
	}
	v, err := recovery.Startup(teraslice.Roles(), rec, policy(), now)
	require.NoError(t, err)
	cell := v.Decision.String()
	if v.To != v.From && (v.Decision == recovery.DecisionResume || v.Decision == recovery.DecisionFail) {
		cell += " → " + v.To.String()
	}
	return cell
}

func sigtermCell(t *testing.T, s state.Status) string {
	a, err := recovery.Terminate(teraslice.Roles(), tableRecord(s), podA, policy())
	require.NoError(t, err)
	cell := a.Kind.String()
	if a.Kind == recovery.ActionRelocate && s != state.Relocating {
		cell += " → relocating"
	}
	return cell
}

func stopCell(t *testing.T, s state.Status) string {
	m, err := transition.NewMachineAt(teraslice.Lifecycle(), s, transition.MachineOptions{})
	require.NoError(t, err)
	c, err := m.Fire(context.Background(), state.Stopping, "user stop")
	switch {
	case errors.Is(err, transition.ErrNotAllowed):
		return "refused"
	case err != nil:
		t.Fatal(err)
	case !c.Changed():
		return "no-op"
	}
	return "→ stopping"
}

// docTable returns the cells of the table in doc.go whose header line
// starts with header, one row per line, columns split at two spaces.
func docTable(t *testing.T, header string) [][]string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var rows [][]string
	split := regexp.MustCompile(`\s{2,}`)
	inTable := false
	for _, line := range strings.Split(string(src), "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		switch {
		case ok && strings.HasPrefix(body, header):
			inTable = true
		case ok && inTable:
			rows = append(rows, split.Split(strings.TrimSpace(body), -1))
		case inTable:
			inTable = false
		}
	}
	require.NotEmpty(t, rows, "no table headed %q in doc.go", header)
	return rows
}
