// Package flink is the preset of the Apache Flink Kubernetes operator's
// job lifecycle (apache/flink-kubernetes-operator): Flink's JobStatus
// values as a state type ([JobStatus]), the moves the operator makes and
// observes as a transition table ([Lifecycle]), and what each status
// means to the decisions of package recovery ([Roles]) for an operator
// that drives every FlinkDeployment while its jobs run in their own
// clusters (recovery.Policy.Manager).
//
// The operator's reconciliation, in execfsm's terms:
//
//   - Deploy: a new resource has no job status (the table aliases "" to
//     RECONCILING); the operator deploys it (RECONCILING) and observes
//     CREATED, INITIALIZING, RUNNING.
//   - Upgrade (a spec change): savepoint and last-state upgrades stop the
//     job (FINISHED, with a savepoint or its HA metadata kept) and
//     redeploy it (RECONCILING); an asynchronous cancel drains through
//     CANCELLING to CANCELED first.
//   - Suspend (spec.job.state: suspended): the job stops with its state
//     kept, SUSPENDED, parked until the spec says running again.
//   - Last-state recovery: a running job whose JobManager deployment is
//     gone is redeployed from its HA metadata (RUNNING → RECONCILING);
//     the move is counted as a recovery ([Recoveries]), never as a
//     failure.
//   - Restart on failure (kubernetes.operator.job.restart.failed): a
//     FAILED job is resubmitted (FAILED → RECONCILING) once the failures
//     budget's backoff is over, while the budget lasts ([Options]).
//     Without it FAILED waits for a spec change, as the operator's does.
//   - Flink's own restarts (FAILING, RESTARTING within the cluster) count
//     nothing: they are the job's restart strategy's.
//
// A FlinkDeployment never ends while it exists: the table has no terminal
// state, and FINISHED, CANCELED, SUSPENDED and FAILED are parked until
// the operator moves them on.
package flink

