package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// jobCase is one case of Volcano's own unit tests of its Job state
// machine (pkg/controllers/job/job_state_test.go), by its upstream name:
// the phase a Job is in, its spec, its pods and RetryCount, the action,
// and the phase and RetryCount Volcano's test expects after it. Cases
// marked "here" are not upstream: behaviours the issue names that
// upstream does not test.
type jobCase struct {
	name      string
	phase     Phase
	action    Action
	spec      Spec
	pods      Pods
	retries   int
	want      Phase
	wantRetry int
}

func ptr(n int32) *int32 { return &n }

var twoPodsOfOneTask = []Task{{Name: "task1", Replicas: 2}}
var fivePodsOfOneTask = []Task{{Name: "task1", Replicas: 5}}

var upstreamCases = []jobCase{
	{name: "AbortedState-ResumeAction case", phase: Aborted, action: ResumeJob, want: Restarting, wantRetry: 1},
	{name: "AbortedState-AnyOtherAction case", phase: Aborted, action: RestartJob, want: Aborted},

	{name: "AbortingState-ResumeAction case", phase: Aborting, action: ResumeJob, want: Restarting, wantRetry: 1},
	{name: "AbortingState-AnyOtherAction case with pods count equal to 0", phase: Aborting, action: RestartJob, want: Aborted},
	{name: "AbortingState-AnyOtherAction case with Pods count not equal to 0", phase: Aborting, action: RestartJob,
		pods: Pods{Pending: 1}, want: Aborting},

	{name: "CompletingState- With pod count not equal to zero", phase: Completing, action: ResumeJob, pods: Pods{Running: 2}, want: Completing},
	{name: "CompletingState- With pod count equal to zero", phase: Completing, action: ResumeJob, want: Completed},

	{name: "FinishedState Test Case", phase: Completed, action: ResumeJob, want: Completed},

	{name: "PendingState- RestartJobAction case With terminating pod count equal to zero", phase: Pending, action: RestartJob, want: Restarting, wantRetry: 1},
	{name: "PendingState- RestartJobAction case With terminating pod count not equal to zero", phase: Pending, action: RestartJob,
		pods: Pods{Terminating: 2}, want: Restarting, wantRetry: 1},
	{name: "PendingState- AbortJobAction case With terminating pod count equal to zero", phase: Pending, action: AbortJob, want: Aborting},
	{name: "PendingState- AbortJobAction case With terminating pod count not equal to zero", phase: Pending, action: AbortJob,
		pods: Pods{Terminating: 2}, want: Aborting},
	{name: "PendingState- TerminateJobAction case With terminating pod count not equal to zero", phase: Pending, action: TerminateJob,
		pods: Pods{Terminating: 2}, want: Terminating},
	{name: "PendingState- CompleteJobAction case With terminating pod count equal to zero", phase: Pending, action: CompleteJob, want: Completing},
	{name: "PendingState- CompleteJobAction case With terminating pod count not equal to zero", phase: Pending, action: CompleteJob,
		pods: Pods{Terminating: 2}, want: Completing},
	{name: "PendingState- EnqueueAction case With Min Available equal to running pods", phase: Pending, action: Enqueue,
		spec: Spec{MinAvailable: 3}, pods: Pods{Running: 3}, want: Running},
	{name: "PendingState- EnqueueAction case With Min Available not equal to running pods", phase: Pending, action: Enqueue,
		spec: Spec{MinAvailable: 3}, pods: Pods{Running: 2}, want: Pending},
	{name: "PendingState- Default case With Min Available equal to running pods", phase: Pending, action: SyncJob,
		spec: Spec{MinAvailable: 3}, pods: Pods{Running: 2}, want: Pending},

	{name: "RestartingState- RetryCount is equal to or greater than MaxRetry", phase: Restarting, action: RestartJob,
		spec: Spec{MaxRetry: 3}, retries: 3, want: Failed, wantRetry: 3},
	// Upstream keeps this case's minAvailable in the Job's status (1); the
	// spec carries it here.
	{name: "RestartingState- RetryCount is less than MaxRetry", phase: Restarting, action: RestartJob,
		spec:    Spec{MaxRetry: 3, MinAvailable: 1, Tasks: []Task{{Name: "task1", Replicas: 1}, {Name: "task2", Replicas: 1}}},
		retries: 1, want: Pending, wantRetry: 1},

	{name: "RunningState- RestartJobAction case and Terminating Pods not equal to 0", phase: Running, action: RestartJob,
		pods: Pods{Terminating: 2}, want: Restarting, wantRetry: 1},
	{name: "RunningState- RestartJobAction case and Terminating Pods equal to 0", phase: Running, action: RestartJob, want: Restarting, wantRetry: 1},
	{name: "RunningState- AbortAction case and Terminating Pods equal to 0", phase: Running, action: AbortJob, want: Aborting},
	{name: "RunningState- AbortAction case and Terminating Pods not equal to 0", phase: Running, action: AbortJob,
		pods: Pods{Terminating: 2}, want: Aborting},
	{name: "RunningState- TerminateJobAction case and Terminating Pods equal to 0", phase: Running, action: TerminateJob, want: Terminating},
	{name: "RunningState- TerminateJobAction case and Terminating Pods not equal to 0", phase: Running, action: TerminateJob,
		pods: Pods{Terminating: 2}, want: Terminating},
	{name: "RunningState- CompleteJobAction case and Terminating Pods equal to 0", phase: Running, action: CompleteJob, want: Completing},
	{name: "RunningState- CompleteJobAction case and Terminating Pods not equal to 0", phase: Running, action: CompleteJob,
		pods: Pods{Terminating: 2}, want: Completing},
	{name: "RunningState- Default case and Total is equal to failed+succeeded", phase: Running, action: SyncJob,
		spec: Spec{Tasks: twoPodsOfOneTask}, pods: Pods{Succeeded: 2}, want: Completed},
	{name: "RunningState- Default case and Total is not equal to failed+succeeded", phase: Running, action: SyncJob,
		spec: Spec{Tasks: twoPodsOfOneTask}, pods: Pods{Succeeded: 1}, want: Running},
	{name: "RunningState- Default case and running back to pending When pending equal to total", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 3, Tasks: fivePodsOfOneTask}, pods: Pods{Pending: 5}, want: Pending},
	{name: "RunningState- Default case and running back to pending When pods status pending>(total-minAvailable)", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 3, Tasks: fivePodsOfOneTask}, pods: Pods{Pending: 3, Running: 2}, want: Pending},
	{name: "RunningState- Default case and keep running When pods status pending<=(total-minAvailable)", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 3, Tasks: fivePodsOfOneTask}, pods: Pods{Pending: 2, Running: 1, Succeeded: 1, Failed: 1}, want: Running},

	{name: "TerminatingState- With pod count not equal to zero", phase: Terminating, action: TerminateJob, pods: Pods{Running: 2}, want: Terminating},
	{name: "TerminatingState- With pod count equal to zero", phase: Terminating, action: TerminateJob, want: Terminated},
}

