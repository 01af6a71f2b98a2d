package recovery_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// slicer is work that says whether it can be restarted.
type slicer struct{ ok bool }

func (s slicer) IsRestartable() bool { return s.ok }

func policy() recovery.Policy {
	return recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}
}

func record(status state.Status) storage.Record {
	return storage.Record{ID: "ex-1", Status: status.String(), Owner: "pod-a", Epoch: 1, UpdatedAt: t0.Add(-time.Minute), Since: t0.Add(-time.Minute)}
}

func startup(t *testing.T, rec storage.Record, p recovery.Policy) recovery.Verdict[state.Status] {
	t.Helper()
	v, err := recovery.Startup(teraslice.Roles(), rec, p, t0)
	require.NoError(t, err)
	return v
}

func TestStartupTerminalStatusRefusesNamingTheStatus(t *testing.T) {
	for s := range state.TerminalStatuses.All() {
		v := startup(t, record(s), policy())
		require.Equal(t, recovery.DecisionRefuse, v.Decision)
		require.Equal(t, s, v.To)
		require.ErrorIs(t, v.Err, recovery.ErrTerminalStatus)
		require.Contains(t, v.Err.Error(), "in "+s.String()+" status (invalid state: terminal)")
		require.Nil(t, v.Meta)
	}
}

func TestStartupInitStatusStarts(t *testing.T) {
	for s := range state.InitStatuses.All() {
		v := startup(t, record(s), recovery.Policy{})
		require.Equal(t, recovery.DecisionStart, v.Decision, "%s", s)
		require.Equal(t, s, v.To)
	}
}

func TestStartupRelocatingResumesToRememberedStatus(t *testing.T) {
	for _, left := range []state.Status{state.Running, state.Recovering, state.Failing, state.Paused} {
		rec := record(state.Relocating)
		rec.Previous = left.String()
		// Relocation is expected: no failover allowance, no restartability needed.
		v := startup(t, rec, recovery.Policy{})
		require.Equal(t, recovery.DecisionResume, v.Decision)
		require.Equal(t, left, v.To, "a relocated %s execution comes back %s", left, left)
		require.Nil(t, v.Meta, "a relocation is not an unexpected restart")
	}
}

func TestStartupRelocatingWithoutMemoryReinitializes(t *testing.T) {
	for _, prev := range []string{"", "stopping"} {
		rec := record(state.Relocating)
		rec.Previous = prev
		v := startup(t, rec, policy())
		require.Equal(t, recovery.DecisionResume, v.Decision)
		require.Equal(t, state.Initializing, v.To, "previous %q", prev)
	}
}

// A relocation back to a status the table does not know is another
// table's to resume, never this one's to restart.
func TestStartupRelocatingBackToAStatusOfAnotherTableIsForeign(t *testing.T) {
	rec := record(state.Relocating)
	rec.Previous = "garbage"
	_, err := recovery.Startup(teraslice.Roles(), rec, policy(), t0)
	require.ErrorIs(t, err, recovery.ErrForeignStatus)
	require.ErrorIs(t, err, transition.ErrUnknownState)
}

func TestStartupRelocatingPastItsDeadlineFails(t *testing.T) {
	rec := record(state.Relocating)
	rec.Previous = "running"
	rec.Since = t0.Add(-16 * time.Minute)
	rec.UpdatedAt = t0.Add(-time.Second) // re-owned lately: the clock still runs from entering relocating
	v := startup(t, rec, policy())
	require.Equal(t, recovery.DecisionFail, v.Decision)
	require.Equal(t, state.Failed, v.To)
	require.Contains(t, v.Reason, "relocating for 16m0s, past its deadline of 15m0s")
	require.Equal(t, v.Reason, v.Meta[recovery.MetaFailure])
}

func TestStartupStoppingFinishesTheStopAndPastTheDeadlineIsStopped(t *testing.T) {
	v := startup(t, record(state.Stopping), recovery.Policy{})
	require.Equal(t, recovery.DecisionStop, v.Decision)
	require.Equal(t, state.Stopping, v.To)

	rec := record(state.Stopping)
	rec.Since = t0.Add(-time.Hour)
	v = startup(t, rec, recovery.Policy{})
	require.Equal(t, recovery.DecisionStop, v.Decision)
	require.Equal(t, state.Stopped, v.To)
	require.Nil(t, v.Meta, "a stop that timed out is no failure")
}

