package flink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/flink"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

// deployment is a FlinkDeployment the operator drives: its record, moved
// as the operator moves and observes its job, on a clock the test turns.
type deployment struct {
	t     *testing.T
	roles *recovery.Roles[flink.JobStatus]
	store *storage.Memory
	clock *reconciletest.Clock
	exec  *transition.Persisted[flink.JobStatus]
	d     *recovery.Decider[flink.JobStatus]
}

func newDeployment(t *testing.T, o flink.Options, meta map[string]string) *deployment {
	t.Helper()
	roles, err := flink.Roles(o)
	require.NoError(t, err)
	dep := &deployment{t: t, roles: roles, store: storage.NewMemory(), clock: reconciletest.NewClock(t0)}
	dep.d, err = recovery.NewDecider(roles, recovery.Policy{Manager: true, Clock: dep.clock.Now})
	require.NoError(t, err)
	dep.exec = dep.operator("flink-operator-0")
	_, err = dep.exec.Create(bg, transition.Update[flink.JobStatus]{To: flink.Reconciling, Meta: meta})
	require.NoError(t, err)
	return dep
}

// operator returns a handle of an operator process on the deployment.
func (dep *deployment) operator(name string) *transition.Persisted[flink.JobStatus] {
	exec, err := transition.NewPersisted(flink.Lifecycle(), dep.store, "word-count", transition.PersistedOptions{Actor: name, Clock: dep.clock.Now})
	require.NoError(dep.t, err)
	return exec
}

// move makes the operator's moves, a second apart.
func (dep *deployment) move(why string, to ...flink.JobStatus) {
	dep.t.Helper()
	for _, s := range to {
		dep.clock.Advance(time.Second)
		_, err := dep.exec.Fire(bg, s, why)
		require.NoError(dep.t, err, "%s: to %s", why, s)
	}
}

func (dep *deployment) status() flink.JobStatus {
	dep.t.Helper()
	s, _, err := dep.exec.Load(bg)
	require.NoError(dep.t, err)
	return s
}

func (dep *deployment) count(counter string) int {
	dep.t.Helper()
	rec, err := dep.store.Get(bg, "word-count")
	require.NoError(dep.t, err)
	c, err := transition.CountOf(rec, counter)
	require.NoError(dep.t, err)
	return c.Total()
}

func (dep *deployment) startup() recovery.Verdict[flink.JobStatus] {
	dep.t.Helper()
	rec, err := dep.store.Get(bg, "word-count")
	require.NoError(dep.t, err)
	v, err := recovery.Startup(dep.roles, rec, recovery.Policy{Manager: true}, dep.clock.Now())
	require.NoError(dep.t, err)
	return v
}

// Deploy, then each upgrade mode: the job stops (with a savepoint, with
// its HA metadata, or cancelled) and is redeployed; nothing counts as a
// failure or a recovery.
func TestDeployAndUpgradeInEveryMode(t *testing.T) {
	dep := newDeployment(t, flink.OperatorDefaults, nil)
	require.Equal(t, recovery.DecisionStart, dep.startup().Decision, "a new resource is deployed")
	dep.move("deployed", flink.Created, flink.Running)

	dep.move("upgrade: stop-with-savepoint", flink.Finished, flink.Reconciling, flink.Running)
	dep.move("upgrade: last-state, JobManager deleted, HA metadata kept", flink.Finished, flink.Reconciling, flink.Initializing, flink.Running)
	dep.move("upgrade: stateless, cancel", flink.Cancelling)
	end, ok := dep.roles.End(flink.Cancelling)
	require.True(t, ok)
	dep.move("cancel completed", end, flink.Reconciling, flink.Running)
	require.Equal(t, flink.Running, dep.status())
	require.Zero(t, dep.count(flink.Failures))
	require.Zero(t, dep.count(flink.Recoveries))
}

// A suspended job is parked: a restarted operator waits, no timer or
// Reaper ends it, and a resume redeploys it.
func TestASuspendedJobWaitsForItsResume(t *testing.T) {
	dep := newDeployment(t, flink.RestartingFailed, nil)
	dep.move("deployed", flink.Running)
	dep.move("spec.job.state: suspended", flink.Suspended)
	require.Equal(t, recovery.DecisionWait, dep.startup().Decision)
	dep.clock.Advance(1000 * time.Hour)
	_, ok, err := dep.roles.Due(mustGet(t, dep.store), dep.clock.Now())
	require.NoError(t, err)
	require.False(t, ok, "nothing ends a suspended job")
	dep.move("spec.job.state: running", flink.Reconciling, flink.Running)
}

// A JobManager lost under a running job: it is recovered from its last
// state, counted as a recovery, never as a failure.
func TestLastStateRecoveryIsNoFailure(t *testing.T) {
	dep := newDeployment(t, flink.RestartingFailed, nil)
	dep.move("deployed", flink.Running)
	dep.move("JobManager deployment missing; HA metadata found", flink.Reconciling, flink.Running)
	dep.move("Flink's own restart strategy", flink.Failing, flink.Restarting, flink.Running)
	require.Equal(t, 1, dep.count(flink.Recoveries))
	require.Zero(t, dep.count(flink.Failures), "neither a recovery nor Flink's own restart is a failure")
}

