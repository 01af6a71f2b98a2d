package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A retrying batch job, as a scheduler with a pending-rerun state has it:
// a run that fails waits out a backoff in Backoff, then is submitted
// again, until its failures budget is spent. Submission failures are a
// budget of their own; the job-wide deadline, set per job, runs from the
// first start.
type Run string

const (
	Queued    Run = "queued"
	Submitted Run = "submitted"
	Working   Run = "working"
	Backoff   Run = "backoff"
	Succeeded Run = "succeeded"
	Errored   Run = "errored"
)

func retryingTable(t testing.TB) *transition.Table[Run] {
	t.Helper()
	table, err := transition.New(Queued).
		Allow(Queued, Submitted, Errored).
		Allow(Submitted, Working, Backoff, Errored).
		Allow(Working, Succeeded, Backoff, Errored).
		Allow(Backoff, Submitted, Errored).
		Terminal(Succeeded, Errored).
		Count("failures", Working, Backoff).
		Count("submissions", Submitted, Backoff).
		Count("starts", Submitted, Working).
		Build()
	require.NoError(t, err)
	return table
}

var failuresBudget = recovery.Budget[Run]{
	Counter:   "failures",
	Allowance: recovery.Allowance{Count: 2},
	Backoff:   recovery.Backoff{Initial: 10 * time.Second, Max: time.Minute, Growth: recovery.GrowthExponential},
	Exhausted: Errored,
}

func retryingBuilder(t testing.TB) *recovery.RolesBuilder[Run] {
	b := recovery.DefineRoles(retryingTable(t)).
		NotStarted(Queued, Backoff).Running(Submitted, Working).Failed(Errored).
		Budget(failuresBudget).
		Budget(recovery.Budget[Run]{Counter: "submissions", Allowance: recovery.Allowance{Count: 5, Window: 10 * time.Minute}, Exhausted: Errored}).
		Timer(recovery.Timer[Run]{State: Backoff, Budget: "failures", Then: Submitted})
	for _, s := range []Run{Submitted, Working, Backoff} {
		b.Timer(recovery.Timer[Run]{State: s, Since: "starts", Name: "active-deadline", Then: Errored})
	}
	return b
}

func retryingRoles(t testing.TB) *recovery.Roles[Run] {
	t.Helper()
	roles, err := retryingBuilder(t).Build()
	require.NoError(t, err)
	return roles
}

// job is a job's record moved through the table by an authority at the
// times given (each move a second after the last unless the clock is
// moved), as the scheduler's own loop would.
type job struct {
	t     *testing.T
	exec  *transition.Persisted[Run]
	store *storage.Memory
	clock *reconciletest.Clock
}

func newJob(t *testing.T, meta map[string]string) *job {
	j := &job{t: t, store: storage.NewMemory(), clock: reconciletest.NewClock(t0)}
	var err error
	j.exec, err = transition.NewPersisted(retryingTable(t), j.store, "job-1", transition.PersistedOptions{Actor: "scheduler", Clock: j.clock.Now})
	require.NoError(t, err)
	_, err = j.exec.Create(bg, transition.Update[Run]{To: Queued, Meta: meta})
	require.NoError(t, err)
	return j
}

func (j *job) move(to ...Run) {
	j.t.Helper()
	for _, s := range to {
		j.clock.Advance(time.Second)
		_, err := j.exec.Fire(bg, s, "")
		require.NoError(j.t, err, "to %s", s)
	}
}

func (j *job) record() storage.Record {
	j.t.Helper()
	rec, err := j.store.Get(bg, "job-1")
	require.NoError(j.t, err)
	return rec
}