func TestStartupUnexpectedRestartResumesOnlyRestartableWorkOnARestartingPlatform(t *testing.T) {
	noWork := recovery.Policy{Work: recovery.AsRecorded, Platform: recovery.KubernetesJob, Failovers: teraslice.Failovers}
	for _, tc := range []struct {
		name     string
		policy   recovery.Policy
		recorded string // the execution's MetaRelocatable
		want     recovery.Decision
		reason   string
	}{
		{"restartable, platform restarts", policy(), "", recovery.DecisionResume, "unexpected restart 1, 3 within 30m0s allowed"},
		{"platform does not restart", recovery.Policy{Work: slicer{true}}, "", recovery.DecisionFail, "the platform (unmanaged) does not restart controllers"},
		{"work says no", recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{false}, Failovers: teraslice.Failovers}, "", recovery.DecisionFail, "the work is not restartable"},
		{"work says no over the record's yes", recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{false}, Failovers: teraslice.Failovers}, "true", recovery.DecisionFail, "the work is not restartable"},
		{"a plain flag", recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(false), Failovers: teraslice.Failovers}, "", recovery.DecisionFail, "the work is not restartable"},
		{"no work, nothing recorded", noWork, "", recovery.DecisionFail, "nothing says the work is restartable"},
		{"no work, recorded yes", noWork, "true", recovery.DecisionResume, "unexpected restart 1, 3 within 30m0s allowed"},
		{"no work, recorded no", noWork, "false", recovery.DecisionFail, "the execution's recorded flag says its work is not restartable"},
		{"no work, recorded garbage", noWork, "yes", recovery.DecisionFail, `the recorded execfsm.relocatable="yes" is neither true nor false`},
	} {
		for _, s := range []state.Status{state.Running, state.Recovering, state.Failing, state.Paused} {
			rec := record(s)
			if tc.recorded != "" {
				rec.Meta = map[string]string{recovery.MetaRelocatable: tc.recorded}
			}
			v := startup(t, rec, tc.policy)
			require.Equal(t, tc.want, v.Decision, "%s: %s", tc.name, s)
			require.Contains(t, v.Reason, tc.reason)
			if tc.want == recovery.DecisionResume {
				require.Equal(t, s, v.To, "a crash does not change what the execution was doing")
			} else {
				require.Equal(t, state.Failed, v.To)
				require.Contains(t, v.Reason, "restarted unexpectedly in "+s.String())
				require.Equal(t, v.Reason, v.Meta[recovery.MetaFailure], "never a quiet exit: the reason is written")
			}
		}
	}
}

// The work's answer is recorded with every startup decision that writes,
// so the flag on the execution is never older than its last controller.
func TestStartupRecordsWhatTheWorkSaysAboutRestarting(t *testing.T) {
	for _, s := range []state.Status{state.Initializing, state.Running, state.Relocating, state.Stopping} {
		for _, ok := range []bool{true, false} {
			p := policy()
			p.Work = slicer{ok}
			v := startup(t, record(s), p)
			require.Equal(t, strconv.FormatBool(ok), v.Meta[recovery.MetaRelocatable], "%s", s)

			rec := record(s)
			rec.Meta = map[string]string{recovery.MetaRelocatable: strconv.FormatBool(ok)}
			v = startup(t, rec, p)
			_, written := v.Meta[recovery.MetaRelocatable]
			require.False(t, written, "an unchanged flag is not written again")
		}
		v := startup(t, record(s), recovery.Policy{})
		_, written := v.Meta[recovery.MetaRelocatable]
		require.False(t, written, "without Work nothing is known to record")
	}
	v := startup(t, record(state.Completed), policy())
	require.Nil(t, v.Meta, "a refusal writes nothing")
}

// Written through Decider.Start: the creation's flag (the cluster master's)
// is refreshed by the controller that starts.
func TestDeciderStartRefreshesTheRecordedFlag(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(ctx, transition.Update[state.Status]{To: state.Initializing, Meta: map[string]string{recovery.MetaRelocatable: "true"}})
	require.NoError(t, err)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-a"})
	require.NoError(t, err)
	_, err = decider(t, teraslice.Roles(), recovery.Policy{Work: recovery.Restartability(false)}).Start(ctx, exec, lease("pod-a"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Ownership().Release(ctx) })
	rec, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "false", rec.Meta[recovery.MetaRelocatable])
	got, ok := recovery.RecordedRestartability(rec)
	require.True(t, ok)
	require.False(t, bool(got))
}