import (
	"fmt"
	"sync"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// JobStatus is a Flink job's status as the operator records it
// (status.jobStatus.state, Flink's org.apache.flink.api.common.JobStatus).
type JobStatus string

// The job statuses.
const (
	Reconciling  JobStatus = "RECONCILING"
	Created      JobStatus = "CREATED"
	Initializing JobStatus = "INITIALIZING"
	Running      JobStatus = "RUNNING"
	Failing      JobStatus = "FAILING"
	Restarting   JobStatus = "RESTARTING"
	Cancelling   JobStatus = "CANCELLING"
	Canceled     JobStatus = "CANCELED"
	Failed       JobStatus = "FAILED"
	Finished     JobStatus = "FINISHED"
	Suspended    JobStatus = "SUSPENDED"
)

// The table's counters.
const (
	// Failures counts the moves into FAILED: the budget restart on
	// failure spends.
	Failures = "failures"
	// Recoveries counts last-state recoveries: a running job moved back to
	// RECONCILING because its JobManager deployment was gone. No budget
	// limits them; they are a disruption, not a failure.
	Recoveries = "recoveries"
)

// live are the statuses of a job that exists in its cluster.
var live = []JobStatus{Created, Initializing, Running, Failing, Restarting}

// LifecycleBuilder returns a builder holding the operator's job table,
// for a caller who adds guards before building. [Lifecycle] builds it.
func LifecycleBuilder() *transition.Builder[JobStatus] {
	b := transition.New(Reconciling).
		States(Reconciling, Created, Initializing, Running, Failing, Restarting, Cancelling, Canceled, Failed, Finished, Suspended).
		Alias(Reconciling, "").
		// A deployment comes up, fails to, or finds its job already over.
		Allow(Reconciling, Created, Initializing, Running, Failed, Finished).
		Allow(Created, Initializing, Running, Failing, Failed, Cancelling, Finished, Suspended, Reconciling).
		Allow(Initializing, Created, Running, Failing, Failed, Cancelling, Finished, Suspended, Reconciling).
		// A running job fails over within its cluster (FAILING,
		// RESTARTING), ends (FINISHED: bounded input, or stopped with a
		// savepoint for an upgrade), is cancelled, suspended, failed, or
		// recovered from its last state.
		Allow(Running, Failing, Restarting, Cancelling, Finished, Failed, Suspended, Reconciling).
		Allow(Failing, Restarting, Running, Failed, Cancelling, Reconciling).
		Allow(Restarting, Created, Initializing, Running, Failing, Failed, Cancelling, Reconciling).
		// A job whose cancel was asked ends cancelled, or finished (a
		// stop-with-savepoint): a failure meanwhile is no reason to
		// resubmit what the user stopped.
		Allow(Cancelling, Canceled, Finished).
		// Redeployed: an upgrade, a resume, a spec change, a restart on
		// failure.
		Allow(Canceled, Reconciling).
		Allow(Finished, Reconciling).
		Allow(Suspended, Reconciling).
		Allow(Failed, Reconciling)
	for _, s := range append([]JobStatus{Reconciling}, live...) {
		b.Count(Failures, s, Failed)
	}
	for _, s := range live {
		b.Count(Recoveries, s, Reconciling)
	}
	return b
}

var lifecycle = sync.OnceValues(func() (*transition.Table[JobStatus], error) {
	return LifecycleBuilder().Build()
})

// Lifecycle returns the operator's job table. It is built once and shared;
// a Table is immutable.
func Lifecycle() *transition.Table[JobStatus] {
	t, err := lifecycle()
	if err != nil {
		// The table is a constant of this package and its tests build it;
		// failing here means the package itself is broken.
		panic("flink: the lifecycle table does not build: " + err.Error())
	}
	return t
}

// Options are the operator's settings the roles depend on.
type Options struct {
	// RestartFailed is kubernetes.operator.job.restart.failed: a FAILED
	// job is resubmitted once the failures budget's backoff is over.
	RestartFailed bool
	// Failures is how many failures are resubmitted (the operator's:
	// unlimited); a job may carry its own limit,
	// recovery.LimitKey(Failures). Past it the job stays FAILED.
	Failures recovery.Allowance
	// Backoff is how long a failed job waits before it is resubmitted
	// (the operator's: none).
	Backoff recovery.Backoff
}

// Roles returns what each status means to the decisions of package
// recovery under o: RECONCILING is not started (the operator deploys);
// the statuses of a job in its cluster run; CANCELLING drains to
// CANCELED; CANCELED, FINISHED, SUSPENDED and FAILED are parked; a
// failure writes FAILED; the failures budget is o's, and with
// RestartFailed a timer resubmits a FAILED job once its backoff is over.
// The error is for Options the roles cannot take (a negative count, a
// backoff whose Max is below its Initial).
func Roles(o Options) (*recovery.Roles[JobStatus], error) {
	b := recovery.DefineRoles(Lifecycle()).
		NotStarted(Reconciling).
		Running(live...).
		Stopping(Cancelling, Canceled).
		Parked(Canceled, Finished, Suspended, Failed).
		Failed(Failed).
		Budget(recovery.Budget[JobStatus]{Counter: Failures, Allowance: o.Failures, Backoff: o.Backoff, Exhausted: Failed})
	if o.RestartFailed {
		b.Timer(recovery.Timer[JobStatus]{State: Failed, Budget: Failures, Then: Reconciling})
	}
	roles, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("flink: %w", err)
	}
	return roles, nil
}

// OperatorDefaults are the operator's own settings: no restart on
// failure; were it on, every failure resubmitted at once.
var OperatorDefaults = Options{Failures: recovery.Allowance{Unlimited: true}}

// RestartingFailed resubmits a failed job, as the operator with
// kubernetes.operator.job.restart.failed does, but waits 10 seconds
// after the first failure, doubling to 5 minutes, so that a job that
// fails at once does not loop.
var RestartingFailed = Options{RestartFailed: true, Failures: recovery.Allowance{Unlimited: true},
	Backoff: recovery.Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute, Growth: recovery.GrowthExponential}}