func TestBackoffGrowsAsItSaysAndStopsAtItsMax(t *testing.T) {
	for _, tc := range []struct {
		b     recovery.Backoff
		spent []int
		want  []time.Duration
	}{
		{recovery.Backoff{}, []int{0, 1, 5}, []time.Duration{0, 0, 0}},
		{recovery.Backoff{Initial: time.Second}, []int{0, 1, 5}, []time.Duration{0, time.Second, time.Second}},
		{recovery.Backoff{Initial: time.Second, Growth: recovery.GrowthLinear}, []int{1, 3, 10}, []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}},
		{recovery.Backoff{Initial: time.Second, Max: 5 * time.Second, Growth: recovery.GrowthLinear}, []int{3, 10}, []time.Duration{3 * time.Second, 5 * time.Second}},
		{recovery.Backoff{Initial: 10 * time.Second, Max: 6 * time.Minute, Growth: recovery.GrowthExponential},
			[]int{1, 2, 3, 6, 7, 1000}, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 320 * time.Second, 6 * time.Minute, 6 * time.Minute}},
	} {
		for k, n := range tc.spent {
			require.Equal(t, tc.want[k], tc.b.After(n), "%v after %d", tc.b, n)
		}
	}
	require.Equal(t, "10s doubling to 6m0s", recovery.Backoff{Initial: 10 * time.Second, Max: 6 * time.Minute, Growth: recovery.GrowthExponential}.String())
}

// No backoff overflows, shrinks as more is spent, or passes its Max.
func TestBackoffNeverShrinksNorOverflows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := recovery.Backoff{
			Initial: time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "initial")),
			Growth:  recovery.Growth(rapid.IntRange(0, 2).Draw(t, "growth")),
		}
		if rapid.Bool().Draw(t, "capped") {
			b.Max = b.Initial + time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "extra"))
		}
		prev := time.Duration(0)
		for n := 1; n < 80; n++ {
			d := b.After(n)
			require.GreaterOrEqual(t, d, prev, "after %d", n)
			require.Positive(t, d)
			if b.Max > 0 {
				require.LessOrEqual(t, d, b.Max)
			}
			prev = d
		}
	})
}

func TestGrowthNamesReadBack(t *testing.T) {
	for _, g := range []recovery.Growth{recovery.GrowthFixed, recovery.GrowthLinear, recovery.GrowthExponential} {
		back, err := recovery.ParseGrowth(g.String())
		require.NoError(t, err)
		require.Equal(t, g, back)
	}
	_, err := recovery.ParseGrowth("quadratic")
	require.ErrorIs(t, err, recovery.ErrInvalidPolicy)
}

// Every failure spends the failures budget on the move the scheduler
// makes, the record says when the next submission is due, and the
// submission failures' budget is untouched.
func TestSpendingIsCountedOnTheMovesAndKeptInTheRecord(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working, Backoff)
	failedAt := j.clock.Now()
	s, err := roles.Spending(j.record(), "failures", j.clock.Now())
	require.NoError(t, err)
	require.Equal(t, recovery.Spending{Counter: "failures", Spent: 1, Allowance: recovery.Allowance{Count: 2},
		Last: failedAt, NotBefore: failedAt.Add(10 * time.Second)}, s)
	require.Equal(t, 1, s.Left())

	j.move(Submitted, Working, Backoff)
	s, err = roles.Spending(j.record(), "failures", j.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 2, s.Spent)
	require.Equal(t, j.clock.Now().Add(20*time.Second), s.NotBefore, "the second failure waits twice as long")
	require.False(t, s.Exhausted)

	sub, err := roles.Spending(j.record(), "submissions", j.clock.Now())
	require.NoError(t, err)
	require.Zero(t, sub.Spent, "a run's failure spends nothing of the submissions' budget")
	_, err = roles.Spending(j.record(), "starts", j.clock.Now())
	require.ErrorIs(t, err, recovery.ErrInvalidPolicy, "starts are counted, not budgeted")
}

// A controller restarted while the job waits out its backoff waits, and
// is told until when; once the backoff is over it submits at once.
func TestAStartDuringABackoffWaitsAndAStartAfterItResubmits(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working, Backoff)
	due := j.clock.Now().Add(10 * time.Second)

	v, err := recovery.Startup(roles, j.record(), recovery.Policy{}, j.clock.Now().Add(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionWait, v.Decision)
	require.Equal(t, due, v.Until)
	require.Equal(t, Backoff, v.To, "nothing is written but the start")

	v, err = recovery.Startup(roles, j.record(), recovery.Policy{}, due)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision, "submitted is running: the controller carries on there")
	require.Equal(t, Submitted, v.To)
	require.Contains(t, v.Reason, "failures's backoff is over")
	require.NotContains(t, v.Meta, recovery.MetaFailure, "a retry is no failure")
}