func TestStartupRestartsOutsideTheWindowDoNotCount(t *testing.T) {
	rec := record(state.Running)
	old := t0.Add(-2 * time.Hour).UnixMilli()
	recent := t0.Add(-time.Minute).UnixMilli()
	rec.Meta = map[string]string{recovery.MetaFailovers: fmt.Sprintf("%d,%d,%d,%d", old, old, old, recent)}
	v := startup(t, rec, policy())
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, fmt.Sprintf("0@%d:%d,%d", old, recent, t0.UnixMilli()), v.Meta[recovery.MetaFailovers],
		"old restarts are dropped; the first is remembered")
}

func TestStartupUnreadableFailoverCountFailsInsteadOfLooping(t *testing.T) {
	rec := record(state.Running)
	rec.Meta = map[string]string{recovery.MetaFailovers: "yesterday,-5"}
	v := startup(t, rec, policy())
	require.Equal(t, recovery.DecisionFail, v.Decision)
	require.Contains(t, v.Reason, "the failover count is unreadable")
}

func TestStartupRefusesInputItCannotDecideOn(t *testing.T) {
	good := policy()
	for name, p := range map[string]recovery.Policy{
		"negative failovers":    {Failovers: recovery.Allowance{Count: -1}},
		"negative window":       {Failovers: recovery.Allowance{Count: 3, Window: -time.Second}},
		"overflowing exit code": {Platform: recovery.Platform{Restart: recovery.RestartOnFailure, RelocateExitCode: 256}},
	} {
		_, err := recovery.Startup(teraslice.Roles(), record(state.Running), p, t0)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
		_, err = recovery.Terminate(teraslice.Roles(), record(state.Running), storage.Claim{}, p)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
		_, err = recovery.NewDecider(teraslice.Roles(), p)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, "NewDecider: %s", name)
	}
	rec := record(state.Running)
	rec.Status = "Running"
	_, err := recovery.Startup(teraslice.Roles(), rec, good, t0)
	require.ErrorIs(t, err, transition.ErrUnknownState)
	_, err = recovery.Startup[state.Status](nil, record(state.Running), good, t0)
	require.ErrorIs(t, err, recovery.ErrInvalidPolicy, "nil roles")
}

// newExecution creates ex-1 in status s in a fresh store and returns an
// unclaimed handle on it.
func newExecution(t *testing.T, s state.Status, clock func() time.Time) (*transition.Persisted[state.Status], *storage.Memory) {
	t.Helper()
	store := storage.NewMemory()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Clock: clock})
	require.NoError(t, err)
	_, err = exec.Create(context.Background(), transition.To(s).Because("test"))
	require.NoError(t, err)
	clocks.Store(exec, clock)
	return exec, store
}

// clocks are the clocks the handles of newExecution were made with.
var clocks sync.Map

// owner takes the execution of exec over for pod, with a handle of its
// own on the same clock.
func owner(t *testing.T, exec *transition.Persisted[state.Status], pod string) *transition.Persisted[state.Status] {
	t.Helper()
	opts := transition.PersistedOptions{Actor: pod}
	if clock, ok := clocks.Load(exec); ok {
		opts.Clock = clock.(func() time.Time)
	}
	owned, err := transition.NewPersisted(exec.Table(), exec.Store(), exec.ID(), opts)
	require.NoError(t, err)
	_, _, err = owned.Acquire(context.Background(), lease(pod), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = owned.Ownership().Release(context.Background()) })
	clocks.Store(owned, opts.Clock)
	return owned
}

// crashed plays pod's controller dying: it owned exec and its lease ended.
func crashed(t *testing.T, exec *transition.Persisted[state.Status], pod string) *transition.Persisted[state.Status] {
	t.Helper()
	owned := owner(t, exec, pod)
	require.NoError(t, owned.Ownership().Release(context.Background()))
	return owned
}

func lease(pod string) storage.Lease { return storage.Lease{Holder: pod, TTL: time.Minute} }