var ownCases = []jobCase{
	{name: "here: maxRetry 1 retries nothing", phase: Restarting, action: SyncJob, spec: Spec{MaxRetry: 1}, retries: 1, want: Failed, wantRetry: 1},
	{name: "here: the default maxRetry fails the third restart", phase: Restarting, action: SyncJob, retries: 3, want: Failed, wantRetry: 3},
	{name: "here: the default maxRetry drains the second restart back to pending", phase: Restarting, action: SyncJob,
		spec: Spec{Tasks: twoPodsOfOneTask}, retries: 2, want: Pending, wantRetry: 2},
	{name: "here: a job created with an empty phase is pending", phase: "", action: Enqueue, pods: Pods{Running: 1}, want: Running},
	{name: "here: failed pods it tolerates complete a job", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 3, Tasks: fivePodsOfOneTask}, pods: Pods{Succeeded: 3, Failed: 2}, want: Completed},
	{name: "here: too few succeeded pods fail a job", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 3, Tasks: fivePodsOfOneTask}, pods: Pods{Succeeded: 2, Failed: 3}, want: Failed},
	{name: "here: a task short of its own minAvailable fails a job", phase: Running, action: SyncJob,
		spec: Spec{MinAvailable: 4, Tasks: []Task{{Name: "ps", Replicas: 2, MinAvailable: ptr(2)}, {Name: "worker", Replicas: 2, MinAvailable: ptr(2)}}},
		pods: Pods{Succeeded: 3, Failed: 1, ByTask: map[string]int32{"ps": 1, "worker": 2}}, want: Failed},
	{name: "here: minSuccess completes a job early", phase: Running, action: SyncJob,
		spec: Spec{MinSuccess: ptr(2), Tasks: fivePodsOfOneTask}, pods: Pods{Succeeded: 2, Running: 3}, want: Completed},
	{name: "here: a restart of a suspended job counts", phase: Aborted, action: ResumeJob, retries: 1, want: Restarting, wantRetry: 2},
}