// The move past the allowance lands in the state the failures enter;
// whoever looks next (a start, the controller's Advance, the Reaper)
// moves it to the budget's end, with the reason.
func TestAnExhaustedBudgetEndsTheJobWhoeverLooks(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	for range 3 {
		j.move(Submitted, Working, Backoff)
	}
	rec := j.record()
	s, err := roles.Spending(rec, "failures", j.clock.Now())
	require.NoError(t, err)
	require.True(t, s.Exhausted)
	require.Zero(t, s.Left())

	v, err := recovery.Startup(roles, rec, recovery.Policy{}, j.clock.Now())
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionFail, v.Decision)
	require.Equal(t, Errored, v.To)
	require.Equal(t, "budget failures exhausted: 3 counted, 2 ever allowed", v.Reason)
	require.Equal(t, v.Reason, v.Meta[recovery.MetaFailure])

	var seen []recovery.Enforced[Run]
	d := decider(t, roles, recovery.Policy{Clock: j.clock.Now}).WithObserver(recovery.Observer[Run]{
		Enforced: func(e recovery.Enforced[Run]) { seen = append(seen, e) },
	})
	e, wait, err := d.Advance(bg, j.exec)
	require.NoError(t, err)
	require.Zero(t, wait, "nothing falls due in a terminal state")
	require.Equal(t, recovery.Enforced[Run]{ID: "job-1", From: Backoff, To: Errored, Cause: recovery.CauseBudget,
		Reason: v.Reason, Budget: "failures", Due: j.clock.Now()}, e)
	require.Equal(t, []recovery.Enforced[Run]{e}, seen)
	rec = j.record()
	require.Equal(t, string(Errored), rec.Status)
	require.Equal(t, v.Reason, rec.Reason)
}

// An execution carries its own limit (Volcano's maxRetry from the job's
// spec); zero allows none.
func TestAnExecutionsOwnLimitReplacesTheBudgets(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, map[string]string{recovery.LimitKey("failures"): "0"})
	j.move(Submitted, Working, Backoff)
	d, ok, err := roles.Due(j.record(), j.clock.Now())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, recovery.CauseBudget, d.Cause)
	require.Equal(t, "budget failures exhausted: 1 counted, 0 ever allowed", d.Reason)

	j = newJob(t, map[string]string{recovery.LimitKey("failures"): "5"})
	for range 3 {
		j.move(Submitted, Working, Backoff)
	}
	d, ok, err = roles.Due(j.record(), j.clock.Now())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, recovery.CauseTimer, d.Cause, "3 of 5: the backoff, not the end")
	require.Equal(t, j.clock.Now().Add(40*time.Second), d.Due)

	j = newJob(t, map[string]string{recovery.LimitKey("failures"): "lots"})
	j.move(Submitted, Working, Backoff)
	_, _, err = roles.Due(j.record(), j.clock.Now())
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	_, err = recovery.Startup(roles, j.record(), recovery.Policy{}, j.clock.Now())
	require.ErrorIs(t, err, storage.ErrInvalidRecord, "no decision on a limit that does not read")
}

// A window forgets what was spent before it.
func TestAWindowedBudgetForgetsOldSpending(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted)
	for range 5 {
		j.move(Backoff, Submitted)
	}
	s, err := roles.Spending(j.record(), "submissions", j.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 5, s.Spent)
	j.clock.Advance(11 * time.Minute)
	j.move(Backoff)
	s, err = roles.Spending(j.record(), "submissions", j.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 1, s.Spent)
	require.False(t, s.Exhausted)
}