// A crash loop is impossible by construction: 100 consecutive unexpected
// restarts resume exactly the failovers allowed (none for a zero
// allowance: a count means what it says), then fail, then refuse.
func TestHundredUnexpectedRestartsEndInFailedAfterExactlyTheAllowance(t *testing.T) {
	for _, budget := range []int{0, 1, 3, 7} {
		now := t0
		exec, _ := newExecution(t, state.Running, func() time.Time { return now })
		want := budget
		var decisions []recovery.Decision
		for k := range 100 {
			now = now.Add(time.Second) // all within the window
			p := recovery.Policy{Clock: func() time.Time { return now }, Platform: recovery.KubernetesJob, Work: slicer{true},
				Failovers: recovery.Allowance{Count: budget, Window: 30 * time.Minute}}
			owned := controllerOf(t, exec, fmt.Sprintf("pod-%d", k+1))
			v, err := decider(t, teraslice.Roles(), p).Start(context.Background(), owned, lease(fmt.Sprintf("pod-%d", k+1)))
			decisions = append(decisions, v.Decision)
			if v.Decision == recovery.DecisionRefuse {
				require.ErrorIs(t, err, recovery.ErrTerminalStatus)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("pod-%d", k+1), owned.Claim().Owner)
			// The controller is OOM-killed: its lease ends, the status stays.
			require.NoError(t, owned.Ownership().Release(context.Background()))
		}
		for k, d := range decisions {
			switch {
			case k < want:
				require.Equal(t, recovery.DecisionResume, d, "budget %d, restart %d", budget, k+1)
			case k == want:
				require.Equal(t, recovery.DecisionFail, d, "budget %d, restart %d", budget, k+1)
			default:
				require.Equal(t, recovery.DecisionRefuse, d, "budget %d, restart %d", budget, k+1)
			}
		}
		cur, rec, err := exec.Load(context.Background())
		require.NoError(t, err)
		require.Equal(t, state.Failed, cur)
		require.Contains(t, rec.Reason, "failovers spent")
		require.Contains(t, rec.Meta[recovery.MetaFailure], "failovers spent")
	}
}

func TestDeciderStartFencesThePreviousOwner(t *testing.T) {
	exec, store := newExecution(t, state.Relocating, time.Now)
	old := crashed(t, exec, "pod-0")
	owned := controllerOf(t, exec, "pod-1")
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), owned, lease("pod-1"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, storage.Claim{Owner: "pod-1", Epoch: 2}, owned.Claim())
	_, err = old.Fire(context.Background(), state.Failed, "old pod")
	require.ErrorIs(t, err, storage.ErrFenced)
	rec, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Equal(t, "initializing", rec.Status, "no memory of what it left: re-initialize")
}

func TestDeciderStartRefusalWritesNothing(t *testing.T) {
	exec, store := newExecution(t, state.Completed, time.Now)
	before, _ := store.Get(context.Background(), "ex-1")
	owned := controllerOf(t, exec, "pod-1")
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), owned, lease("pod-1"))
	require.ErrorIs(t, err, recovery.ErrTerminalStatus)
	require.Equal(t, recovery.DecisionRefuse, v.Decision)
	require.Nil(t, owned.Ownership())
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, before.Revision, after.Revision)
	// Nothing is held either: an operator's tool may take it.
	own, _, err := store.Acquire(context.Background(), "ex-1", lease("operator"))
	require.NoError(t, err)
	require.NoError(t, own.Release(context.Background()))
}

// An execution that became terminal between the decision and the
// take-over is refused on the fresh record, and nothing is written or
// held: the start is one write.
func TestDeciderStartWritesNothingWhenTheExecutionEndedMeanwhile(t *testing.T) {
	store := &stoppingOnAcquire{Memory: storage.NewMemory()}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(context.Background(), transition.To(state.Stopping))
	require.NoError(t, err)
	store.master, err = transition.NewPersisted(teraslice.Lifecycle(), store.Memory, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), exec, lease("pod-1"))
	require.ErrorIs(t, err, recovery.ErrTerminalStatus)
	require.Equal(t, recovery.DecisionRefuse, v.Decision)
	require.Nil(t, exec.Ownership())
	rec, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Empty(t, rec.Owner, "the take-over was never written")
	require.Equal(t, "stopped", rec.Status)
	own, _, err := store.Memory.Acquire(context.Background(), "ex-1", lease("operator"))
	require.NoError(t, err, "nothing is held")
	require.NoError(t, own.Release(context.Background()))
}

// stoppingOnAcquire plays a master that finishes a stop just before a
// controller's take-over lands.
type stoppingOnAcquire struct {
	*storage.Memory
	master *transition.Persisted[state.Status]
}