// With restart on failure, a failed job is resubmitted once its backoff
// is over, by the operator's own loop (Advance) or, while no operator
// runs, the Reaper; the backoff doubles.
func TestAFailedJobIsResubmittedAfterItsBackoff(t *testing.T) {
	dep := newDeployment(t, flink.RestartingFailed, nil)
	dep.move("deployed", flink.Running)
	dep.move("job failed: NullPointerException", flink.Failed)
	require.Equal(t, 1, dep.count(flink.Failures))

	e, wait, err := dep.d.Advance(bg, dep.exec)
	require.NoError(t, err)
	require.Zero(t, e.Cause)
	require.Equal(t, 10*time.Second, wait)
	v := dep.startup()
	require.Equal(t, recovery.DecisionWait, v.Decision, "a restarted operator waits for the backoff too")
	require.Equal(t, dep.clock.Now().Add(wait), v.Until)
	dep.clock.Advance(wait)
	e, _, err = dep.d.Advance(bg, dep.exec)
	require.NoError(t, err)
	require.Equal(t, recovery.Enforced[flink.JobStatus]{ID: "word-count", From: flink.Failed, To: flink.Reconciling,
		Cause: recovery.CauseTimer, Reason: "FAILED for 10s: failures's backoff is over",
		Timer: recovery.Timer[flink.JobStatus]{State: flink.Failed, Budget: flink.Failures, Then: flink.Reconciling},
		Due:   dep.clock.Now()}, e)
	dep.move("resubmitted", flink.Running)

	dep.move("job failed again", flink.Failed)
	reaper, err := dep.d.NewReaper(dep.store, recovery.ReaperOptions{Clock: dep.clock})
	require.NoError(t, err)
	res, err := reaper.Reconcile(bg, "word-count")
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, res.RequeueAfter, "the second failure waits twice as long")
	dep.clock.Advance(res.RequeueAfter)
	_, err = reaper.Reconcile(bg, "word-count")
	require.NoError(t, err)
	require.Equal(t, flink.Reconciling, dep.status())
}

// Without restart on failure a failed job waits for a spec change, as the
// operator's does; with a limit of its own, the failure past it too.
func TestAFailedJobStaysFailedWithoutRestartOrPastItsLimit(t *testing.T) {
	dep := newDeployment(t, flink.OperatorDefaults, nil)
	dep.move("deployed", flink.Running)
	dep.move("job failed", flink.Failed)
	e, wait, err := dep.d.Advance(bg, dep.exec)
	require.NoError(t, err)
	require.Zero(t, e.Cause)
	require.Zero(t, wait)
	require.Equal(t, recovery.DecisionWait, dep.startup().Decision)

	dep = newDeployment(t, flink.RestartingFailed, map[string]string{recovery.LimitKey(flink.Failures): "1"})
	dep.move("deployed", flink.Running)
	dep.move("failed", flink.Failed)
	dep.clock.Advance(time.Minute)
	e, _, err = dep.d.Advance(bg, dep.exec)
	require.NoError(t, err)
	require.Equal(t, flink.Reconciling, e.To, "the first failure is within the job's limit")
	dep.move("resubmitted", flink.Running)
	dep.move("failed again", flink.Failed)
	dep.clock.Advance(time.Hour)
	e, wait, err = dep.d.Advance(bg, dep.exec)
	require.NoError(t, err)
	require.Zero(t, e.Cause, "past its limit nothing resubmits it")
	require.Zero(t, wait)
	require.Equal(t, flink.Failed, dep.status())
	require.Equal(t, recovery.DecisionWait, dep.startup().Decision)
}

// What a restarted operator does with a deployment in each status, and
// its SIGTERM: every deployment handed over as it is.
func TestTheOperatorRestartsAndHandsOverInEveryStatus(t *testing.T) {
	roles, err := flink.Roles(flink.OperatorDefaults)
	require.NoError(t, err)
	for status, want := range map[flink.JobStatus]recovery.Decision{
		"": recovery.DecisionStart, flink.Reconciling: recovery.DecisionStart,
		flink.Created: recovery.DecisionResume, flink.Initializing: recovery.DecisionResume, flink.Running: recovery.DecisionResume,
		flink.Failing: recovery.DecisionResume, flink.Restarting: recovery.DecisionResume,
		flink.Cancelling: recovery.DecisionStop,
		flink.Canceled:   recovery.DecisionWait, flink.Finished: recovery.DecisionWait, flink.Suspended: recovery.DecisionWait,
		flink.Failed: recovery.DecisionWait,
	} {
		rec := storage.Record{ID: "word-count", Status: string(status), Owner: "flink-operator-0", Epoch: 1}
		v, err := recovery.Startup(roles, rec, recovery.Policy{Manager: true}, t0)
		require.NoError(t, err, "%q", status)
		require.Equal(t, want, v.Decision, "%q", status)
		require.Zero(t, v.Failovers)
		if status == "" {
			continue
		}
		a, err := recovery.Terminate(roles, rec, storage.Claim{Owner: "flink-operator-0", Epoch: 1}, recovery.Policy{Manager: true})
		require.NoError(t, err)
		require.Equal(t, recovery.ActionHandOver, a.Kind, "%s", status)
	}
	_, err = flink.Roles(flink.Options{Failures: recovery.Allowance{Count: -1}})
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
}

func mustGet(t *testing.T, store storage.Store) storage.Record {
	t.Helper()
	rec, err := store.Get(bg, "word-count")
	require.NoError(t, err)
	return rec
}

// What a restarted operator does with a failed job, with restart on
// failure: wait for the backoff, then resubmit.
func ExampleRoles() {
	roles, _ := flink.Roles(flink.RestartingFailed)
	failedAt := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var c transition.Count
	rec := storage.Record{ID: "word-count", Status: string(flink.Failed), Since: failedAt,
		Meta: map[string]string{transition.CountKey(flink.Failures): c.Add(failedAt).String()}}
	for _, after := range []time.Duration{time.Second, 10 * time.Second} {
		v, _ := recovery.Startup(roles, rec, recovery.Policy{Manager: true}, failedAt.Add(after))
		fmt.Printf("after %v: %s to %s\n", after, v.Decision, v.To)
	}
	// Output:
	// after 1s: wait to FAILED
	// after 10s: start to RECONCILING
}