// A job-wide deadline runs from the first start, across retries, for the
// jobs whose spec sets one; the Reaper ends such a job in any live state.
func TestAJobWideDeadlineRunsFromTheFirstStartForJobsThatSetOne(t *testing.T) {
	roles := retryingRoles(t)
	unset := newJob(t, nil)
	unset.move(Submitted, Working)
	_, ok, err := roles.Due(unset.record(), unset.clock.Now().Add(100*time.Hour))
	require.NoError(t, err)
	require.False(t, ok, "no deadline for a job that sets none")

	j := newJob(t, map[string]string{recovery.TimerKey("active-deadline"): "90s"})
	j.move(Submitted)
	_, ok, err = roles.Due(j.record(), j.clock.Now())
	require.NoError(t, err)
	require.False(t, ok, "not started yet")
	j.move(Working)
	started := j.clock.Now()
	j.move(Backoff)
	j.clock.Advance(10 * time.Second)
	j.move(Submitted, Working)

	reaper, err := decider(t, roles, recovery.Policy{}).NewReaper(j.store, recovery.ReaperOptions{Clock: j.clock})
	require.NoError(t, err)
	res, err := reaper.Reconcile(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, started.Add(90*time.Second).Sub(j.clock.Now()), res.RequeueAfter, "due 90s after the first start, not this one")
	j.clock.Advance(res.RequeueAfter)
	_, err = reaper.Reconcile(bg, "job-1")
	require.NoError(t, err)
	rec := j.record()
	require.Equal(t, string(Errored), rec.Status)
	require.Equal(t, "1m30s since the first starts move, past its deadline of 1m30s (timer active-deadline)", rec.Reason)
	require.Equal(t, rec.Reason, rec.Meta[recovery.MetaFailure])
}

// A duration that does not read is no decision's input: the Reaper says
// so once, as a terminal error, and writes nothing.
func TestTheReaperLeavesARecordWhoseDurationDoesNotRead(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, map[string]string{recovery.TimerKey("active-deadline"): "a while"})
	j.move(Submitted, Working)
	before := j.record()
	reaper, err := decider(t, roles, recovery.Policy{}).NewReaper(j.store, recovery.ReaperOptions{Clock: j.clock})
	require.NoError(t, err)
	_, err = reaper.Reconcile(bg, "job-1")
	require.ErrorIs(t, err, reconcile.ErrTerminal)
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.Equal(t, before, j.record())
}

// Advance in a live controller's loop: nothing due says how long until
// something is; the backoff's end resubmits.
func TestAdvanceMovesOnWhenTheBackoffIsOver(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working, Backoff)
	d := decider(t, roles, recovery.Policy{Clock: j.clock.Now})
	e, wait, err := d.Advance(bg, j.exec)
	require.NoError(t, err)
	require.Zero(t, e.Cause)
	require.Equal(t, 10*time.Second, wait)
	j.clock.Advance(wait)
	e, wait, err = d.Advance(bg, j.exec)
	require.NoError(t, err)
	require.Equal(t, recovery.CauseTimer, e.Cause)
	require.Equal(t, Submitted, e.To)
	require.Zero(t, wait, "submitted has no timer for a job without a deadline")
	require.Equal(t, string(Submitted), j.record().Status)

	_, _, err = (&recovery.Decider[Run]{}).Advance(bg, j.exec)
	require.Error(t, err)
	_, _, err = d.Advance(bg, nil)
	require.Error(t, err)
	done, cancel := context.WithCancel(bg)
	cancel()
	_, _, err = d.Advance(done, j.exec)
	require.ErrorIs(t, err, context.Canceled)
}