// retried returns the metadata of a Job that has restarted n times.
func retried(n int, meta map[string]string) map[string]string {
	if n == 0 {
		return meta
	}
	out := map[string]string{}
	for k, v := range meta {
		out[k] = v
	}
	var c transition.Count
	for k := range n {
		c = c.Add(time.Date(2026, 12, 1, 0, k, 0, 0, time.UTC))
	}
	out[transition.CountKey(volcano.Retries)] = c.String()
	return out
}

// Every case of Volcano's state machine tests, and the ones here, carried
// out through execfsm on a Persisted over the memory store: the moves,
// the retries counted by the table, the budget, the ends of the drains
// and the end the work earned.
func TestVolcanosOwnCasesHoldThroughExecfsm(t *testing.T) {
	table, roles := volcano.Lifecycle(), volcano.Roles()
	decide, err := recovery.NewDecider(roles, recovery.Policy{Manager: true})
	require.NoError(t, err)
	m := Manager{Roles: roles, Decide: decide}
	for k, tc := range append(append([]jobCase(nil), upstreamCases...), ownCases...) {
		t.Run(tc.name, func(t *testing.T) {
			store := storage.NewMemory()
			id := fmt.Sprint("job-", k)
			exec, err := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: "vc-controller-manager"})
			require.NoError(t, err)
			phase := tc.phase
			if phase == "" {
				phase = Pending // a record is written with the phase's own name
			}
			_, err = exec.Create(bg, transition.Update[Phase]{To: phase, Meta: retried(tc.retries, limitMeta(tc.spec))})
			require.NoError(t, err)

			got, err := m.Execute(bg, exec, tc.action, tc.spec, tc.pods)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			rec, err := store.Get(bg, id)
			require.NoError(t, err)
			require.Equal(t, string(tc.want), rec.Status, "the record says so")
			count, err := transition.CountOf(rec, volcano.Retries)
			require.NoError(t, err)
			require.Equal(t, tc.wantRetry, count.Total(), "RetryCount")
			if tc.want == Failed && tc.phase == Restarting {
				require.Contains(t, rec.Meta[recovery.MetaFailure], "budget retries exhausted")
			}
		})
	}
	require.Len(t, upstreamCases, 35, "every case upstream tests")
}

// A controller-manager restarted while Jobs are in every phase decides
// for each what Volcano does: a drain carries on, a suspended Job waits,
// a running one is resumed without counting anything against it, an
// ended one is left.
func TestAManagerStartingFindsEachPhaseWhereVolcanoLeavesIt(t *testing.T) {
	roles := volcano.Roles()
	for phase, want := range map[Phase]recovery.Decision{
		"":          recovery.DecisionStart,
		Pending:     recovery.DecisionStart,
		Running:     recovery.DecisionResume,
		Restarting:  recovery.DecisionStop,
		Aborting:    recovery.DecisionStop,
		Aborted:     recovery.DecisionWait,
		Completing:  recovery.DecisionStop,
		Terminating: recovery.DecisionStop,
		Completed:   recovery.DecisionRefuse,
		Terminated:  recovery.DecisionRefuse,
		Failed:      recovery.DecisionRefuse,
	} {
		rec := storage.Record{ID: "job-1", Status: string(phase), Owner: "manager-a", Epoch: 1}
		v, err := recovery.Startup(roles, rec, recovery.Policy{Manager: true}, time.Now())
		require.NoError(t, err, "%q", phase)
		require.Equal(t, want, v.Decision, "%q", phase)
		require.Zero(t, v.Failovers, "%q", phase)
	}
	// A Job restarted past its limit while no manager ran fails at the
	// next manager's start.
	rec := storage.Record{ID: "job-1", Status: string(Restarting), Meta: retried(3, nil)}
	v, err := recovery.Startup(roles, rec, recovery.Policy{Manager: true}, time.Now())
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionFail, v.Decision)
	require.Equal(t, Failed, v.To)
}