func (s *stoppingOnAcquire) Acquire(ctx context.Context, id string, l storage.Lease) (storage.Ownership, storage.Record, error) {
	if _, err := s.master.Fire(ctx, state.Stopped, "stop finished"); err != nil {
		return nil, storage.Record{}, err
	}
	return s.Memory.Acquire(ctx, id, l)
}

func TestStartupOwnershipOnMemory(t *testing.T) {
	recoverytest.RunOwnership(t, func(*testing.T) storage.Store { return storage.NewMemory() }, recoverytest.Options{})
}

func TestStartupReasonsAreForPeople(t *testing.T) {
	rec := record(state.Paused)
	v := startup(t, rec, recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: recovery.Allowance{Count: 1}})
	require.True(t, strings.HasPrefix(v.Reason, "controller restarted unexpectedly in paused status; resuming"), v.Reason)
	require.Equal(t, "resume", v.Decision.String())
	require.Equal(t, "Decision(9)", recovery.Decision(9).String())
	require.Equal(t, "none", recovery.Decision(0).String())
}

func TestDeciderStartUnderAnOwnershipItAlreadyHoldsDoesNotTakeOverAgain(t *testing.T) {
	exec, store := newExecution(t, state.Relocating, time.Now)
	crashed(t, exec, "pod-0")
	owned := owner(t, exec, "pod-1") // a plain take-over, no startup yet
	claim := owned.Claim()
	v, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), owned, lease("pod-1"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, claim, owned.Claim(), "no second epoch bump")
	rec, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, uint64(2), rec.Epoch)
	require.Equal(t, "initializing", rec.Status)
	again, err := decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), owned, lease("pod-1"))
	require.NoError(t, err)
	require.Equal(t, v.Decision, again.Decision, "a retry returns the verdict written")
	after, _ := store.Get(context.Background(), "ex-1")
	require.Equal(t, rec.Revision, after.Revision, "and writes nothing")
}

// controllerOf returns a fresh handle of pod's on the execution of exec,
// as a controller process makes one.
func controllerOf(t *testing.T, exec *transition.Persisted[state.Status], pod string) *transition.Persisted[state.Status] {
	t.Helper()
	opts := transition.PersistedOptions{Actor: pod}
	if clock, ok := clocks.Load(exec); ok {
		opts.Clock = clock.(func() time.Time)
	}
	c, err := transition.NewPersisted(exec.Table(), exec.Store(), exec.ID(), opts)
	require.NoError(t, err)
	return c
}

// The library's counts read as people read them; anything else is left
// to be shown as it is.
func TestCountTextSaysTheCountsOnly(t *testing.T) {
	when := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	text, ok := recovery.CountText(recovery.MetaFailovers, "1796374800000", when)
	require.True(t, ok)
	require.Equal(t, "1 unexpected restarts: 2026-12-04T09:00:00Z", text)
	text, ok = recovery.CountText(transition.CountKey("retries"), "3@1796374800000:1796375100000", when)
	require.True(t, ok)
	require.Equal(t, "4 retries moves counted, the last 1: 2026-12-04T09:05:00Z", text)
	_, ok = recovery.CountText(recovery.MetaFailovers, "soon", when)
	require.False(t, ok)
	_, ok = recovery.CountText("owner", "1796374800000", when)
	require.False(t, ok)
}

// The take-over that records a crash restart stays in the audit trail
// however much progress the resumed controller writes after it: progress
// goes first when the trail is full.
func TestACrashRestartStaysInTheTrailThroughAFloodOfProgress(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(ctx, transition.To(state.Running).Because("placed"))
	require.NoError(t, err)
	pod, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "pod-b"})
	require.NoError(t, err)
	d, err := recovery.NewDecider(teraslice.Roles(), policy())
	require.NoError(t, err)
	v, err := d.Start(ctx, pod, storage.Lease{Holder: "pod-b", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	for k := range 3 * storage.DefaultHistoryLimit {
		_, _, err := pod.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.To(cur).Set("slices", strconv.Itoa(k)), nil
		})
		require.NoError(t, err)
	}
	rec, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)
	var reasons []string
	for _, e := range rec.History.All() {
		reasons = append(reasons, e.Reason)
	}
	require.Len(t, reasons, storage.DefaultHistoryLimit)
	require.Equal(t, "placed", reasons[0], "the creation, a move, is kept")
	require.Equal(t, v.Reason, reasons[1], "the take-over that counted the crash restart is kept")
}