func TestBudgetsAndTimersAreDescribedAndRebuilt(t *testing.T) {
	roles := retryingRoles(t)
	d := roles.Describe()
	require.Equal(t, []recovery.BudgetDescription{
		{Counter: "failures", Count: 2, Initial: "10s", Max: "1m0s", Growth: "exponential", Exhausted: "errored"},
		{Counter: "submissions", Count: 5, Window: "10m0s", Exhausted: "errored"},
	}, d.Budgets)
	table, err := transition.Rebuild(roles.Table().Describe())
	require.NoError(t, err)
	rebuilt, err := recovery.RebuildRoles(table, d)
	require.NoError(t, err)
	require.Equal(t, d, rebuilt.Describe())

	for name, edit := range map[string]func(*recovery.RolesDescription){
		"growth":      func(d *recovery.RolesDescription) { d.Budgets[0].Growth = "quadratic" },
		"window":      func(d *recovery.RolesDescription) { d.Budgets[1].Window = "ten minutes" },
		"backoff":     func(d *recovery.RolesDescription) { d.Budgets[0].Initial = "-" },
		"no budget":   func(d *recovery.RolesDescription) { d.Budgets = d.Budgets[1:] },
		"timer after": func(d *recovery.RolesDescription) { d.Timers[1].After = "x" },
	} {
		bad := roles.Describe()
		edit(&bad)
		_, err := recovery.RebuildRoles(table, bad)
		require.ErrorIs(t, err, recovery.ErrInvalidRolesDescription, name)
	}
}

func TestBuildSaysEverythingWrongWithTheBudgets(t *testing.T) {
	_, err := retryingBuilder(t).
		Budget(failuresBudget).
		Budget(recovery.Budget[Run]{Counter: "preemptions", Exhausted: Errored}).
		Budget(recovery.Budget[Run]{Counter: "starts", Allowance: recovery.Allowance{Count: -1, Window: -time.Second},
			Backoff: recovery.Backoff{Initial: time.Minute, Max: time.Second, Growth: 7}, Exhausted: Working}).
		Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	for _, want := range []string{
		`the budget for counter "failures" is given twice`,
		`budget for counter "preemptions", which no move of the table counts`,
		"budget starts Allowance.Count -1 is negative",
		"budget starts: backoff Max 1s is less than Initial 1m0s",
		`budget starts: Exhausted "working" must be a terminal, not-started or parked state`,
	} {
		require.ErrorContains(t, err, want)
	}

	table, err := transition.New(Queued).Allow(Queued, Working).Allow(Working, Backoff, Errored).Allow(Backoff, Working).
		Terminal(Errored).Count("failures", Working, Backoff).Build()
	require.NoError(t, err)
	_, err = recovery.DefineRoles(table).NotStarted(Queued, Backoff).Running(Working).Failed(Errored).
		Budget(recovery.Budget[Run]{Counter: "failures", Exhausted: Errored}).Build()
	require.ErrorContains(t, err, `budget failures: "backoff", which its counted moves enter, cannot move to Exhausted "errored"`)
	require.Equal(t, 1, strings.Count(err.Error(), "budget"), "one problem, said once: %v", err)
}

// A start during a backoff is written like any start: retried by its
// controller, it returns the same verdict, Until included, and writes
// nothing more.
func TestARetriedStartDuringABackoffReturnsTheVerdictWritten(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working, Backoff)
	due := j.clock.Now().Add(10 * time.Second)
	ctl, err := transition.NewPersisted(roles.Table(), j.store, "job-1", transition.PersistedOptions{Actor: "ctl", Clock: j.clock.Now})
	require.NoError(t, err)
	d := decider(t, roles, recovery.Policy{Clock: j.clock.Now})
	v, err := d.Start(bg, ctl, storage.Lease{Holder: "ctl", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionWait, v.Decision)
	require.Equal(t, due, v.Until)
	written := j.record()

	j.clock.Advance(time.Second)
	again, err := d.Start(bg, ctl, storage.Lease{Holder: "ctl", TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, v, again)
	require.Equal(t, written, j.record())
}

// A failure the caller calls retryable takes the counted move instead of
// failing; the one past the allowance ends the job in the same End.
// The controller exits so that the next one comes while the job goes on.
func TestARetryableFailureSpendsItsBudgetInsteadOfFailing(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working)
	d := decider(t, roles, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true),
		Failovers: recovery.Allowance{Unlimited: true}, Clock: j.clock.Now})
	ctl := func(holder string) *transition.Persisted[Run] {
		p, err := transition.NewPersisted(roles.Table(), j.store, "job-1", transition.PersistedOptions{Actor: holder, Clock: j.clock.Now})
		require.NoError(t, err)
		_, err = d.Start(bg, p, storage.Lease{Holder: holder, TTL: time.Minute})
		require.NoError(t, err)
		return p
	}
	crashed := recovery.Ending{Err: errors.New("exit code 137"), Retry: "failures"}

	for k := range 2 {
		e, err := d.End(bg, ctl(fmt.Sprint("ctl-", k)), crashed, nil)
		require.NoError(t, err)
		require.Equal(t, recovery.EndWrite, e.Kind)
		require.Equal(t, Backoff, e.To)
		require.Equal(t, "retried (failures): exit code 137", e.Reason)
		require.Equal(t, recovery.DefaultRelocateExitCode, e.ExitCode, "the job goes on: a controller must come")
		_, held, err := j.store.Held(bg, "job-1")
		require.NoError(t, err)
		require.False(t, held, "released")
		j.clock.Advance(time.Minute) // past the backoff
		j.move(Submitted, Working)
	}
	e, err := d.End(bg, ctl("ctl-2"), crashed, nil)
	require.NoError(t, err)
	require.Equal(t, Errored, e.To)
	require.Equal(t, "retried (failures): exit code 137; budget failures exhausted: 3 counted, 2 ever allowed", e.Reason)
	require.Zero(t, e.ExitCode, "the job is over")
	require.Equal(t, string(Errored), j.record().Status)

	_, err = recovery.End(roles, storage.Record{ID: "job-1", Status: string(Submitted)}, storage.Claim{},
		recovery.Ending{Err: errors.New("no"), Retry: "preemptions"})
	require.ErrorIs(t, err, recovery.ErrInvalidEnding)
	_, err = recovery.End(roles, storage.Record{ID: "job-1", Status: string(Working)}, storage.Claim{},
		recovery.Ending{Finished: true, Retry: "failures"})
	require.ErrorIs(t, err, recovery.ErrInvalidRoles, "no failure, nothing to retry, and no Ends to say what finishing writes")
}

// Work names the end it earned; the table decides whether it may.
func TestEndAsWritesTheEndTheWorkEarned(t *testing.T) {
	roles := retryingRoles(t)
	j := newJob(t, nil)
	j.move(Submitted, Working)
	d := decider(t, roles, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true),
		Failovers: recovery.Allowance{Unlimited: true}, Clock: j.clock.Now})
	ctl, err := transition.NewPersisted(roles.Table(), j.store, "job-1", transition.PersistedOptions{Actor: "ctl", Clock: j.clock.Now})
	require.NoError(t, err)
	_, err = d.Start(bg, ctl, storage.Lease{Holder: "ctl", TTL: time.Minute})
	require.NoError(t, err)

	_, err = d.EndAs(bg, ctl, Queued, "", nil)
	require.ErrorIs(t, err, transition.ErrNotAllowed, "working cannot go back to queued")
	_, err = d.EndAs(bg, ctl, Run("vanished"), "", nil)
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	e, err := d.EndAs(bg, ctl, Succeeded, "3 of 4 tasks succeeded; minAvailable is 3", map[string]string{"tasks": "3/4"})
	require.NoError(t, err)
	require.Equal(t, recovery.Outcome[Run]{Kind: recovery.EndWrite, From: Working, To: Succeeded,
		Reason: "3 of 4 tasks succeeded; minAvailable is 3"}, e)
	rec := j.record()
	require.Equal(t, string(Succeeded), rec.Status)
	require.Equal(t, "3/4", rec.Meta["tasks"])

	// Ended already: kept, whatever the caller names.
	e, err = recovery.EndAs(roles, rec, storage.Claim{Owner: "ctl", Epoch: rec.Epoch}, Errored, "late")
	require.NoError(t, err)
	require.Equal(t, recovery.EndKeep, e.Kind)
	e, err = recovery.EndAs(roles, storage.Record{ID: "job-1", Status: string(Working)}, storage.Claim{}, Errored, "")
	require.NoError(t, err)
	require.Equal(t, "the work ended in errored", e.Reason)
	_, err = recovery.EndAs[Run](nil, rec, storage.Claim{}, Errored, "")
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
}
